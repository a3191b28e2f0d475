// The grouped streaming kernel's instances for f16 activations (one file per type: parallel builds).
#include "cuda/launch/moe_wo_stream_launch.cuh"

namespace mixq::cuda {

void launch_moe_wo_stream_f16(const WoStreamParams& base, const MoeWoExperts& g, const MoeWoPlan& plan,
                          cudaStream_t stream) {
  launch_moe_stream_for_type<half, false>(base, g, plan, stream);
}

}  // namespace mixq::cuda
