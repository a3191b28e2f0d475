// Launchers of the routing and schedule kernels (kernels/moe/).
#include "cuda/kernels/moe/moe_routing.cuh"
#include "cuda/kernels/moe/moe_schedule.cuh"
#include "cuda/launch/moe_kernels.hpp"
#include "cuda/runtime/check.hpp"

namespace mixq::cuda {

void launch_moe_schedule(const MoeScheduleParams& p, cudaStream_t stream) {
  moe_tile_schedule_kernel<<<1, kMoeScheduleThreads, 0, stream>>>(p);
  MIXQ_CUDA_CHECK_LAUNCH("moe_tile_schedule_kernel");
}

size_t moe_route_scratch_bytes(int64_t E) { return size_t(moe_route_hist_ints(E)) * 4; }

void launch_moe_route(const int32_t* ids, int R, int E, int32_t* offsets, int32_t* sorted,
                      int32_t* position, int32_t* scratch, int32_t* error, cudaStream_t stream) {
  const size_t hist_bytes = size_t(moe_route_hist_ints(E)) * 4;
  const bool shared = hist_bytes <= size_t(kMoeRouteSharedHistBytes);
  moe_route_kernel<<<1, kMoeRouteThreads, shared ? hist_bytes : 0, stream>>>(ids, R, E, offsets, sorted, position,
                                                                              scratch, shared, error);
  MIXQ_CUDA_CHECK_LAUNCH("moe_route_kernel");
}

void launch_moe_gather(const void* x, int64_t ldx_bytes, const int32_t* sorted, int R, int k,
                       int64_t row_bytes, void* xs, int64_t ldxs_bytes, cudaStream_t stream) {
  if (R == 0) return;
  moe_gather_kernel<<<unsigned(R), 128, 0, stream>>>(static_cast<const char*>(x), ldx_bytes, sorted,
                                                     R, k, row_bytes, static_cast<char*>(xs),
                                                     ldxs_bytes);
  MIXQ_CUDA_CHECK_LAUNCH("moe_gather_kernel");
}

void launch_moe_scatter_add(const void* ys, int64_t ldys, int ys_type, const int32_t* position,
                            const float* w, int T, int k, int N, void* y, int64_t ldy, int y_type,
                            bool accumulate, cudaStream_t stream) {
  if (T == 0) return;
  moe_scatter_add_kernel<<<unsigned(T), 256, 0, stream>>>(ys, ldys, ys_type, position, w, T, k, N,
                                                          y, ldy, y_type, accumulate);
  MIXQ_CUDA_CHECK_LAUNCH("moe_scatter_add_kernel");
}

void launch_moe_activation_mul(const void* h, int64_t ldh, void* out, int64_t ldo, int type, int R,
                               int I, int act, cudaStream_t stream) {
  if (R == 0) return;
  moe_activation_mul_kernel<<<unsigned(R), 256, 0, stream>>>(h, ldh, out, ldo, type, R, I, act);
  MIXQ_CUDA_CHECK_LAUNCH("moe_activation_mul_kernel");
}

void launch_moe_wo_stream(const WoStreamParams& base, const MoeWoExperts& g, const MoeWoPlan& plan,
                          cudaStream_t stream) {
  switch (plan.id.act) {
    case 0: return launch_moe_wo_stream_f16(base, g, plan, stream);
    case 1: return launch_moe_wo_stream_bf16(base, g, plan, stream);
    default: return launch_moe_wo_stream_f32(base, g, plan, stream);
  }
}

}  // namespace mixq::cuda
