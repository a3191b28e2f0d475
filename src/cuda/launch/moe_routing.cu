// Launchers of the routing and schedule kernels (kernels/moe/).
#include "cuda/kernels/moe/moe_route.cuh"
#include "cuda/kernels/moe/moe_routing.cuh"
#include "cuda/kernels/moe/moe_schedule.cuh"
#include "cuda/launch/moe_kernels.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/launch_config.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace mixq::cuda {

namespace {
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// The grid of a kernel over (row, column block): `rows` blocks along x, enough blocks of
// `per_block` columns along y to cover `columns` (y is limited to 65535 blocks).
dim3 row_column_grid(const char* what, int64_t rows, int64_t columns, int64_t per_block) {
  const int64_t blocks = (columns + per_block - 1) / per_block;
  MIXQ_CHECK(blocks <= 65535, ErrorCode::Unsupported, what, ": rows of ", columns,
             " elements need more than 65535 blocks of ", per_block);
  return dim3(unsigned(rows), unsigned(blocks));
}
}  // namespace

// Not a dependent launch itself: the grouped GEMM after it is (the plan's pdl), and had this block
// started early too, the GEMM's CTAs would have been placed while the kernels before it still ran,
// taking the SMs' shared memory from them (Mixtral-8x7B, 64 tokens: moe_mlp 360 -> 406 us on an
// H200).
void launch_moe_schedule(const MoeScheduleParams& p, cudaStream_t stream) {
  moe_tile_schedule_kernel<<<1, kMoeScheduleThreads, 0, stream>>>(p);
  MIXQ_CUDA_CHECK_LAUNCH("moe_tile_schedule_kernel");
}

size_t moe_route_scratch_bytes(int64_t E) {
  // the one block's counters where they do not fit shared memory, else the three grids' counts
  const bool shared = moe_route_hist_ints(E) * 4 <= kMoeRouteSharedHistBytes;
  return size_t(shared ? moe_route_grid_ints(E) : moe_route_hist_ints(E)) * 4;
}

void launch_moe_route(const int32_t* ids, int R, int E, int32_t* offsets, int32_t* sorted,
                      int32_t* position, int32_t* scratch, int32_t* error, cudaStream_t stream,
                      bool pdl) {
  const size_t hist_bytes = size_t(moe_route_hist_ints(E)) * 4;
  const bool shared = hist_bytes <= size_t(kMoeRouteSharedHistBytes);
  if (shared && R >= kMoeRouteGridMinPairs) {
    // count, scan, place (kernels/moe/moe_route.cuh): each a dependent launch of the one before
    const int blocks = std::min(kMoeRouteMaxBlocks, (R + kMoeRouteGridPairsPerBlock - 1) / kMoeRouteGridPairsPerBlock);
    const RouteGrid g = route_grid(ids, R, E, blocks, scratch);
    const size_t smem = size_t(kMoeRouteGridWarps) * size_t(E + 1) * 4;
    const WoLaunchConfig count(dim3(unsigned(blocks)), kMoeRouteGridWarps * 32, smem, stream, pdl);
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&count.cfg, moe_route_count_kernel, g));
    const WoLaunchConfig scan(dim3(1), kMoeRouteThreads, 0, stream, pdl);
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&scan.cfg, moe_route_scan_kernel, g, blocks, offsets, sorted, position, error));
    const WoLaunchConfig place(dim3(unsigned(blocks)), kMoeRouteGridWarps * 32, smem, stream, pdl);
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&place.cfg, moe_route_place_kernel, g, sorted, position));
    return;
  }
  const WoLaunchConfig launch(dim3(1), kMoeRouteThreads, shared ? hist_bytes : 0, stream, pdl);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&launch.cfg, moe_route_kernel, ids, R, E, offsets, sorted,
                                     position, scratch, shared, error));
}

