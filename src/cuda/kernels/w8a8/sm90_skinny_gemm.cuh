// Hopper 8-bit block-scaled GEMM for few tokens (decode, M <= 128): the weights stream through the
// tensor cores as the wide operand and the tokens are the narrow one ("swap AB"):
//   Y^T[n][m] = sum over K blocks of promote(WQ_kb[n] . XQ_kb[m])
// with the promotion of a policy (sm90_skinny_policies.cuh): FP8 1x128 / 128x128 block scales, or
// INT8 W8A8 per block (the four-term formula). The 128-row tiles of sm90_block_gemm.cuh would put
// the few tokens on the MMA's 128-row side (mostly padding) and cut the weights into BN-wide
// tiles, one per CTA and K range whole: at M = 1 on 21504 x 14336 that is 168 tiles for 132 SMs
// (two rounds, the second a quarter full), about half the weight stream's rate (FP8: 150-160 us
// there against 111 us here, docs/decisions/w8a8-skinny.md).
//
// CTA = 2 consumer warpgroups (warps 0-7) + 1 producer warp (warp 8), one CTA per SM, persistent.
//   producer (one thread): per 128-wide K stage of the ring the 128 x 128 weight tile (TMA,
//     128-byte swizzle, zero past N and K), the MT x 128 token tile (zero past M and K), and the
//     policy's weight and token meta for the stage's K blocks (one or two).
//   consumers: warpgroup cw owns weight rows 64 cw .. 64 cw + 63 of the tile; per K block of the
//     stage m64nMTk32 MMAs into a fresh accumulator (the tensor-core accumulator never spans two K
//     blocks: each has its own scales), then the policy folds the block into the f32 totals. Each
//     warpgroup waits for its own MMAs and promotes while the other's run (one warpgroup for both
//     halves made M = 64 13-20% slower than M = 16 on the large layers: docs/decisions/w8a8-skinny.md). The
//     weight stream delivers a 16 KB stage in ~0.7 us per SM, far more than the MMAs and the
//     promotion take: the kernel is bound by DRAM.
// Work: stream-K over (weight tile, K stage) iterations (wo_stream_k.hpp, every tile in the
// stream-K part), so every SM reads the same number of weight bytes whatever N is. A tile cut
// between CTAs leaves each piece in its CTA's partial slot; the last piece to finish (a ticket
// per tile) sums the slots in CTA order, so the bits do not depend on which CTA ends last.
// Programmatic dependent launch: the producer issues the first stages' weight loads, then waits
// for the previous grid before it loads the tokens (the quantizer's output); the consumers wait
// before they touch tickets, partials or Y. With the quantizer also a dependent launch, the weight
// stream starts while the quantizer runs (3.5-6 us less per call on the small layers: docs/decisions/w8a8-skinny.md).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/common/grid_dependency.cuh"
#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/common/sm90_wgmma.cuh"
#include "cuda/kernels/common/stream_k.hpp"
#include "cuda/kernels/moe/moe_params.hpp"
#include "cuda/kernels/w8a8/sm90_block_store.cuh"  // to_out

namespace mixq::cuda::sm90 {

// The grouped (mixture-of-experts) form, sm90_skinny_grouped_kernel: the units are the (expert,
// token tile) list (tiles of MT rows: listed by each CTA from the routing, or by the schedule
// kernel, kernels/moe/moe_schedule.cuh) times the 128-row weight tiles (N innermost), each cut into
// `splits` equal K ranges; a piece is (unit, split), pieces walked round robin over the persistent
// grid, a unit's pieces on adjacent CTAs. Each expert's codes and weight meta through its own
// descriptors in device memory (maps[expert * maps_per_expert + w_map / wmeta_map]); X, its meta
// and Y are the call's [rows] matrices, a unit's stores clipped to its expert's rows.
struct SkinnyGroup {
  const int* n_tiles = nullptr;
  const MoeTile* tiles = nullptr;
  const CUtensorMap* maps = nullptr;
  int maps_per_expert = 0, w_map = 0, wmeta_map = 0;
  int num_n = 0, num_kb = 0;  // 128-row weight tiles, 128-K stages
  int splits = 1;             // K ranges of a unit (> 1: pieces summed through partial slots)
  int64_t bias_stride = 0;    // elements between experts' bias rows (0: one shared bias)
  // The in-kernel schedule (offsets or counts set; n_tiles / tiles unused): every CTA lists the
  // tiles itself from the routing, checked as the schedule kernel checks it (a bad one: no tile,
  // CTA 0 sets the error bits). E + 1 ints of the CTA's shared memory.
  const int32_t* offsets = nullptr;  // contiguous: [E + 1]
  const int32_t* counts = nullptr;   // masked: [E]
  int E = 0, rows = 0, max_tokens = 0, capacity = 0;
  int32_t* error = nullptr;
};

struct SkinnyParams {
  int M = 0, N = 0;
  StreamKSchedule sched;      // ceil(N / 128) weight tiles of ceil(K / 128) iterations (stages)
  float* partial = nullptr;   // stream-K partial slots: 2 per CTA of 128 x MT floats
  unsigned* tickets = nullptr;  // one per stream-K tile, zero before the launch (left zero)
  void* y = nullptr;          // [M][ldy] in y_type (0 f16, 1 bf16, 2 f32)
  int64_t ldy = 0;
  int y_type = 2;
  const void* bias = nullptr;  // [N] in bias_type, or null
  int bias_type = 2;
  float clamp_lo = 0.f, clamp_hi = 0.f;

