// Dispatch of the streaming kernel by activation type (the instantiations live in
// sm80_wo_stream_{f16,bf16,f32}.cu).
#include "cuda/launch/wo_stream_launch.cuh"

namespace mixq::cuda {

void launch_wo_stream_f16(const WoStreamParams&, const WoPlan&, cudaStream_t);
void launch_wo_stream_bf16(const WoStreamParams&, const WoPlan&, cudaStream_t);
void launch_wo_stream_f32(const WoStreamParams&, const WoPlan&, cudaStream_t);

void launch_wo_stream(const WoStreamParams& p, const WoPlan& plan, cudaStream_t stream) {
  MIXQ_CHECK(plan.id.family == Family::WoStream && plan.id.act == int(p.x_type), ErrorCode::Internal,
             "launch_wo_stream: plan runs ", plan.id.name());
  switch (p.x_type) {
    case IoType::F16: return launch_wo_stream_f16(p, plan, stream);
    case IoType::BF16: return launch_wo_stream_bf16(p, plan, stream);
    case IoType::F32: return launch_wo_stream_f32(p, plan, stream);
  }
}

}  // namespace mixq::cuda
