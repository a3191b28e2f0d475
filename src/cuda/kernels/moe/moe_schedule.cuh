// The grouped call's tile schedule, on the device: one block reads the offsets / counts, checks
// them, and lists the (expert, token tile) pairs in expert order. Zero-row experts add no tile, so
// the GEMM's blocks past the list's end exit at once and cost only their launch. A bad layout
// (offsets not 0 .. rows non-decreasing, a count outside [0, max_tokens]) lists no tile at all and
// sets the error bit: the GEMM then touches nothing, and nothing is read out of bounds.
#pragma once

#include "cuda/kernels/common/block_scan.cuh"
#include "cuda/kernels/common/grid_dependency.cuh"
#include "cuda/kernels/moe/moe_params.hpp"

namespace mixq::cuda {

constexpr int kMoeScheduleThreads = 1024;

__global__ void __launch_bounds__(kMoeScheduleThreads) moe_tile_schedule_kernel(const MoeScheduleParams p) {
  __shared__ int bad;
  __shared__ int scan[kMoeScheduleThreads];
  // the grouped GEMM after it is launched as its dependent (the plan's pdl): its CTAs start and set
  // up while this block runs, and wait for it to end before they read the list
  allow_dependent_launch();
  const int tid = int(threadIdx.x), nt = int(blockDim.x);
  if (tid == 0) bad = 0;
  __syncthreads();
  for (int e = tid; e < p.E; e += nt) {
    if (p.offsets) {
      const int lo = p.offsets[e], hi = p.offsets[e + 1];
      if (lo > hi || (e == 0 && lo != 0) || (e == p.E - 1 && hi != p.rows)) atomicOr(&bad, 1);
    } else {
      const int c = p.counts[e];
      if (c < 0 || c > p.max_tokens) atomicOr(&bad, 2);
    }
  }
  __syncthreads();
  if (bad) {
    if (tid == 0) {
      *p.n_tiles = 0;
      if (p.error) atomicOr(p.error, bad);
    }
    return;
  }
  // Each thread owns a contiguous run of experts, so the exclusive scan of the runs' tile counts
  // places the tiles in expert order.
  const int per = (p.E + nt - 1) / nt, e0 = tid * per, e1 = min(p.E, e0 + per);
  auto rows_of = [&](int e) { return p.offsets ? p.offsets[e + 1] - p.offsets[e] : p.counts[e]; };
  auto row0_of = [&](int e) { return p.offsets ? p.offsets[e] : e * p.max_tokens; };
  int mine = 0;
  for (int e = e0; e < e1; ++e) mine += (rows_of(e) + p.tile_m - 1) / p.tile_m;
  scan[tid] = mine;
  block_inclusive_scan(scan, tid, nt);
  int at = scan[tid] - mine;
  for (int e = e0; e < e1; ++e) {
    const int rows = rows_of(e), row0 = row0_of(e);
    for (int mb = 0; mb * p.tile_m < rows; ++mb, ++at)
      if (at < p.capacity) p.tiles[at] = MoeTile{e, mb, row0, rows};
  }
  if (tid == nt - 1) *p.n_tiles = min(scan[tid], p.capacity);
}

}  // namespace mixq::cuda
