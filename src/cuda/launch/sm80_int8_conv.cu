// The INT8 per-tensor conv2d as the sm_80 INT8 GEMM's implicit-GEMM form (one .cu of its own so
// that its three instantiations compile in parallel with the GEMM's).
#include "cuda/launch/conv_kernels.hpp"
#include "cuda/launch/int8_gemm_launch.cuh"

namespace mixq::cuda {

// 64 x 64 with 3 stages instead of 5: 49 KB of shared memory, so 4 CTAs per SM (the register
// limit) instead of 2, for K loops of a few blocks whose pipeline is mostly fill.
using CfgMediumShort = int8k::Int8Cfg<64, 64, 2, 2, int(kInt8TensorBlockK), 3, true, false, true>;

void launch_conv_int8_gemm(const Int8GemmParams& p, int tile, cudaStream_t stream) {
  if (tile == 3) int8k::launch_cfg<CfgMediumShort>(p, stream);
  else int8k::launch_tile<int(kInt8TensorBlockK), true, false, true>(p, tile, stream);
}

}  // namespace mixq::cuda
