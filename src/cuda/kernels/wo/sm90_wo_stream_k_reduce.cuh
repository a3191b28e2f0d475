// The reductions of the warp-specialized wgmma kernel's stream-K pieces (sm90_wo_wgmma_ws.cu,
// schedule in wo_stream_k.hpp): the partial-slot layout, the fixup kernel that sums the pieces of
// every cut tile after the grid, and the signalling side of the inline reduction (the owner's side
// runs in the kernel's consumers, which hold its sums). Included by sm90_wo_wgmma_ws.cu only.
#pragma once

#include <cuda_runtime.h>

#include "cuda/kernels/common/grid_dependency.cuh"
#include "cuda/kernels/wo/sm80_wo_stream.cuh"
#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/common/wo_layout.hpp"
#include "cuda/kernels/common/wo_params.hpp"
#include "cuda/kernels/common/stream_k.hpp"

namespace mixq::cuda {

// Partial slot layout [slot][consumer warpgroup][MT/8][128 threads] float4 (accumulators 4q..4q+3
// of a thread): coalesced per warp on both sides.
template <int MT>
__device__ __forceinline__ float4* stream_k_slot(float* partial, int slot, int wg, int tid) {
  return reinterpret_cast<float4*>(partial) + (int64_t(slot) * 2 + wg) * (MT / 8) * 128 + tid;
}

// Sums the pieces of every tile cut between CTAs, in CTA order (deterministic), and applies the
// epilogue. Block (t, wg, qg): stream-K tile t, the 64 rows of consumer warpgroup wg, accumulator
// float4s kFixupQ * qg ..; thread = the consumer thread whose accumulators it finishes (same
// fragment layout as the main kernel). The contributors' slots are resolved once per block into
// shared memory (the owner arithmetic is 64-bit division), in batches of 128.
constexpr int kFixupQ = 2;
template <int MT>
__global__ void __launch_bounds__(128) stream_k_fixup_kernel(const WoStreamParams p,
                                                             const StreamKSchedule sched) {
  __shared__ int slots[128];
  // launched as a dependent of the main kernel (p.pdl): its launch overlaps that kernel, its reads
  // of the partial slots wait for it. Everything that depends only on the schedule (the tile's
  // contributors, their first 128 slots: 64-bit divisions) is resolved before that wait, so that
  // after it only the loads, sums and stores stand between the main kernel's last CTA and the next
  // call (this kernel's tail is on the critical path of back-to-back calls). H100, same-process A/B
  // against the wait first, nine layers, W4/W8 g128 f16 (docs/decisions/wo-wgmma-stream-k-reduction.md): 0.3-0.9%
  // faster at M = 4 / 16 on the large layers, 2-3% at M = 128 on the small ones, equal elsewhere.
  allow_dependent_launch();
  const int t = blockIdx.x, wg = blockIdx.y, q0 = blockIdx.z * kFixupQ, tid = threadIdx.x;
  const int64_t t_begin = int64_t(t) * sched.chunks;
  const int b_lo = StreamKCursor::sk_owner(sched, t_begin);
  const int b_hi = StreamKCursor::sk_owner(sched, t_begin + sched.chunks - 1);
  if (b_lo == b_hi) return;  // whole tile in one CTA: written by the main kernel
  if (tid < min(128, b_hi + 1 - b_lo)) slots[tid] = StreamKCursor::slot_of(sched, b_lo + tid, t);
  int mb, nb;
  stream_k_tile_coords(sched, sched.dp_tiles + t, mb, nb);
  __syncthreads();
  grid_dependency_wait();
  float4 v[kFixupQ];
#pragma unroll
  for (int q = 0; q < kFixupQ; ++q) v[q] = make_float4(0.f, 0.f, 0.f, 0.f);  // 0 + x == x exactly
  for (int base = b_lo; base <= b_hi; base += 128) {
    const int n_b = min(128, b_hi + 1 - base);
    if (base != b_lo) {  // more than 128 contributors: the next batch of slots
      __syncthreads();
      if (tid < n_b) slots[tid] = StreamKCursor::slot_of(sched, base + tid, t);
      __syncthreads();
    }
    // unrolled: several contributors' loads in flight at once (the sums stay in CTA order)
#pragma unroll 4
    for (int i = 0; i < n_b; ++i) {
      const float4* src = stream_k_slot<MT>(p.partial, slots[i], wg, tid) + q0 * 128;
#pragma unroll
      for (int q = 0; q < kFixupQ; ++q) {
        const float4 u = __ldcg(src + q * 128);
        v[q].x += u.x; v[q].y += u.y; v[q].z += u.z; v[q].w += u.w;
      }
    }
  }
  const int warp = tid >> 5, lane = tid & 31;
  const int n_row0 = nb * 128 + (wg * 4 + warp) * kTileRows + (lane >> 2);
  const int m_base = mb * MT + 2 * (lane & 3);
#pragma unroll
  for (int q = 0; q < kFixupQ; ++q) {
    const float e4[4] = {v[q].x, v[q].y, v[q].z, v[q].w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int n = n_row0 + ((e >> 1) << 3);
      const int m = m_base + 8 * (q0 + q) + (e & 1);
      if (n < p.N && m < p.M) store_io(p.y, int64_t(m) * p.ldy + n, p.y_type, epilogue(p, n, e4[e]));
    }
  }
}

// Inline stream-K reduction (StreamKSchedule::inline_reduce). A CTA holds at most one non-owner
// piece, the first of its stream-K range when that starts inside a tile. Its consumer warps store
// their partial sums and arrive on a named barrier without waiting; a spare warp of the producer
// warpgroup waits there, then publishes the piece with one GPU-scope fence and an increment of the
// tile's 8 flags (one per 16-row weight tile: the owner's warps wait independently). The fence
// stays off the consumers: a fence per consumer warp stalled the issue-bound W4 consumers and
// cost 2-7% on the medium layers (docs/decisions/wo-wgmma-stream-k-reduction.md).
constexpr int kPieceBarrier = 1;                     // named barrier id (0 is __syncthreads)
constexpr int kPieceBarrierThreads = 2 * 128 + 32;  // the consumer warpgroups + the signalling warp
__device__ __forceinline__ void signal_first_piece(const StreamKSchedule& sched, unsigned* flags) {
  if (int(blockIdx.x) >= sched.sk_ctas || sched.sk_tiles == 0) return;
  const int64_t it0 = StreamKCursor::sk_start(sched, int(blockIdx.x));
  const int t = int(it0 / sched.chunks);
  if (it0 == int64_t(t) * sched.chunks) return;  // the range starts a tile: no non-owner piece
  sm90::named_barrier_sync(kPieceBarrier, kPieceBarrierThreads);
  __threadfence();  // cumulative: the consumers' stores, ordered before the barrier, are released
  const int lane = threadIdx.x & 31;
  if (lane < kStreamKFlagsPerTile) atomicAdd(flags + t * kStreamKFlagsPerTile + lane, 1u);
}

}  // namespace mixq::cuda