  // The work and epilogue fields (host side).
  void set(int M_, int N_, const StreamKSchedule& s, float* partial_, unsigned* tickets_, void* y_,
           int64_t ldy_, int y_type_, const void* bias_, int bias_type_, float lo, float hi) {
    M = M_;
    N = N_;
    sched = s;
    partial = partial_;
    tickets = tickets_;
    y = y_;
    ldy = ldy_;
    y_type = y_type_;
    bias = bias_;
    bias_type = bias_type_;
    clamp_lo = lo;
    clamp_hi = hi;
  }
  SkinnyGroup group;  // the grouped form only
};

constexpr int kSkinnyThreads = 288;  // two consumer warpgroups + producer warp

template <class Policy, int MT, int kStages>
struct SkinnyShape {
  static_assert(MT == 16 || MT == 32 || MT == 64 || MT == 128, "token tiles of 16 ... 128");
  static_assert(Policy::kWMetaBytes % 128 == 0 && Policy::kXMetaBytes % 128 == 0,
                "TMA destinations 128-byte aligned");
  static constexpr int kThreads = kSkinnyThreads;
  static constexpr int kWBytes = 128 * 128, kXBytes = MT * 128;  // 1024-byte multiples
  static constexpr int kStageBytes = kWBytes + kXBytes + Policy::kWMetaBytes + Policy::kXMetaBytes;
  static constexpr uint32_t kTxBytes = kWBytes + kXBytes + Policy::kWMetaTx + Policy::kXMetaTx;
  static constexpr int kSmemBytes = 1024 + kStages * kStageBytes + 2 * kStages * 8 + 16;
};

// The ring in dynamic shared memory (1024-byte aligned for the 128-byte swizzle): kStages weight
// tiles, token tiles, weight meta and token meta, then the full / empty barriers and the flag of
// the cut tiles' last piece.
template <class Policy, int MT, int kStages>
struct SkinnySmem {
  using Shape = SkinnyShape<Policy, MT, kStages>;
  uint8_t *w_tiles, *x_tiles, *w_meta, *x_meta;
  uint64_t *full, *empty;
  int* last_flag;
  int* tail;  // past the ring (16-byte aligned): the grouped form's in-kernel schedule
  __device__ __forceinline__ explicit SkinnySmem(uint8_t* raw) {
    w_tiles = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
    x_tiles = w_tiles + kStages * Shape::kWBytes;
    w_meta = x_tiles + kStages * Shape::kXBytes;
    x_meta = w_meta + kStages * Policy::kWMetaBytes;
    full = reinterpret_cast<uint64_t*>(x_meta + kStages * Policy::kXMetaBytes);
    empty = full + kStages;
    last_flag = reinterpret_cast<int*>(empty + kStages);
    tail = last_flag + 4;
  }
  // Thread 0, before the block's first barrier.
  __device__ __forceinline__ void init_barriers() const {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);   // the producer's arrive.expect_tx + the stage's TMA bytes
      mbar_init(&empty[s], 8);  // one arrival per consumer warp
    }
    fence_barrier_init();
  }
};

constexpr int kSkinnyBarrier = 1;  // the consumer warpgroups' named barrier (0 is __syncthreads)

