// Streaming weight-only kernel instantiations for bf16 activations.
#include "cuda/wo_stream_launch.cuh"

namespace mixq::cuda {
void launch_wo_stream_bf16(const WoStreamParams& p, int mt, int codes, dim3 grid, size_t smem,
                              cudaStream_t stream) {
  launch_stream_for_type<__nv_bfloat16, false>(p, mt, codes, grid, smem, stream);
}
}  // namespace mixq::cuda
