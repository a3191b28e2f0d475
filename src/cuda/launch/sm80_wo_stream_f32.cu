// Streaming weight-only kernel instantiations for f32 activations.
#include "cuda/launch/wo_stream_launch.cuh"

namespace mixq::cuda {
void launch_wo_stream_f32(const WoStreamParams& p, const WoPlan& plan, cudaStream_t stream) {
  launch_stream_for_type<__nv_bfloat16, true>(p, plan, stream);
}
}  // namespace mixq::cuda
