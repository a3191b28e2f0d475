// The Hopper FP8 block GEMM with 256 x 128 tiles: two m64 sub-tiles per consumer warpgroup, one
// accumulator set reused by the sub-tiles in turn (sm90_block_gemm.cuh, kAccSets = 0), 4 stages
// of 48 KB. Single CTAs.
#include "cuda/launch/sm90_fp8_gemm_launch.cuh"

namespace mixq::cuda {
template void launch_fp8<128, 4, 1, 0, 2>(const Sm90Fp8GemmArgs&, cudaStream_t);
}  // namespace mixq::cuda
