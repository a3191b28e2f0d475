// Launchers of the routing and schedule kernels (kernels/moe/).
#include "cuda/kernels/moe/moe_routing.cuh"
#include "cuda/kernels/moe/moe_schedule.cuh"
#include "cuda/launch/moe_kernels.hpp"
#include "cuda/runtime/check.hpp"

#include <cstdint>
#include <type_traits>

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

namespace {
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
}  // namespace

void launch_moe_scatter_add(const void* ys, int64_t ldys, int ys_type, const int32_t* position,
                            const float* w, int T, int k, int N, void* y, int64_t ldy, int y_type,
                            bool accumulate, cudaStream_t stream) {
  if (T == 0) return;
  if (ys_type == 2 && aligned16(ys) && ldys % 4 == 0 && N % 4 == 0)
    moe_scatter_add_kernel<4><<<unsigned(T), 256, 0, stream>>>(ys, ldys, ys_type, position, w, T, k, N, y, ldy,
                                                              y_type, accumulate);
  else
    moe_scatter_add_kernel<1><<<unsigned(T), 256, 0, stream>>>(ys, ldys, ys_type, position, w, T, k, N, y, ldy,
                                                              y_type, accumulate);
  MIXQ_CUDA_CHECK_LAUNCH("moe_scatter_add_kernel");
}

void launch_moe_activation_mul(const void* h, int64_t ldh, void* out, int64_t ldo, int type, int R,
                               int I, int act, cudaStream_t stream) {
  if (R == 0) return;
  auto go = [&](auto tag, auto v) {
    using T = decltype(tag);
    constexpr int V = decltype(v)::value;
    moe_activation_mul_kernel<T, V><<<unsigned(R), 256, 0, stream>>>(static_cast<const T*>(h), ldh,
                                                                     static_cast<T*>(out), ldo, R, I, act);
  };
  // 16-byte packs where the rows allow (both halves of h and the rows of out aligned)
  const int v = type == 2 ? 4 : 8;
  const bool vec = aligned16(h) && aligned16(out) && I % v == 0 && ldh % v == 0 && ldo % v == 0;
  using One = std::integral_constant<int, 1>;
  if (type == 0) vec ? go(half{}, std::integral_constant<int, 8>{}) : go(half{}, One{});
  else if (type == 1) vec ? go(__nv_bfloat16{}, std::integral_constant<int, 8>{}) : go(__nv_bfloat16{}, One{});
  else vec ? go(float{}, std::integral_constant<int, 4>{}) : go(float{}, One{});
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
