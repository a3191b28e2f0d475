// The INT8 per-tensor conv2d as the sm_80 INT8 GEMM's implicit-GEMM form (one .cu of its own so
// that its three instantiations compile in parallel with the GEMM's).
#include "cuda/launch/conv_kernels.hpp"
#include "cuda/launch/int8_gemm_launch.cuh"

namespace mixq::cuda {

void launch_conv_int8_gemm(const Int8GemmParams& p, int tile, cudaStream_t stream) {
  int8k::launch_tile<int(kInt8TensorBlockK), true, false, true>(p, tile, stream);
}

}  // namespace mixq::cuda
