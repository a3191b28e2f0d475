// W8A8 per-block INT8 GEMM instantiations for K block 128 (symmetric and offset weights).
#include "cuda/launch/int8_gemm_launch.cuh"

namespace mixq::cuda::int8k {

void launch_block_g128(const Int8GemmParams& p, int tile, cudaStream_t stream) {
  if (p.ow) launch_tile<128, false, true>(p, tile, stream);
  else launch_tile<128, false, false>(p, tile, stream);
}

}  // namespace mixq::cuda::int8k
