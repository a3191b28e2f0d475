// The grouped few-token INT8 W8A8 GEMM with K blocks of 64, symmetric and offset weights.
#include "cuda/launch/sm90_w8a8_grouped_skinny.cuh"

namespace mixq::cuda {
template void launch_i8_grouped_skinny<64, true>(const Sm90Int8GroupedArgs&, const SkinnyGroupedWork&,
                                                cudaStream_t);
template void launch_i8_grouped_skinny<64, false>(const Sm90Int8GroupedArgs&, const SkinnyGroupedWork&,
                                                 cudaStream_t);
}  // namespace mixq::cuda
