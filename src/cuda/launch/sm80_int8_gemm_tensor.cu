// Per-tensor INT8 GEMM instantiations (integer accumulation over all of K, requantizing epilogue).
#include "cuda/launch/int8_gemm_launch.cuh"

namespace mixq::cuda::int8k {

void launch_tensor(const Int8GemmParams& p, int tile, cudaStream_t stream) {
  launch_tile<int(kInt8TensorBlockK), true, false>(p, tile, stream);
}

}  // namespace mixq::cuda::int8k
