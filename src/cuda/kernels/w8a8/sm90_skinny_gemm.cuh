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
#include "cuda/kernels/w8a8/sm90_block_gemm.cuh"  // load_io, to_out
#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/common/sm90_wgmma.cuh"
#include "cuda/kernels/common/stream_k.hpp"

namespace mixq::cuda::sm90 {

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
};

template <class Policy, int MT, int kStages>
struct SkinnyShape {
  static_assert(MT == 16 || MT == 32 || MT == 64 || MT == 128, "token tiles of 16 ... 128");
  static_assert(Policy::kWMetaBytes % 128 == 0 && Policy::kXMetaBytes % 128 == 0,
                "TMA destinations 128-byte aligned");
  static constexpr int kThreads = 288;  // two consumer warpgroups + producer warp
  static constexpr int kWBytes = 128 * 128, kXBytes = MT * 128;  // 1024-byte multiples
  static constexpr int kStageBytes = kWBytes + kXBytes + Policy::kWMetaBytes + Policy::kXMetaBytes;
  static constexpr uint32_t kTxBytes = kWBytes + kXBytes + Policy::kWMetaTx + Policy::kXMetaTx;
  static constexpr int kSmemBytes = 1024 + kStages * kStageBytes + 2 * kStages * 8 + 16;
};

// Partial slot layout: float4 q (accumulators 4q .. 4q + 3 of a thread, q < MT / 8) of consumer
// thread tid (of 256) at [slot][q][tid]: coalesced on both sides.
template <int MT>
__device__ __forceinline__ float4* skinny_slot(float* partial, int slot, int tid) {
  return reinterpret_cast<float4*>(partial) + int64_t(slot) * (MT / 8) * 256 + tid;
}

// Registers of consumer thread tid (warp = tid / 32 of the two warpgroups): accumulator 4j + e
// holds weight row 16 warp + lane / 4 + 8 (e >> 1) of the tile, token 8 j + 2 (lane % 4) + (e & 1).
template <int kYType, int MT>
__device__ __forceinline__ void skinny_store(const SkinnyParams& p, const float (&v)[MT / 2],
                                             int n0, int warp, int lane) {
  using T = typename OutT<kYType>::T;
  T* y = static_cast<T*>(p.y);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int n = n0 + 16 * warp + lane / 4 + 8 * r;
    if (n >= p.N) continue;
    const float b = p.bias ? load_io(p.bias, p.bias_type, n) : 0.f;
#pragma unroll
    for (int j = 0; j < MT / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int m = 8 * j + 2 * (lane % 4) + c;
        if (m >= p.M) continue;
        const float o = fminf(fmaxf(v[4 * j + 2 * r + c] + b, p.clamp_lo), p.clamp_hi);
        y[int64_t(m) * p.ldy + n] = to_out<kYType>(o);
      }
  }
}

template <int MT>
__device__ __forceinline__ void skinny_store_any(const SkinnyParams& p, const float (&v)[MT / 2],
                                                 int n0, int warp, int lane) {
  if (p.y_type == 0) skinny_store<0, MT>(p, v, n0, warp, lane);
  else if (p.y_type == 1) skinny_store<1, MT>(p, v, n0, warp, lane);
  else skinny_store<2, MT>(p, v, n0, warp, lane);
}

constexpr int kSkinnyBarrier = 1;  // the consumer warpgroups' named barrier (0 is __syncthreads)

