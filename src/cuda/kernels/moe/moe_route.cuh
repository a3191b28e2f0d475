// Top-k expert ids -> the contiguous layout: a stable counting sort of the R = T * k pairs by
// expert (offsets[E + 1], sorted[R]: pair index at each slot, position[R]: slot of each pair).
// Pairs keep their order within an expert, so the layout is a function of the ids alone. Ids are
// checked here (the host cannot read them without a synchronisation): an id outside [0, E) sets
// error bit 4 and no pair is routed (offsets all 0, sorted and position -1).
//
// Two forms:
// - one block (moe_route_kernel), for decode-sized R and for many experts: one launch.
// - three grids for large R (count, scan, place): the one block runs on one SM, and what a 32-pair
//   step costs that SM bounds it (32768 pairs: 55 us on an H200 even with the cheapest step).
// Both are programmatic dependent launches where the launcher says so (grid_dependency.cuh).
#pragma once

#include <cstdint>

#include "cuda/kernels/common/block_scan.cuh"
#include "cuda/kernels/common/grid_dependency.cuh"

namespace mixq::cuda {

constexpr int kMoeRouteThreads = 1024;
constexpr int kMoeRouteWarps = kMoeRouteThreads / 32;

// Per-warp expert counters the one-block kernel keeps in shared memory when they fit this budget
// (E <= 351), else in the workspace.
constexpr int kMoeRouteSharedHistBytes = 44 * 1024;
__host__ __device__ constexpr int64_t moe_route_hist_ints(int64_t E) { return int64_t(kMoeRouteWarps) * (E + 1); }

// The three-grid form: blocks of kMoeRouteGridWarps warps, each block a contiguous segment of the
// pairs, at most kMoeRouteMaxBlocks blocks; counters in shared memory, so E <= 351 as above.
constexpr int kMoeRouteGridWarps = 8;
constexpr int kMoeRouteMaxBlocks = 128;
constexpr int kMoeRouteGridMinPairs = 8192;  // fewer: the one block (one launch, no grid hand-offs)
constexpr int kMoeRouteGridPairsPerBlock = 512;
// workspace ints of the three-grid form: per-block counts [blocks][E], a bad flag per block, and
// the scan's verdict
__host__ __device__ constexpr int64_t moe_route_grid_ints(int64_t E) {
  return int64_t(kMoeRouteMaxBlocks) * (E + 1) + 1;
}

constexpr int kMoeRouteBatch = 8;
// ids[base + 32 u + lane] for the batch's steps u (-1 past hi), all loads issued before any is used
// (one memory round trip a batch, not a step)
__device__ __forceinline__ void load_route_ids(const int32_t* __restrict__ ids, int base, int hi,
                                               int lane, int (&e)[kMoeRouteBatch]) {
#pragma unroll
  for (int u = 0; u < kMoeRouteBatch; ++u) {
    const int i = base + 32 * u + lane;
    e[u] = i < hi ? ids[i] : -1;
  }
}

// The lanes of `active` whose key (< 2^bits) equals this lane's: one ballot per key bit (7 for 128
// experts). __match_any_sync cost the one-block kernel ~60 SM cycles a warp-step: 72 us at 32768
// pairs on an H200.
__device__ __forceinline__ unsigned lanes_with_key(unsigned key, int bits, unsigned active) {
  unsigned same = active;
  for (int b = 0; b < bits; ++b) {
    const bool one = (key >> b) & 1u;
    const unsigned m = __ballot_sync(0xffffffffu, one);
    same &= one ? m : ~m;
  }
  return same;
}

__device__ __forceinline__ int route_id_bits(int E) { return E > 1 ? 32 - __clz(E - 1) : 0; }

// Pass 1 of one warp over pairs [lo, hi): mine[e] += the pairs of expert e (one atomic per expert
// present in a 32-pair step). Returns whether an id was out of range (those are not counted).
__device__ __forceinline__ bool route_count_segment(const int32_t* ids, int lo, int hi, int E, int lane,
                                                    int32_t* mine) {
  const int bits = route_id_bits(E);
  bool bad = false;
  int e[kMoeRouteBatch];
  for (int base = lo; base < hi; base += 32 * kMoeRouteBatch) {
    load_route_ids(ids, base, hi, lane, e);
#pragma unroll
    for (int u = 0; u < kMoeRouteBatch; ++u) {
      if (base + 32 * u >= hi) break;  // (warp-uniform)
      const int i = base + 32 * u + lane;
      const bool valid = i < hi && e[u] >= 0 && e[u] < E;
      bad = bad || (i < hi && !valid);
      const unsigned same = lanes_with_key(unsigned(e[u]), bits, __ballot_sync(0xffffffffu, valid));
      if (valid && lane == __ffs(same) - 1) atomicAdd(&mine[e[u]], __popc(same));
    }
  }
  return bad;
}

// Pass 2 of one warp over pairs [lo, hi) (every id in range): mine[e] holds the first slot of the
// segment's pairs of expert e; lanes of one expert take consecutive slots in lane order.
__device__ __forceinline__ void route_place_segment(const int32_t* ids, int lo, int hi, int E, int lane,
                                                    int32_t* mine, int32_t* sorted, int32_t* position) {
  const int bits = route_id_bits(E);
  int e[kMoeRouteBatch];
  for (int base = lo; base < hi; base += 32 * kMoeRouteBatch) {
    load_route_ids(ids, base, hi, lane, e);
#pragma unroll
    for (int u = 0; u < kMoeRouteBatch; ++u) {
      if (base + 32 * u >= hi) break;  // (warp-uniform)
      const int i = base + 32 * u + lane;
      const bool valid = i < hi;
      const unsigned same = lanes_with_key(unsigned(e[u]), bits, __ballot_sync(0xffffffffu, valid));
      const int rank = __popc(same & ((1u << lane) - 1u));
      const int leader = __ffs(same) - 1;  // (-1 for an absent lane: its shuffle reads lane 0)
      int slot = 0;
      if (valid && lane == leader) slot = atomicAdd(&mine[e[u]], __popc(same));
      slot = __shfl_sync(0xffffffffu, slot, leader < 0 ? 0 : leader);
      if (valid) {
        sorted[slot + rank] = i;
        position[i] = slot + rank;
      }
    }
  }
}

// The refused routing: no pair is routed (the gather copies nothing, the scatter-add adds nothing,
// and a grouped call on offsets 0 .. 0, not the row count, refuses itself). Threads tid of nt.
__device__ __forceinline__ void route_refuse(int R, int E, int32_t* offsets, int32_t* sorted, int32_t* position,
                                             int32_t* error, int tid, int nt) {
  for (int e = tid; e <= E; e += nt) offsets[e] = 0;
  for (int i = tid; i < R; i += nt) {
    sorted[i] = -1;
    position[i] = -1;
  }
  if (tid == 0 && error) atomicOr(error, 4);
}

// hist[w][e] (w < warps, row stride E + 1) becomes the first slot of warp w's pairs of expert e,
// the warps' pairs following each other from slot `run`; returns the slot after them.
__device__ __forceinline__ int route_warp_slots(int32_t* hist, int warps, int E, int e, int run) {
  for (int w = 0; w < warps; ++w) {
    int32_t& h = hist[int64_t(w) * (E + 1) + e];
    const int c = h;
    h = run;
    run += c;
  }
  return run;
}

// ---------------------------------------------------------------- one block
// Warp w owns the w-th of 32 contiguous segments of the pairs and a row of counters hist[w][E + 1]
// (shared memory, or the workspace for many experts): pass 1 counts, the offsets are the exclusive
// scan of the experts' totals, each warp's row becomes its first slots, pass 2 places. (Before it:
// one warp placed all pairs, a dependent global atomic per 32 pairs: ~1 ms at 32768 pairs.)
__global__ void __launch_bounds__(kMoeRouteThreads)
    moe_route_kernel(const int32_t* ids, int R, int E, int32_t* offsets, int32_t* sorted,
                     int32_t* position, int32_t* scratch, bool hist_shared, int32_t* error) {
  extern __shared__ int32_t shared_hist[];
  __shared__ int bad;
  __shared__ int scan[kMoeRouteThreads];
  allow_dependent_launch();
  grid_dependency_wait();
  const int tid = int(threadIdx.x), nt = int(blockDim.x), lane = tid & 31, warp = tid >> 5;
  int32_t* hist = hist_shared ? shared_hist : scratch;
  if (tid == 0) bad = 0;
  for (int64_t i = tid; i < moe_route_hist_ints(E); i += nt) hist[i] = 0;
  __syncthreads();
  const int seg = (R + kMoeRouteWarps - 1) / kMoeRouteWarps;
  const int lo = min(R, warp * seg), hi = min(R, lo + seg);
  int32_t* mine = hist + int64_t(warp) * (E + 1);
  if (route_count_segment(ids, lo, hi, E, lane, mine)) bad = 1;
  __syncthreads();
  if (bad) return route_refuse(R, E, offsets, sorted, position, error, tid, nt);
  // each thread a contiguous run of experts: their totals, an inclusive block scan of the runs,
  // then the offsets and the warps' first slots
  const int per = (E + nt - 1) / nt, e0 = min(E, tid * per), e1 = min(E, e0 + per);
  int total = 0;
  for (int e = e0; e < e1; ++e)
    for (int w = 0; w < kMoeRouteWarps; ++w) total += hist[int64_t(w) * (E + 1) + e];
  scan[tid] = total;
  block_inclusive_scan(scan, tid, nt);
  int run = scan[tid] - total;
  for (int e = e0; e < e1; ++e) {
    offsets[e] = run;
    run = route_warp_slots(hist, kMoeRouteWarps, E, e, run);
  }
  if (tid == nt - 1) offsets[E] = scan[nt - 1];
  __syncthreads();
  route_place_segment(ids, lo, hi, E, lane, mine, sorted, position);
}

// ---------------------------------------------------------------- three grids
// Block b owns pairs [b * per_block, + per_block); its warps split them as the one block does.
// ws: counts[kMoeRouteMaxBlocks][E] (per block and expert; the scan turns them into the block's
// first slots), bad[kMoeRouteMaxBlocks], and verdict (the scan's: 1 = refused).
struct RouteGrid {
  const int32_t* ids;
  int R, E, per_block;
  int32_t *counts, *bad, *verdict;
};
__host__ __device__ inline RouteGrid route_grid(const int32_t* ids, int R, int E, int blocks, int32_t* ws) {
  RouteGrid g{ids, R, E, (R + blocks - 1) / blocks, ws, ws + int64_t(kMoeRouteMaxBlocks) * E,
              ws + int64_t(kMoeRouteMaxBlocks) * (E + 1)};
  return g;
}

// this block's warp's segment and the warp's counter row, all rows zeroed
__device__ __forceinline__ int32_t* route_grid_block_start(const RouteGrid& g, int32_t* hist, int& lo, int& hi) {
  const int tid = int(threadIdx.x), warp = tid >> 5;
  for (int i = tid; i < kMoeRouteGridWarps * (g.E + 1); i += int(blockDim.x)) hist[i] = 0;
  __syncthreads();
  const int b0 = min(g.R, int(blockIdx.x) * g.per_block), b1 = min(g.R, b0 + g.per_block);
  const int seg = (b1 - b0 + kMoeRouteGridWarps - 1) / kMoeRouteGridWarps;
  lo = min(b1, b0 + warp * seg);
  hi = min(b1, lo + seg);
  return hist + warp * (g.E + 1);
}

__global__ void __launch_bounds__(kMoeRouteGridWarps * 32) moe_route_count_kernel(const RouteGrid g) {
  extern __shared__ int32_t grid_hist[];
  __shared__ int bad;
  allow_dependent_launch();
  grid_dependency_wait();
  if (threadIdx.x == 0) bad = 0;
  int lo, hi;
  int32_t* mine = route_grid_block_start(g, grid_hist, lo, hi);
  if (route_count_segment(g.ids, lo, hi, g.E, int(threadIdx.x) & 31, mine)) bad = 1;
  __syncthreads();
  for (int e = int(threadIdx.x); e < g.E; e += int(blockDim.x)) {
    int c = 0;
    for (int w = 0; w < kMoeRouteGridWarps; ++w) c += grid_hist[w * (g.E + 1) + e];
    g.counts[int64_t(blockIdx.x) * g.E + e] = c;
  }
  if (threadIdx.x == 0) g.bad[blockIdx.x] = bad;
}

// One block: the verdict, the offsets (exclusive scan of the experts' totals over all blocks) and
// each block's first slot per expert (in place of its counts).
__global__ void __launch_bounds__(kMoeRouteThreads)
    moe_route_scan_kernel(const RouteGrid g, int blocks, int32_t* offsets, int32_t* sorted,
                          int32_t* position, int32_t* error) {
  __shared__ int scan[kMoeRouteThreads];
  __shared__ int bad;
  allow_dependent_launch();
  grid_dependency_wait();
  const int tid = int(threadIdx.x), nt = int(blockDim.x);
  if (tid == 0) bad = 0;
  __syncthreads();
  if (tid < blocks && g.bad[tid]) bad = 1;
  __syncthreads();
  if (tid == 0) *g.verdict = bad;
  if (bad) return route_refuse(g.R, g.E, offsets, sorted, position, error, tid, nt);
  const int per = (g.E + nt - 1) / nt, e0 = min(g.E, tid * per), e1 = min(g.E, e0 + per);
  // a thread's column of counts, kScanBatch blocks' loads in flight at once (one block's at a
  // time, the scan of 64 blocks took 7.6 us)
  constexpr int kScanBatch = 8;
  int total = 0;
  for (int e = e0; e < e1; ++e)
    for (int b0 = 0; b0 < blocks; b0 += kScanBatch) {
      int c[kScanBatch];
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) c[u] = b0 + u < blocks ? g.counts[int64_t(b0 + u) * g.E + e] : 0;
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) total += c[u];
    }
  scan[tid] = total;
  block_inclusive_scan(scan, tid, nt);
  int run = scan[tid] - total;
  for (int e = e0; e < e1; ++e) {
    offsets[e] = run;
    for (int b0 = 0; b0 < blocks; b0 += kScanBatch) {
      int c[kScanBatch];
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) c[u] = b0 + u < blocks ? g.counts[int64_t(b0 + u) * g.E + e] : 0;
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) {
        if (b0 + u < blocks) g.counts[int64_t(b0 + u) * g.E + e] = run;
        run += c[u];
      }
    }
  }
  if (tid == nt - 1) offsets[g.E] = scan[nt - 1];
}

// Each block counts its warps' segments again (in shared memory), takes its first slots from the
// scan and places its pairs.
__global__ void __launch_bounds__(kMoeRouteGridWarps * 32)
    moe_route_place_kernel(const RouteGrid g, int32_t* sorted, int32_t* position) {
  extern __shared__ int32_t grid_hist[];
  allow_dependent_launch();
  // (the ids too may come from a kernel still running when this grid starts: nothing is read before
  // the wait, which covers the scan and, through it, everything before)
  grid_dependency_wait();
  if (*g.verdict) return;
  int lo, hi;
  int32_t* mine = route_grid_block_start(g, grid_hist, lo, hi);
  route_count_segment(g.ids, lo, hi, g.E, int(threadIdx.x) & 31, mine);
  __syncthreads();
  for (int e = int(threadIdx.x); e < g.E; e += int(blockDim.x))
    route_warp_slots(grid_hist, kMoeRouteGridWarps, g.E, e, g.counts[int64_t(blockIdx.x) * g.E + e]);
  __syncthreads();
  route_place_segment(g.ids, lo, hi, g.E, int(threadIdx.x) & 31, mine, sorted, position);
}

}  // namespace mixq::cuda
