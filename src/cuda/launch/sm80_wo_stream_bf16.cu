// Streaming weight-only kernel instantiations for bf16 activations.
#include "cuda/launch/wo_stream_launch.cuh"

namespace mixq::cuda {
void launch_wo_stream_bf16(const WoStreamParams& p, const WoPlan& plan, cudaStream_t stream) {
  launch_stream_for_type<__nv_bfloat16, false>(p, plan, stream);
}
}  // namespace mixq::cuda