void launch_moe_gather(const void* x, int64_t ldx_bytes, const int32_t* sorted, int R, int k,
                       int64_t row_bytes, void* xs, int64_t ldxs_bytes, cudaStream_t stream, bool pdl) {
  if (R == 0 || row_bytes == 0) return;
  if (aligned16(x) && aligned16(xs) && row_bytes % 16 == 0 && ldx_bytes % 16 == 0 && ldxs_bytes % 16 == 0) {
    const int64_t row_pieces = row_bytes / 16, total = int64_t(R) * row_pieces;
    // a piece a thread at decode sizes (more blocks, each SM's share of the copy smaller), four
    // from 2^18 pieces (4 MB), where the grid has tens of waves
    const int per_thread = total >= (int64_t(1) << 18) ? kMoeGatherUnroll : 1;
    const int64_t per_block = int64_t(kMoeGatherThreads) * per_thread;
    const int64_t blocks = (total + per_block - 1) / per_block;
    MIXQ_CHECK(blocks <= 0x7FFFFFFF, ErrorCode::Unsupported, "moe_gather: ", R, " rows of ", row_bytes,
               " bytes need more than 2^31 - 1 blocks");
    const WoLaunchConfig launch(dim3(unsigned(blocks)), kMoeGatherThreads, 0, stream, pdl);
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&launch.cfg, moe_gather_pieces_kernel, static_cast<const char*>(x),
                                       ldx_bytes, sorted, R, k, row_pieces, static_cast<char*>(xs), ldxs_bytes,
                                       per_thread));
    return;
  }
  const WoLaunchConfig launch(row_column_grid("moe_gather", R, row_bytes, kMoeGatherChunk),
                              kMoeGatherThreads, 0, stream, pdl);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&launch.cfg, moe_gather_kernel, static_cast<const char*>(x),
                                     ldx_bytes, sorted, R, k, row_bytes, static_cast<char*>(xs),
                                     ldxs_bytes));
}

void launch_moe_scatter_add(const void* ys, int64_t ldys, int ys_type, const int32_t* position,
                            const float* w, int T, int k, int N, void* y, int64_t ldy, int y_type,
                            bool accumulate, cudaStream_t stream, bool pdl) {
  if (T == 0 || N == 0) return;
  auto go = [&](auto tag, auto v) {
    using VT = decltype(tag);
    constexpr int V = decltype(v)::value;
    // 16-bit y of ys's type with aligned rows: one 16-byte store of a thread's V outputs
    const bool y_vec = sizeof(VT) == 2 && y_type == ys_type && aligned16(y) && ldy % V == 0;
    const WoLaunchConfig launch(row_column_grid("moe_scatter_add", T, N, kMoeScatterThreads * V),
                                kMoeScatterThreads, 0, stream, pdl);
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&launch.cfg, moe_scatter_add_kernel<VT, V>, ys, ldys, ys_type,
                                       position, w, T, k, N, y, ldy, y_type, accumulate, y_vec));
  };
  // rows of ys read as 16-byte vectors where aligned (4 f32 or 8 16-bit elements)
  const int v = ys_type == 2 ? 4 : 8;
  const bool vec = aligned16(ys) && ldys % v == 0 && N % v == 0;
  if (vec && ys_type == 2) go(float{}, std::integral_constant<int, 4>{});
  else if (vec && ys_type == 0) go(half{}, std::integral_constant<int, 8>{});
  else if (vec && ys_type == 1) go(__nv_bfloat16{}, std::integral_constant<int, 8>{});
  else go(MoeScalarElems{}, std::integral_constant<int, 1>{});
}

void launch_moe_activation_mul(const void* h, int64_t ldh, void* out, int64_t ldo, int type, int R,
                               int I, int act, cudaStream_t stream, bool pdl) {
  if (R == 0 || I == 0) return;
  auto go = [&](auto tag, auto v) {
    using T = decltype(tag);
    constexpr int V = decltype(v)::value;
    const WoLaunchConfig launch(row_column_grid("moe activation", R, I, kMoeActThreads * V),
                                kMoeActThreads, 0, stream, pdl);
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&launch.cfg, moe_activation_mul_kernel<T, V>,
                                       static_cast<const T*>(h), ldh, static_cast<T*>(out), ldo, R,
                                       I, act));
  };
  // 16-byte packs where the rows allow (both halves of h and the rows of out aligned)
  const int v = type == 2 ? 4 : 8;
  const bool vec = aligned16(h) && aligned16(out) && I % v == 0 && ldh % v == 0 && ldo % v == 0;
  using One = std::integral_constant<int, 1>;
  if (type == 0) vec ? go(half{}, std::integral_constant<int, 8>{}) : go(half{}, One{});
  else if (type == 1) vec ? go(__nv_bfloat16{}, std::integral_constant<int, 8>{}) : go(__nv_bfloat16{}, One{});
  else vec ? go(float{}, std::integral_constant<int, 4>{}) : go(float{}, One{});
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