// Partial slot layout: float4 q (accumulators 4q .. 4q + 3 of a thread, q < MT / 8) of consumer
// thread tid (of 256) at [slot][q][tid]: coalesced on both sides.
template <int MT>
__device__ __forceinline__ float4* skinny_slot(float* partial, int slot, int tid) {
  return reinterpret_cast<float4*>(partial) + int64_t(slot) * (MT / 8) * 256 + tid;
}

// Registers of consumer thread tid (warp = tid / 32 of the two warpgroups): accumulator 4j + e
// holds weight row 16 warp + lane / 4 + 8 (e >> 1) of the tile, token 8 j + 2 (lane % 4) + (e & 1).
// Token m of the tile is row m0 + m of Y, stored for m < rows; bias: the weight's row (or null).
template <int kYType, int MT>
__device__ __forceinline__ void skinny_store(const SkinnyParams& p, const float (&v)[MT / 2],
                                             int n0, int m0, int rows, const void* bias, int warp,
                                             int lane) {
  using T = typename OutT<kYType>::T;
  T* y = static_cast<T*>(p.y) + int64_t(m0) * p.ldy;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int n = n0 + 16 * warp + lane / 4 + 8 * r;
    if (n >= p.N) continue;
    const float b = bias ? load_as_float(bias, p.bias_type, n) : 0.f;
#pragma unroll
    for (int j = 0; j < MT / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int m = 8 * j + 2 * (lane % 4) + c;
        if (m >= rows) continue;
        const float o = fminf(fmaxf(v[4 * j + 2 * r + c] + b, p.clamp_lo), p.clamp_hi);
        y[int64_t(m) * p.ldy + n] = to_out<kYType>(o);
      }
  }
}

template <int MT>
__device__ __forceinline__ void skinny_store_any(const SkinnyParams& p, const float (&v)[MT / 2],
                                                 int n0, int m0, int rows, const void* bias,
                                                 int warp, int lane) {
  if (p.y_type == 0) skinny_store<0, MT>(p, v, n0, m0, rows, bias, warp, lane);
  else if (p.y_type == 1) skinny_store<1, MT>(p, v, n0, m0, rows, bias, warp, lane);
  else skinny_store<2, MT>(p, v, n0, m0, rows, bias, warp, lane);
}

// One 128-K stage of a consumer warpgroup (cw: which 64 rows of the weight tile): waits for the
// stage, runs its K blocks' MMAs, each into a fresh accumulator (the tensor-core accumulator never
// spans two K blocks: each has its own scales), folds them into the f32 totals and releases the
// stage. Each warpgroup waits for its own MMAs and promotes while the other's run. xrow: the row of
// the stage's token meta that holds token 0 (the grouped form's boxes start up to 3 rows earlier).
template <class Policy, int MT, int kStages>
__device__ __forceinline__ void skinny_consume_stage(float (&total)[MT / 2],
                                                     const SkinnySmem<Policy, MT, kStages>& sm,
                                                     RingPos& in, int kb, int cw, int row, int col,
                                                     int lane, int xrow) {
  using Shape = SkinnyShape<Policy, MT, kStages>;
  using Acc = typename Policy::Mma::Acc;
  constexpr int R = MT / 2;
  constexpr int kB = Policy::kBlocks, kSteps = 4 / kB;  // K blocks per stage, k32 steps per block
  Acc acc[kB][R];
  const int s = in.stage;
  mbar_wait(&sm.full[s], in.phase);
  __syncwarp();  // the spin loop may leave the warp diverged; wgmma needs it converged
  // this warpgroup's 64 rows are 64 x 128 bytes into the weight tile
  const uint32_t dw = desc_lo_kmajor_sw128(smem_u32(sm.w_tiles + s * Shape::kWBytes + cw * 64 * 128));
  const uint32_t dx = desc_lo_kmajor_sw128(smem_u32(sm.x_tiles + s * Shape::kXBytes));
  wgmma_fence();
#pragma unroll
  for (int b = 0; b < kB; ++b)
#pragma unroll
    for (int k = 0; k < kSteps; ++k)
      Policy::Mma::mma(acc[b], desc_from_lo_sw128(dw + 2 * (b * kSteps + k)),
                       desc_from_lo_sw128(dx + 2 * (b * kSteps + k)), k);
  wgmma_commit();
  wgmma_wait<0>();
#pragma unroll
  for (int b = 0; b < kB; ++b)
#pragma unroll
    for (int i = 0; i < R; ++i) reg_fence(acc[b][i]);
  // The block's meta is read from the slot while promoting: release it afterwards (the ring is
  // deep enough for the few hundred cycles).
#pragma unroll
  for (int b = 0; b < kB; ++b)
    Policy::promote(total, acc[b], smem_u32(sm.w_meta + s * Policy::kWMetaBytes),
                    smem_u32(sm.x_meta + s * Policy::kXMetaBytes), kb, b, row, col, xrow);
  __syncwarp();
  if (lane == 0) mbar_arrive(&sm.empty[s]);
  in.advance();
}