// Policy: SkinnyFp8Policy<MT> or SkinnyInt8Policy<MT, G, offset> (sm90_skinny_policies.cuh).
template <class Policy, int MT, int kStages>
__global__ void __launch_bounds__(288, 1)
    sm90_skinny_kernel(const __grid_constant__ CUtensorMap tm_w,  // codes {K, N}, box {128, 128}
                       const __grid_constant__ CUtensorMap tm_x,  // codes {K, M}, box {128, MT}
                       const __grid_constant__ typename Policy::Params pp,  // the meta's maps
                       const SkinnyParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Shape = SkinnyShape<Policy, MT, kStages>;
  using Mma = typename Policy::Mma;
  using Acc = typename Mma::Acc;
  constexpr int R = MT / 2;  // accumulator registers per thread
  constexpr int kB = Policy::kBlocks, kSteps = 4 / kB;  // K blocks per stage, k32 steps per block
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                             ~uintptr_t(1023));
  uint8_t* w_tiles = smem;
  uint8_t* x_tiles = w_tiles + kStages * Shape::kWBytes;
  uint8_t* w_meta = x_tiles + kStages * Shape::kXBytes;
  uint8_t* x_meta = w_meta + kStages * Policy::kWMetaBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(x_meta + kStages * Policy::kXMetaBytes);
  uint64_t* empty = full + kStages;
  int* last_flag = reinterpret_cast<int*>(empty + kStages);

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);   // the producer's arrive.expect_tx + the stage's TMA bytes
      mbar_init(&empty[s], 8);  // one arrival per consumer warp
    }
    fence_barrier_init();
  }
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
    // The first stages' weights and weight meta (no kernel writes them) go out before the wait for
    // the previous grid; their token tiles and token meta after it.
    int early_kb[kStages], n_early = 0;
    bool waited = false;
    auto load_tokens = [&](int s, int kb) {
      tma_load_2d(x_tiles + s * Shape::kXBytes, &tm_x, &full[s], kb * 128, 0);
      Policy::load_xmeta(pp, x_meta + s * Policy::kXMetaBytes, &full[s], kb);
    };
    while (cur.next(sched, w)) {
      int mb, nb;
      stream_k_tile_coords(sched, w.tile, mb, nb);
      for (int kb = w.c0; kb < w.c1; ++kb) {
        const int s = out.stage;
        mbar_wait(&empty[s], out.phase ^ 1);
        mbar_arrive_expect_tx(&full[s], Shape::kTxBytes);
        tma_load_2d(w_tiles + s * Shape::kWBytes, &tm_w, &full[s], kb * 128, nb * 128);
        Policy::load_wmeta(pp, w_meta + s * Policy::kWMetaBytes, &full[s], nb, kb);
        if (waited) {
          load_tokens(s, kb);
        } else {
          early_kb[n_early] = kb;  // stage n_early: the ring is at most kStages ahead
          if (++n_early == kStages) {
            grid_dependency_wait();
            waited = true;
            for (int i = 0; i < n_early; ++i) load_tokens(i, early_kb[i]);
          }
        }
        out.advance();
      }
    }
    if (!waited) {  // fewer iterations than stages
      grid_dependency_wait();
      for (int i = 0; i < n_early; ++i) load_tokens(i, early_kb[i]);
    }
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
  Acc acc[kB][R];
  while (cur.next(sched, w)) {
    int mb, nb;
    stream_k_tile_coords(sched, w.tile, mb, nb);
#pragma unroll
    for (int i = 0; i < R; ++i) total[i] = 0.f;
    for (int kb = w.c0; kb < w.c1; ++kb) {
      const int s = in.stage;
      mbar_wait(&full[s], in.phase);
      __syncwarp();  // the spin loop may leave the warp diverged; wgmma needs it converged
      // this warpgroup's 64 rows are 64 x 128 bytes into the weight tile
      const uint32_t dw =
          desc_lo_kmajor_sw128(smem_u32(w_tiles + s * Shape::kWBytes + cw * 64 * 128));
      const uint32_t dx = desc_lo_kmajor_sw128(smem_u32(x_tiles + s * Shape::kXBytes));
      wgmma_fence();
#pragma unroll
      for (int b = 0; b < kB; ++b)
#pragma unroll
        for (int k = 0; k < kSteps; ++k)  // a fresh accumulator per K block
          Mma::mma(acc[b], desc_from_lo_sw128(dw + 2 * (b * kSteps + k)),
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
        Policy::promote(total, acc[b], smem_u32(w_meta + s * Policy::kWMetaBytes),
                        smem_u32(x_meta + s * Policy::kXMetaBytes), kb, b, row, col);
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
      in.advance();
    }
    const int n0 = nb * 128;
    if (!w.split) {
      skinny_store_any<MT>(p, total, n0, warp, lane);
      continue;
    }
    // A piece of a cut tile: park it, then the last piece of the tile to arrive sums them all.
    const int t = w.tile - sched.dp_tiles;
    const int slot = StreamKCursor::slot_of(sched, int(blockIdx.x), t);
    float4* dst = skinny_slot<MT>(p.partial, slot, tid);
#pragma unroll
    for (int q = 0; q < MT / 8; ++q) dst[q * 256] = make_float4(total[4 * q], total[4 * q + 1],
                                                                total[4 * q + 2], total[4 * q + 3]);
    // this thread's slot stores, before the ticket (cumulative through the barrier)
    __threadfence();
    const int64_t it0 = int64_t(t) * sched.chunks;
    const int b_lo = StreamKCursor::sk_owner(sched, it0);
    const int b_hi = StreamKCursor::sk_owner(sched, it0 + sched.chunks - 1);
    named_barrier_sync(kSkinnyBarrier, 256);
    if (tid == 0) *last_flag = atomicAdd(p.tickets + t, 1u) == unsigned(b_hi - b_lo);
    named_barrier_sync(kSkinnyBarrier, 256);
    const bool last = *last_flag != 0;
    named_barrier_sync(kSkinnyBarrier, 256);  // everyone has read the flag before it is rewritten
    if (!last) continue;
    __threadfence();  // the other pieces' stores, seen through their tickets
    float4 sum[MT / 8];
#pragma unroll
    for (int q = 0; q < MT / 8; ++q) sum[q] = make_float4(0.f, 0.f, 0.f, 0.f);  // 0 + x == x
    for (int b = b_lo; b <= b_hi; ++b) {
      const float4* src = skinny_slot<MT>(p.partial, StreamKCursor::slot_of(sched, b, t), tid);
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
    skinny_store_any<MT>(p, total, n0, warp, lane);
    if (tid == 0) p.tickets[t] = 0;  // every piece has arrived: the next launch starts from zero
  }
#else
  __trap();  // built for an architecture without wgmma / TMA: the host never launches this
#endif
}

}  // namespace mixq::cuda::sm90
