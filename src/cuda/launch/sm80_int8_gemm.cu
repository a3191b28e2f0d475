// The sm_80 INT8 tile launchers (16 x 32, 64 x 64, 128 x 128 CTA tiles; what runs on Hopper below
// the wgmma kernels' reach, or without sm_90a): the K-block flavour of the parameters picks the
// instantiation file (sm80_int8_gemm_{g64,g128,tensor}.cu).
#include "cuda/launch/int8_gemm_launch.cuh"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

void launch_tile(const Int8GemmParams& p, int tile, cudaStream_t stream) {
  MIXQ_CHECK(p.mode == Int8Mode::Tensor ? p.kb == kInt8TensorBlockK : (p.kb == 64 || p.kb == 128),
             ErrorCode::Internal, "int8 gemm: K block ", p.kb, " has no kernel");
  if (p.mode == Int8Mode::Tensor) int8k::launch_tensor(p, tile, stream);
  else if (p.kb == 64) int8k::launch_block_g64(p, tile, stream);
  else int8k::launch_block_g128(p, tile, stream);
}

}  // namespace

void launch_sm80_int8_small(const Int8GemmParams& p, cudaStream_t s) { launch_tile(p, 0, s); }
void launch_sm80_int8_medium(const Int8GemmParams& p, cudaStream_t s) { launch_tile(p, 1, s); }
void launch_sm80_int8_large(const Int8GemmParams& p, cudaStream_t s) { launch_tile(p, 2, s); }

}  // namespace mixq::cuda