// A piece of an output tile cut between CTAs: this CTA's totals go to its partial slot, then the
// tile's last piece to arrive (a ticket per tile, `pieces` of them) sums every piece's slot in
// piece order (slot_of(i), i < pieces), so the bits do not depend on which CTA ends last, and
// resets the ticket for the next launch. Returns true on the CTA that holds the sum in `total`.
template <int MT, class SlotOf>
__device__ __forceinline__ bool skinny_sum_pieces(float (&total)[MT / 2], float* partial, int slot,
                                                  unsigned* ticket, int pieces, SlotOf slot_of,
                                                  int* last_flag, int tid) {
  float4* dst = skinny_slot<MT>(partial, slot, tid);
#pragma unroll
  for (int q = 0; q < MT / 8; ++q) dst[q * 256] = make_float4(total[4 * q], total[4 * q + 1],
                                                              total[4 * q + 2], total[4 * q + 3]);
  // this thread's slot stores, before the ticket (cumulative through the barrier)
  __threadfence();
  named_barrier_sync(kSkinnyBarrier, 256);
  if (tid == 0) *last_flag = atomicAdd(ticket, 1u) == unsigned(pieces - 1);
  named_barrier_sync(kSkinnyBarrier, 256);
  const bool last = *last_flag != 0;
  named_barrier_sync(kSkinnyBarrier, 256);  // everyone has read the flag before it is rewritten
  if (!last) return false;
  __threadfence();  // the other pieces' stores, seen through their tickets
  float4 sum[MT / 8];
#pragma unroll
  for (int q = 0; q < MT / 8; ++q) sum[q] = make_float4(0.f, 0.f, 0.f, 0.f);  // 0 + x == x
  for (int i = 0; i < pieces; ++i) {
    const float4* src = skinny_slot<MT>(partial, slot_of(i), tid);
#pragma unroll
    for (int q = 0; q < MT / 8; ++q) {
      const float4 u = __ldcg(src + q * 256);
      sum[q].x += u.x;
      sum[q].y += u.y;
      sum[q].z += u.z;
      sum[q].w += u.w;
    }
  }
#pragma unroll
  for (int q = 0; q < MT / 8; ++q) {
    total[4 * q] = sum[q].x;
    total[4 * q + 1] = sum[q].y;
    total[4 * q + 2] = sum[q].z;
    total[4 * q + 3] = sum[q].w;
  }
  if (tid == 0) *ticket = 0;  // every piece has arrived: the next launch starts from zero
  return true;
}

// The producer's token loads of its first kStages stages: those stages' weights (a prepared
// buffer no kernel of the stream writes) go out at once, their token tiles (the previous grid's
// output) only after the wait for that grid, issued together once the ring has been filled (or the
// work ends first: flush). load(s, kb, m0) loads ring stage s's tokens.
template <int kStages>
struct SkinnyEarlyTokens {
  int kb[kStages], m0[kStages];
  int n = 0;
  bool waited = false;
  template <class Load>
  __device__ __forceinline__ void add(int s, int kb_, int m0_, Load&& load) {
    if (waited) {
      load(s, kb_, m0_);
      return;
    }
    kb[n] = kb_;  // ring stage n: the ring is at most kStages ahead
    m0[n] = m0_;
    if (++n == kStages) flush(load);
  }
  template <class Load>
  __device__ __forceinline__ void flush(Load&& load) {
    if (waited) return;
    grid_dependency_wait();
    waited = true;
    for (int e = 0; e < n; ++e) load(e, kb[e], m0[e]);
  }
};

