// The few-token 8-bit GEMM's grouped (mixture-of-experts) form: decode over experts with the
// weights on the MMA's 128-row side and each expert's few tokens on its MT-wide side, as the plain
// kernel (sm90_skinny_gemm.cuh) does for one weight. The 128-row block GEMM's grouped form puts the
// 1-3 rows an expert gets at decode on the 128-row side; its A tile then takes half of every 32 KB
// stage, leaving 6 stages (96 KB of weights) in flight per SM, and its 128-wide MMAs and promotion
// are paid for those few rows: 45% of the read ceiling at one token (DeepSeek-V3 FP8 experts).
//
// Work (SkinnyGroup): the schedule kernel's (expert, MT-row token tile) list times the 128-row
// weight tiles, N innermost, each unit cut into `splits` K ranges so that a call with few experts
// active (Mixtral's down projection at one token: 2 experts x 32 weight tiles for 132 SMs) still
// fills the GPU; pieces (unit, split) round robin over a persistent grid of one CTA per SM. A cut
// unit's pieces meet in partial slots (slot = piece index) and the last to arrive sums them in
// split order (deterministic bits). Whole units round robin: the CTAs then stream neighbouring
// units at the same time. A stream-K cut of the units' stages (one contiguous range per CTA, as the
// plain kernel does), of every unit or of the last partial round only, measured slower at decode
// (docs/decisions/moe-stacked-experts.md).
// Launch order (backend/moe_block_experts.hpp): the quantizer, then this kernel as its programmatic
// dependent. Each CTA lists the tiles itself from the routing (offsets / counts, complete before the
// quantizer started; up to kSkinnyScheduleMaxE experts), or reads the list of the schedule kernel
// launched before the quantizer; the producer issues the first stages' weights at once, while the
// quantizer runs, as the plain kernel does; X's codes and meta (the quantizer's output) load after
// the wait for it, and the consumers wait before they touch tickets, partial slots or Y.
#pragma once

#include "cuda/kernels/common/block_scan.cuh"
#include "cuda/kernels/w8a8/sm90_skinny_gemm.cuh"

namespace mixq::cuda::sm90 {

// The in-kernel schedule (SkinnyGroup::offsets / counts): every CTA lists the tiles itself instead
// of reading the schedule kernel's list, which took that kernel's ~3 us and a launch gap off the
// critical path of a decode call. Its shared memory: the E + 1 tile prefix sums past the ring, at
// most kSkinnyScheduleMaxE experts, and the static scan below.
constexpr int kSkinnyScheduleMaxE = 1024;
constexpr int kSkinnyScheduleSmem = (kSkinnyScheduleMaxE + 1) * 4 + (kSkinnyThreads + 32 + 1) * 4;

__device__ __forceinline__ int skinny_rows_of(const SkinnyGroup& g, int e) {
  return g.offsets ? g.offsets[e + 1] - g.offsets[e] : g.counts[e];
}

// Every thread of the CTA: prefix[e] = the tiles of experts 0 .. e - 1 (prefix[E]: all of them).
// Returns the tiles listed: 0 for a bad routing (offsets not 0 .. rows non-decreasing, a count
// outside [0, max_tokens]), whose error bits CTA 0 sets, as the schedule kernel does.
template <int MT>
__device__ __forceinline__ int skinny_build_schedule(const SkinnyGroup& g, int* prefix, int* scan,
                                                     int* bad) {
  const int tid = int(threadIdx.x), nt = kSkinnyThreads;
  if (tid == 0) *bad = 0;
  __syncthreads();
  for (int e = tid; e < g.E; e += nt) {
    if (g.offsets) {
      const int lo = g.offsets[e], hi = g.offsets[e + 1];
      if (lo > hi || (e == 0 && lo != 0) || (e == g.E - 1 && hi != g.rows)) atomicOr(bad, 1);
    } else {
      const int c = g.counts[e];
      if (c < 0 || c > g.max_tokens) atomicOr(bad, 2);
    }
  }
  // each thread a contiguous run of experts: the scan of the runs' tile counts keeps expert order
  const int per = (g.E + nt - 1) / nt, e0 = tid * per, e1 = min(g.E, e0 + per);
  int mine = 0;
  for (int e = e0; e < e1; ++e) mine += max(skinny_rows_of(g, e) + MT - 1, 0) / MT;
  scan[tid] = mine;
  block_inclusive_scan(scan, tid, nt);  // its first barrier also publishes *bad
  int at = scan[tid] - mine;
  for (int e = e0; e < e1; ++e) {
    prefix[e] = at;
    at += max(skinny_rows_of(g, e) + MT - 1, 0) / MT;
  }
  if (tid == nt - 1) prefix[g.E] = scan[tid];
  __syncthreads();
  const int b = *bad;
  if (b && blockIdx.x == 0 && tid == 0 && g.error) atomicOr(g.error, b);
  return b ? 0 : min(prefix[g.E], g.capacity);
}

// Tile ti of the list: the schedule kernel's, or from the prefix sums (the expert e with
// prefix[e] <= ti < prefix[e + 1], by bisection: experts without rows have no tile).
template <int MT>
__device__ __forceinline__ MoeTile skinny_tile_at(const SkinnyGroup& g, const int* prefix, int ti) {
  if (g.offsets == nullptr && g.counts == nullptr) return g.tiles[ti];
  int lo = 0, hi = g.E;  // prefix[lo] <= ti < prefix[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (prefix[mid] <= ti) lo = mid;
    else hi = mid;
  }
  return MoeTile{lo, ti - prefix[lo], g.offsets ? g.offsets[lo] : lo * g.max_tokens, skinny_rows_of(g, lo)};
}

