// The Hopper INT8 W8A8 block GEMM: 256 x 64 tiles (two m64 sub-tiles per consumer warpgroup), symmetric and offset weights.
#include "cuda/launch/sm90_w8a8_gemm_launch.cuh"

namespace mixq::cuda {
template void launch_w8a8<true, 1, 2, 128>(const Int8GemmParams&, cudaStream_t, const char*);
template void launch_w8a8<false, 1, 2, 128>(const Int8GemmParams&, cudaStream_t, const char*);
}  // namespace mixq::cuda