// Policy: SkinnyFp8Policy<MT> or SkinnyInt8Policy<MT, G, offset> (sm90_skinny_policies.cuh).
template <class Policy, int MT, int kStages>
__global__ void __launch_bounds__(kSkinnyThreads, 1)
    sm90_skinny_kernel(const __grid_constant__ CUtensorMap tm_w,  // codes {K, N}, box {128, 128}
                       const __grid_constant__ CUtensorMap tm_x,  // codes {K, M}, box {128, MT}
                       const __grid_constant__ typename Policy::Params pp,  // the meta's maps
                       const SkinnyParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Shape = SkinnyShape<Policy, MT, kStages>;
  constexpr int R = MT / 2;  // accumulator registers per thread
  extern __shared__ uint8_t smem_raw[];
  const SkinnySmem<Policy, MT, kStages> sm(smem_raw);
  if (threadIdx.x == 0) sm.init_barriers();
  __syncthreads();
  allow_dependent_launch();
  const StreamKSchedule& sched = p.sched;

  if (threadIdx.x >= 256) {  // producer warp
    if (threadIdx.x != 256) return;
    tma_prefetch_desc(&tm_w);
    tma_prefetch_desc(&tm_x);
    StreamKCursor cur(sched, int(blockIdx.x));
    StreamKWork w;
    RingPos out(kStages);
    // The first stages' weights and weight meta go out before the wait for the previous grid;
    // their token tiles and token meta after it.
    SkinnyEarlyTokens<kStages> early;
    auto load_tokens = [&](int s, int kb, int) {
      tma_load_2d(sm.x_tiles + s * Shape::kXBytes, &tm_x, &sm.full[s], kb * 128, 0);
      Policy::load_xmeta(pp, sm.x_meta + s * Policy::kXMetaBytes, &sm.full[s], kb, 0);
    };
    while (cur.next(sched, w)) {
      int mb, nb;
      stream_k_tile_coords(sched, w.tile, mb, nb);
      for (int kb = w.c0; kb < w.c1; ++kb) {
        const int s = out.stage;
        mbar_wait(&sm.empty[s], out.phase ^ 1);
        mbar_arrive_expect_tx(&sm.full[s], Shape::kTxBytes);
        tma_load_2d(sm.w_tiles + s * Shape::kWBytes, &tm_w, &sm.full[s], kb * 128, nb * 128);
        Policy::load_wmeta(pp, sm.w_meta + s * Policy::kWMetaBytes, &sm.full[s], nb, kb);
        early.add(s, kb, 0, load_tokens);
        out.advance();
      }
    }
    early.flush(load_tokens);  // fewer iterations than stages
    return;
  }

  // Consumers.
  grid_dependency_wait();  // tickets, partials and Y belong to the previous launches until here
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int cw = tid / 128;  // which 64 rows of the weight tile
  // this thread's weight rows row, row + 8 and tokens 8 j + col + {0, 1}
  const int row = 16 * warp + lane / 4, col = 2 * (lane % 4);
  StreamKCursor cur(sched, int(blockIdx.x));
  StreamKWork w;
  RingPos in(kStages);
  float total[R];
  while (cur.next(sched, w)) {
    int mb, nb;
    stream_k_tile_coords(sched, w.tile, mb, nb);
#pragma unroll
    for (int i = 0; i < R; ++i) total[i] = 0.f;
    for (int kb = w.c0; kb < w.c1; ++kb)
      skinny_consume_stage<Policy, MT, kStages>(total, sm, in, kb, cw, row, col, lane, 0);
    const int n0 = nb * 128;
    if (w.split) {
      // A piece of a cut tile: park it; the last piece of the tile to arrive sums them all, its
      // pieces' CTAs in order.
      const int t = w.tile - sched.dp_tiles;
      const int64_t it0 = int64_t(t) * sched.chunks;
      const int b_lo = StreamKCursor::sk_owner(sched, it0);
      const int b_hi = StreamKCursor::sk_owner(sched, it0 + sched.chunks - 1);
      const auto slot_of = [&](int i) { return StreamKCursor::slot_of(sched, b_lo + i, t); };
      if (!skinny_sum_pieces<MT>(total, p.partial, StreamKCursor::slot_of(sched, int(blockIdx.x), t),
                                 p.tickets + t, b_hi - b_lo + 1, slot_of, sm.last_flag, tid))
        continue;
    }
    skinny_store_any<MT>(p, total, n0, 0, p.M, p.bias, warp, lane);
  }
#else
  __trap();  // built for an architecture without wgmma / TMA: the host never launches this
#endif
}

}  // namespace mixq::cuda::sm90
