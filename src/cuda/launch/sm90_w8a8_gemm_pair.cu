// The Hopper INT8 W8A8 block GEMM: CTA pairs of 128 x 128 tiles multicasting the weight tile, symmetric and offset weights.
#include "cuda/launch/sm90_w8a8_gemm_launch.cuh"

namespace mixq::cuda {
template void launch_w8a8<true, 2, 1, 128>(const Int8GemmParams&, cudaStream_t, const char*);
template void launch_w8a8<false, 2, 1, 128>(const Int8GemmParams&, cudaStream_t, const char*);
}  // namespace mixq::cuda
