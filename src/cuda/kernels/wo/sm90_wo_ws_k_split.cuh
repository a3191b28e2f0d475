// K split over a thread-block cluster for the warp-specialized Hopper weight-only kernel
// (sm90_wo_ws.cuh, StreamKSchedule::k_split): the k_split CTAs of a cluster each run one range of
// one tile's K, and the pieces are summed through distributed shared memory instead of global
// partial slots. The stream-K reduction it replaces for small problems publishes each piece with a
// GPU-scope fence and a flag the owner spins on (or a second kernel); here the partials never leave
// the cluster's shared memory and two cluster barriers order everything.
#pragma once

#include <cstdint>

#include "mixq/numeric.hpp"  // MIXQ_HD
#if defined(__CUDACC__)
#include "cuda/kernels/common/sm90_sync.cuh"
#endif

namespace mixq::cuda::ws_detail {

// Named barrier of the two consumer warpgroups before the ring is reused for the partial (0 is
// __syncthreads, 1 the stream-K piece barrier, 2 and 3 the TMA-store epilogue's).
constexpr int kKSplitBarrier = 4;
// The instantiations that carry the split: the plain kernel (not the grouped one) at token tiles up
// to 32, and at 64 without the fold (whose f32-pair variant spilled with the split's code).
MIXQ_HD constexpr bool ws_k_split_built(int mt, bool fold, bool grouped) {
  return !grouped && (mt <= 32 || (mt == 64 && !fold));
}
// Bytes of one CTA's partial tile: 128 rows x MT tokens of f32. It is written over the ring, which
// at token tiles up to 64 always holds it (two stages at least: 2 (X + W) >= MT x 512 bytes there).
MIXQ_HD constexpr uint32_t ws_k_split_partial_bytes(int mt) {
  return uint32_t(mt) * 512u;
}

#if defined(__CUDACC__)
// The tile's sums r (this consumer thread's MT / 2 accumulators) across the cluster: ranks 1 ..
// split - 1 write theirs into their own ring at `slots` ([float4 q][consumer thread], so a warp's
// stores and loads are 512 contiguous bytes), a cluster barrier, rank 0 adds them to its own in
// rank order (the same bits on every run), a second barrier keeps every CTA's shared memory alive
// until rank 0 has read it. True on rank 0, which then stores the tile. Every thread of the
// cluster, the producer warpgroup's included, takes part in the two barriers (ws_k_split_wait).
template <int MT>
__device__ __forceinline__ bool ws_k_split_sum(float (&r)[MT / 2], uint32_t slots, int split) {
  const uint32_t rank = sm90::cluster_ctarank();
  const uint32_t mine = slots + (threadIdx.x - 128u) * 16u;  // consumer threads 128 .. 383
  if (rank != 0) {
    // Both warpgroups' last MMAs (wgmma.wait_group 0 in each) have read the ring before either
    // warpgroup overwrites it; the producer has issued its last load of this CTA's only piece.
    sm90::named_barrier_sync(kKSplitBarrier, 256);
#pragma unroll
    for (int q = 0; q < MT / 8; ++q)
      sm90::sts128(mine + uint32_t(q) * 4096u,
                   make_uint4(__float_as_uint(r[4 * q]), __float_as_uint(r[4 * q + 1]),
                              __float_as_uint(r[4 * q + 2]), __float_as_uint(r[4 * q + 3])));
  }
  sm90::cluster_sync();  // release / acquire at cluster scope: every partial is visible
  if (rank == 0) {
    for (int b = 1; b < split; ++b) {
      const uint32_t src = sm90::cluster_map_shared(mine, uint32_t(b));
#pragma unroll
      for (int q = 0; q < MT / 8; ++q) {
        const uint4 v = sm90::ld_cluster128(src + uint32_t(q) * 4096u);
        r[4 * q] += __uint_as_float(v.x);
        r[4 * q + 1] += __uint_as_float(v.y);
        r[4 * q + 2] += __uint_as_float(v.z);
        r[4 * q + 3] += __uint_as_float(v.w);
      }
    }
  }
  sm90::cluster_sync();  // rank 0 has read every partial before any CTA may exit
  return rank == 0;
}

// The producer warpgroup's side of ws_k_split_sum's two cluster barriers (they count every thread
// of the cluster that has not exited; these threads stay until the consumers are done).
__device__ __forceinline__ void ws_k_split_wait() {
  sm90::cluster_sync();
  sm90::cluster_sync();
}

#endif  // __CUDACC__

}  // namespace mixq::cuda::ws_detail