// Piece i of the grouped call: unit i / splits = (token tile, weight tile nb), split i % splits,
// K stages [kb0, kb1).
struct SkinnyPiece {
  int unit, split, nb, kb0, kb1;
  MoeTile tile;
};

template <int MT>
__device__ __forceinline__ SkinnyPiece skinny_piece(const SkinnyGroup& g, const int* prefix, int i) {
  SkinnyPiece q;
  q.unit = i / g.splits;
  q.split = i - q.unit * g.splits;
  const int ti = q.unit / g.num_n;
  q.nb = q.unit - ti * g.num_n;
  q.tile = skinny_tile_at<MT>(g, prefix, ti);
  q.kb0 = q.split * g.num_kb / g.splits;
  q.kb1 = (q.split + 1) * g.num_kb / g.splits;
  return q;
}

// Policy: SkinnyFp8Policy<MT, MT + 4> or SkinnyInt8Policy<MT, G, offset, MT + 4>: the token meta's
// boxes start at the tile's first row rounded down to a multiple of 4 (sm90_skinny_policies.cuh).
template <class Policy, int MT, int kStages>
__global__ void __launch_bounds__(kSkinnyThreads, 1)
    sm90_skinny_grouped_kernel(const __grid_constant__ CUtensorMap tm_x,  // codes {K, rows}, box {128, MT}
                               const __grid_constant__ typename Policy::Params pp,  // token meta maps
                               const SkinnyParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Shape = SkinnyShape<Policy, MT, kStages>;
  constexpr int R = MT / 2;
  extern __shared__ uint8_t smem_raw[];
  const SkinnySmem<Policy, MT, kStages> sm(smem_raw);
  if (threadIdx.x == 0) sm.init_barriers();
  __syncthreads();
  allow_dependent_launch();
  const SkinnyGroup& g = p.group;
  // the routing (or the schedule kernel's list): complete before the quantizer ran
  __shared__ int sched_scan[kSkinnyThreads];
  __shared__ int sched_bad;
  const int n_tiles = g.offsets != nullptr || g.counts != nullptr
                          ? skinny_build_schedule<MT>(g, sm.tail, sched_scan, &sched_bad)
                          : *g.n_tiles;
  const int pieces = n_tiles * g.num_n * g.splits;

  if (threadIdx.x >= 256) {  // producer warp
    if (threadIdx.x != 256) return;
    tma_prefetch_desc(&tm_x);
    RingPos out(kStages);
    // The first kStages stages' weights go out at once; their token tiles (the quantizer's output)
    // after the wait for it.
    SkinnyEarlyTokens<kStages> early;
    auto load_tokens = [&](int s, int kb, int m0) {
      // rows past the expert's are the next expert's (or zeros past X's end): computed, never stored
      tma_load_2d(sm.x_tiles + s * Shape::kXBytes, &tm_x, &sm.full[s], kb * 128, m0);
      Policy::load_xmeta(pp, sm.x_meta + s * Policy::kXMetaBytes, &sm.full[s], kb, m0 & ~3);
    };
    for (int i = int(blockIdx.x); i < pieces; i += int(gridDim.x)) {
      const SkinnyPiece q = skinny_piece<MT>(g, sm.tail, i);
      const CUtensorMap* maps = g.maps + int64_t(q.tile.expert) * g.maps_per_expert;
      const int m0 = q.tile.row0 + q.tile.m_block * MT;
      for (int kb = q.kb0; kb < q.kb1; ++kb) {
        const int s = out.stage;
        mbar_wait(&sm.empty[s], out.phase ^ 1);
        mbar_arrive_expect_tx(&sm.full[s], Shape::kTxBytes);
        tma_load_2d(sm.w_tiles + s * Shape::kWBytes, maps + g.w_map, &sm.full[s], kb * 128, q.nb * 128);
        Policy::load_wmeta_from(maps + g.wmeta_map, sm.w_meta + s * Policy::kWMetaBytes, &sm.full[s],
                                q.nb, kb);
        early.add(s, kb, m0, load_tokens);
        out.advance();
      }
    }
    early.flush(load_tokens);  // fewer stages than the ring
    return;
  }

  // Consumers: tickets, partial slots and Y belong to the previous launches until here.
  grid_dependency_wait();
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int cw = tid / 128;
  const int row = 16 * warp + lane / 4, col = 2 * (lane % 4);
  RingPos in(kStages);
  float total[R];
  for (int i = int(blockIdx.x); i < pieces; i += int(gridDim.x)) {
    const SkinnyPiece q = skinny_piece<MT>(g, sm.tail, i);
    const int m0 = q.tile.row0 + q.tile.m_block * MT;
#pragma unroll
    for (int r = 0; r < R; ++r) total[r] = 0.f;
    for (int kb = q.kb0; kb < q.kb1; ++kb)
      skinny_consume_stage<Policy, MT, kStages>(total, sm, in, kb, cw, row, col, lane, m0 & 3);
    if (g.splits > 1) {
      const int first = q.unit * g.splits;
      const auto slot_of = [&](int k) { return first + k; };
      if (!skinny_sum_pieces<MT>(total, p.partial, i, p.tickets + q.unit, g.splits, slot_of,
                                 sm.last_flag, tid))
        continue;
    }
    const int rows = q.tile.row0 + q.tile.rows - m0;  // the expert's rows from m0 on
    const void* bias = p.bias == nullptr ? nullptr
                       : static_cast<const char*>(p.bias) + int64_t(q.tile.expert) * g.bias_stride *
                                                                (p.bias_type == 2 ? 4 : 2);
    skinny_store_any<MT>(p, total, q.nb * 128, m0, rows < MT ? rows : MT, bias, warp, lane);
  }
#else
  __trap();  // built for an architecture without wgmma / TMA: the host never launches this
#endif
}

}  // namespace mixq::cuda::sm90
