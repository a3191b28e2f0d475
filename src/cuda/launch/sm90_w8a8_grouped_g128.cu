// The grouped INT8 W8A8 block GEMM with K blocks of 128, symmetric and offset weights.
#include "cuda/launch/sm90_w8a8_grouped_launch.cuh"

namespace mixq::cuda {
template void launch_w8a8_grouped<true, 128>(const Sm90Int8GroupedArgs&, cudaStream_t);
template void launch_w8a8_grouped<false, 128>(const Sm90Int8GroupedArgs&, cudaStream_t);
}  // namespace mixq::cuda
