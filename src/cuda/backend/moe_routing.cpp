// The routing helpers on CUDA (validated by core/moe_routing.cpp): launches on the caller's stream.
#include "core/moe_prepared.hpp"
#include "cuda/launch/moe_kernels.hpp"
#include "cuda/runtime/device_context.hpp"
#include "mixq/error.hpp"

namespace mixq {

namespace {
int type_code(DType t) { return t == DType::F16 ? 0 : t == DType::BF16 ? 1 : 2; }
cudaStream_t stream_of(const ExecContext& ctx) { return static_cast<cudaStream_t>(ctx.stream); }
// Programmatic dependent launches where the loaded kernels are sm_90 code (they wait for the
// previous grid before touching memory): each hides its launch behind the kernel before it.
bool pdl_on(int device) { return cuda::DeviceContext::get(device).caps().stream_clusters; }
}  // namespace

size_t moe_route_workspace_size_cuda(int64_t num_experts) {
  return (cuda::moe_route_scratch_bytes(num_experts) + 255) / 256 * 256;
}

void moe_route_cuda(const TensorView& ids, int64_t E, const TensorView& offsets,
                    const TensorView& sorted, const TensorView& position, const TensorView& error,
                    const ExecContext& ctx) {
  const size_t need = moe_route_workspace_size_cuda(E);
  MIXQ_CHECK_ARG(ctx.workspace != nullptr && ctx.workspace_bytes >= need, "moe_route (cuda): "
                 "needs ExecContext::workspace of ", need, " bytes (moe_route_workspace_size), got ",
                 ctx.workspace_bytes);
  cuda::DeviceGuard guard(ids.device_index);
  cuda::launch_moe_route(ids.ptr<const int32_t>(), int(ids.shape[0] * ids.shape[1]), int(E),
                         offsets.ptr<int32_t>(), sorted.ptr<int32_t>(), position.ptr<int32_t>(),
                         static_cast<int32_t*>(ctx.workspace),
                         error.empty() ? nullptr : error.ptr<int32_t>(), stream_of(ctx),
                         pdl_on(ids.device_index));
}

void moe_gather_cuda(const TensorView& x, const TensorView& sorted, int64_t k, const TensorView& xs,
                     const ExecContext& ctx) {
  cuda::DeviceGuard guard(x.device_index);
  const int64_t eb = dtype_bytes(x.dtype, 1);
  cuda::launch_moe_gather(x.data, x.ld() * eb, sorted.ptr<const int32_t>(), int(xs.shape[0]),
                          int(k), x.shape[1] * eb, xs.data, xs.ld() * eb, stream_of(ctx),
                          pdl_on(x.device_index));
}

void moe_scatter_add_cuda(const TensorView& ys, const TensorView& position, const TensorView& w,
                          const TensorView& y, bool accumulate, const ExecContext& ctx) {
  cuda::DeviceGuard guard(y.device_index);
  cuda::launch_moe_scatter_add(ys.data, ys.ld(), type_code(ys.dtype), position.ptr<const int32_t>(),
                               w.ptr<const float>(), int(w.shape[0]), int(w.shape[1]),
                               int(ys.shape[1]), y.data, y.ld(), type_code(y.dtype), accumulate,
                               stream_of(ctx), pdl_on(y.device_index));
}

void moe_activation_mul_cuda(const TensorView& h, const TensorView& out, MoeActivation act,
                             const ExecContext& ctx) {
  cuda::DeviceGuard guard(h.device_index);
  cuda::launch_moe_activation_mul(h.data, h.ld(), out.data, out.ld(), type_code(h.dtype),
                                  int(out.shape[0]), int(out.shape[1]),
                                  act == MoeActivation::Silu ? 0 : 1, stream_of(ctx),
                                  pdl_on(h.device_index));
}

}  // namespace mixq
