// Hopper weight-only GEMM, warp-specialized: Y[M][N] = X[M][K] . W[N][K]^T
// with W the packed INT4/INT8 tiles of wo_layout.hpp, dequantized in registers into the A operand
// of wgmma.mma_async (register-A form); X is the B operand in shared memory.
//
// CTA = 3 warpgroups (384 threads), persistent over output tiles of 128 weight rows x MT tokens,
// 1 CTA per SM (2 at token tiles of 16 and 32 for large int4 weights: the plan decides), hybrid
// data-parallel + stream-K (wo_stream_k.hpp):
//   warpgroup 0 (producer) gives its registers away; one thread fills a STAGES-deep ring of 64-K
//     stages with three TMA loads each, completing on the stage's `full` mbarrier (expect_tx): the
//     X tile (MT x 64, 128-byte swizzle, zero-filled past M and K), the stage's chunk of the CTA's
//     8 packed 16-row weight tiles (3-D box, zero past the last row tile), and the (s, o') pairs
//     of the stage's groups for the 128 rows (2-D box over a group-major copy of the pairs).
//   warpgroups 1, 2 (consumers) own 64 weight rows each: per stage they wait `full`, dequantize the
//     stage into one of two A register buffers, issue 4 wgmma m64nMTk16, and release the previous
//     stage (`empty`) once wgmma.wait_group 1 says its MMAs are done, so the dequantization of
//     stage i overlaps the tensor-core work of stage i - 1 and no thread of the CTA ever waits on a
//     CTA-wide barrier.
// The consumers do no address arithmetic for copies and no cp.async bookkeeping (the v1 kernel's
// exposed per-chunk overhead, docs/cuda-weight-only.md). The pieces of a tile cut between CTAs go
// to per-CTA partial slots, summed in CTA order (deterministic) either by the CTA that owns the
// tile, at the end of its range, behind per-tile completion flags (the inline reduction: small
// token tiles, and tiles cut into few pieces; the plan decides), or by stream_k_fixup_kernel
// after the grid. Or (sched.k_split > 1, forced by the tuning) a non-persistent grid of clusters,
// one tile a cluster and one K range a CTA, the pieces summed in distributed shared memory
// (sm90_wo_ws_k_split.cuh).
// W4A8 (CODES = kCodesU4F8, T = __nv_fp8_e4m3; docs/decisions/w4a8.md): X is e4m3 codes quantized
// per token per 128 (tm_s: the tokens' block factors 512 s_a and -s_a sum(a), loaded into each
// stage after its pairs), the stage is one 128-K group, the consumers' A registers are the code
// nibbles spread to bytes (u * 2^-9 as e4m3), and the fold turns the stage's MMA sums into
// s_w (512 s_a acc - zc s_a sum(a)).
// GROUPED (the mixture-of-experts GEMM, dispatch/moe_plan.cpp): the same CTA walks whole tiles of
// the device-side (expert, token tile) list x N blocks instead (sm90_wo_ws_work.cuh), each item's
// weight and pairs through its expert's descriptors, outputs stored at the expert's rows (the
// TMA-store epilogue's rounds that cross its last row copied out by hand);
// launched as a dependent of the schedule kernel, every thread waits for it before the walk.
// Where the plan asks for it (dispatch/wo_plan.cpp), both kernels are programmatic dependent
// launches: the producer waits for the previous grid (griddepcontrol.wait) after the weight loads
// of its first StreamKSchedule::early_stages stages and before any activation load; the fixup waits
// for the kernel. Without it the waits are no-ops. The inline reduction's waits are safe because
// the persistent grid is resident at once (one or two CTAs per SM, sized from the SM count).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/common/dequant_codes.cuh"
#include "cuda/kernels/common/grid_dependency.cuh"
#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/common/sm90_wgmma.cuh"
#include "cuda/kernels/common/sm90_wgmma_dequant.cuh"
#include "cuda/kernels/common/stream_k.hpp"
#include "cuda/kernels/wo/sm80_wo_stream.cuh"
#include "cuda/kernels/wo/sm90_wo_stream_k_reduce.cuh"
#include "cuda/kernels/wo/sm90_wo_ws_k_split.cuh"
#include "cuda/kernels/wo/sm90_wo_ws_tile.cuh"
#include "cuda/kernels/wo/sm90_wo_ws_work.cuh"

namespace mixq::cuda {

namespace ws_detail {

// A stage's MMAs over the first NT tokens of the tile: the first NT / 2 registers of an m64nMT
// accumulator fragment are the m64nNT fragment of those tokens, and the B descriptor's first NT
// rows are theirs. STEP_BYTES(j): the offset of k16 (W4A8: k32) step j in the stage's X.
template <typename T, int NT, int STEPS, int SETS, int ACC, bool SCALE_FIRST, class StepOffset>
__device__ __forceinline__ void ws_stage_mmas(uint32_t d, const uint32_t (&src)[STEPS][4], float (&acc)[SETS][ACC],
                                              StepOffset&& step_bytes) {
  static_assert(NT / 2 <= ACC, "a prefix of the fragment");
  sm90::wgmma_fence();  // in each arm of the caller's branch (before it, ptxas adds its own)
#pragma unroll
  for (int j = 0; j < STEPS; ++j)
    sm90::WgmmaRS<T, NT>::mma(*reinterpret_cast<float(*)[NT / 2]>(&acc[j % SETS][0]), src[j],
                              sm90::desc_from_lo_sw128(d + step_bytes(j) / 16), SCALE_FIRST && j < SETS ? 0 : 1);
}

// Fold mode: a completed stage's sums (SETS partial sets, summed in a fixed order), times the row
// scales, into the tile's sums. Accumulator 4q + e holds row r_lo for e < 2, r_lo + 8 for e >= 2,
// token 8q + 2 (lane % 4) + (e & 1). W4A8 (A8): the tokens' block factors (512 s_a, f_a) at shared
// address sa (token 8q + 2 (lane % 4) at sa + 64 q) give s_w (512 s_a acc + zc f_a) with
// f_a = -s_a sum(a): s_w (u - zc) . a s_a, three FP32 instructions per sum. ZERO_IN_FACTORS: every
// group's zc is the one the quantizer multiplied into f_a, which the fold then adds as it is: two
// instructions (the same bits: zc times -s_a sum(a) is the same product rounded once either way).
template <bool A8, bool ZERO_IN_FACTORS, int MT, int SETS, int ACC>
__device__ __forceinline__ void ws_fold_stage(float (&accm)[ACC], const float (&d_acc)[SETS][ACC],
                                              const sm90::FoldRow (&fr)[2], uint32_t sa) {
  float zc[2] = {0.f, 0.f};  // W4A8, the rows' own zero points (sm90_wgmma_dequant.cuh: FoldRow)
  if constexpr (A8 && !ZERO_IN_FACTORS)
#pragma unroll
    for (int h = 0; h < 2; ++h) zc[h] = sm90::integer_zero(make_float2(fr[h].scale, fr[h].off));
#pragma unroll
  for (int q = 0; q < MT / 8; ++q) {
    float fa[2] = {1.f, 1.f}, fd[2] = {0.f, 0.f};  // the two tokens' factors
    if constexpr (A8) {
      const uint2 v0 = sm90::lds64(sa + uint32_t(q) * 64u), v1 = sm90::lds64(sa + uint32_t(q) * 64u + 8u);
      fa[0] = __uint_as_float(v0.x);
      fd[0] = __uint_as_float(v0.y);
      fa[1] = __uint_as_float(v1.x);
      fd[1] = __uint_as_float(v1.y);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 4 * q + e;
      float t = d_acc[0][i];
#pragma unroll
      for (int k = 1; k < SETS; ++k) t += d_acc[k][i];
      const sm90::FoldRow& r = fr[e >> 1];
      if constexpr (A8) t = fmaf(fa[e & 1], t, ZERO_IN_FACTORS ? fd[e & 1] : zc[e >> 1] * fd[e & 1]);
      accm[i] = fmaf(t, r.scale, accm[i]);
    }
  }
}

// FOLD: scale after the MMA (sm90_wgmma_dequant.cuh): the stage (one group) accumulates u - zc
// (or the e4m3 value) in its own registers, folded into the tile's sums with the row scale.
// GROUPED: the mixture-of-experts GEMM (sm90_wo_ws_work.cuh): items from g's tile list, each
// expert's weight and pairs through its own descriptors in g.maps, X and Y rows of the expert.
template <typename T, int MT, int CODES, sm90::PairPath PP, WsShape SHAPE, bool FOLD = false, bool GROUPED = false>
__global__ void __launch_bounds__(kWsThreads, WsConfig<MT, SHAPE>::kCtas)
    wo_wgmma_ws_kernel(const __grid_constant__ CUtensorMap tm_x, const __grid_constant__ CUtensorMap tm_w,
                       const __grid_constant__ CUtensorMap tm_p, const __grid_constant__ CUtensorMap tm_y,
                       const __grid_constant__ CUtensorMap tm_s, const WoStreamParams p,
                       const StreamKSchedule sched, const MoeWsGroup g) {
#if defined(MIXQ_SM90A)
  using Tile = WsTile<MT, CODES, SHAPE>;
  constexpr int BITS = Tile::BITS;
  constexpr int CPS = Tile::kCps;
  constexpr int NBUF = Tile::kBufs;
  // W4A8 (e4m3 activations, T = __nv_fp8_e4m3): the stage's X is one [MT][128] e4m3 box, its
  // block factors follow the pairs, the A operand is u * 2^-9 in e4m3 (fold mode), MMAs are k32
  constexpr bool A8 = Tile::kA8;
  static_assert(!A8 || (FOLD && CPS == 2 && PP == sm90::PairPath::F32), "W4A8: fold mode, 128-K stages, f32 pairs");
  constexpr int kSteps = A8 ? 2 * CPS : 4 * CPS;  // k16 (k32 for W4A8) steps per stage
  constexpr int kAcc = MT / 2;
  // Independent accumulator sets for consecutive k16 steps: with small token tiles a wgmma is
  // short and a chain of dependent wgmmas on one accumulator is latency-bound (measured: ~480
  // cycles per 64-K stage at MT = 16 with nothing loaded). Summed in a fixed order at the end.
  // (fold mode keeps a second, per-stage set of accumulators per A buffer: fewer sets)
  constexpr int kSets = FOLD                                  ? (MT <= 32 ? 2 : 1)
                        : MT <= 32                            ? (NBUF * CPS == 4 ? 4 : 2)
                        : MT < 128 || (MT == 128 && CPS == 1) ? 2
                                                              : 1;
  // stage accumulator buffers: W4A8 at MT = 128 pipelines the A buffers only (two stage sets and
  // the tile's sums would not fit): stage t is converted while stage t - 1's MMAs run, then
  // folded, and stage t's MMAs overwrite the one set
  constexpr int kStageBufs = FOLD ? (A8 && MT >= 128 ? 1 : NBUF) : 1;
  constexpr int kSb = kStageBufs - 1;  // 0 or 1: the stage set of A buffer h is h & kSb
  constexpr int kTileBytes = Tile::kTileBytes;
  // Ragged tiles (below): 16-bit activations without the fold; 192-token tiles, and the grouped
  // GEMM's 128- and 256-token tiles. The arms: 64, 128 and 192 tokens at 192; 64 and MT at 128 and
  // 256 (with a third arm at 256 ptxas serializes the wgmmas, C7512: their 128 accumulator
  // registers leave too few for it).
  constexpr bool kRagged = !FOLD && !A8 && (MT == 192 || (GROUPED && (MT == 128 || MT == 256)));
  constexpr int kRaggedMax = MT == 192 ? 128 : 64;  // the largest arm below MT
  // K split over a cluster (sm90_wo_ws_k_split.cuh): token tiles up to 64, whose ring holds a
  // partial tile, but not the fold at 64 (its f32-pair variant spilled 144 bytes with it, 0
  // without); sched.k_split > 1 only there (the plan and the launcher check, ws_k_split_built)
  constexpr bool kCanSplit = ws_k_split_built(MT, FOLD, GROUPED);
  static_assert(
      !kCanSplit || 2 * (Tile::kXStage + Tile::kWStage) >= int(ws_k_split_partial_bytes(MT)),
      "the ring holds the K split's partial tile");
  // read where it is used, not held: the two-CTA producer has 24 registers
  auto k_split_on = [&]() { return kCanSplit && sched.k_split > 1; };

  extern __shared__ uint8_t smem_raw[];
  // Every shared address as a 32-bit offset computed once (a generic pointer would be converted
  // again at every stage). 1024-byte alignment: the 128-byte swizzle phase is a function of
  // address bits 7..9 (the shared window's base is aligned far beyond that).
  const int gs = p.group_shift;
  const uint32_t psz = ws_pair_bytes(PP, p.pair_f32);
  const uint32_t pbytes = ws_stage_pair_bytes(PP, p.pair_f32, p.group_shift, CPS);
  const uint32_t p_stage = ws_stage_meta_bytes(pbytes, MT, A8);
  const uint32_t s_off = (pbytes + 127u) & ~127u;  // W4A8: the stage's activation factors
  constexpr uint32_t sbytes = A8 ? ws_a8_factor_box(MT) * 8 : 0;
  const uint32_t y_bytes = ws_y_stage_bytes(sched.y_rows);
  const int S = ws_ring_stages<MT, CODES, SHAPE>(p_stage, y_bytes, sched.max_stages);
  const uint32_t smem = (sm90::smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t y_tiles = smem;  // consumer warpgroup g's staging tile at y_tiles + g y_bytes
  const uint32_t x_tiles = y_tiles + 2 * y_bytes;
  const uint32_t w_tiles = x_tiles + S * Tile::kXStage;
  const uint32_t p_tiles = w_tiles + S * Tile::kWStage;
  const uint32_t full = p_tiles + S * p_stage;  // S barriers of 8 bytes
  const uint32_t empty = full + 8 * S;

  const int warpgroup = threadIdx.x / 128;
  const int lane = threadIdx.x & 31;
  // The next dependent launch of the stream (the fixup kernel, or the next call's kernel, which
  // reads only its weights before it waits for this grid) may start as soon as every CTA runs.
  allow_dependent_launch();

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      sm90::mbar_init(full + 8 * s, 1);   // the producer's expect_tx arrival (+ the bytes)
      sm90::mbar_init(empty + 8 * s, 8);  // one arrival per consumer warp
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();
  // grouped: the tile list is the previous kernel's output (a dependent launch of it, or a no-op)
  if constexpr (GROUPED) grid_dependency_wait();

  if (warpgroup == 0) {
    // 56 / 224 registers (128 x 56 + 256 x 224 <= 64K): the producer's address arithmetic spills
    // at 40, the consumers of MT = 256 (128 accumulators + 2 A buffers) fit in 224
    sm90::setmaxnreg_dec<Tile::kProducerRegs>();
    if (threadIdx.x != 0) {  // one thread issues every copy
      if (threadIdx.x / 32 == 1 && sched.inline_reduce) signal_first_piece(sched, p.tickets);
      if (k_split_on()) ws_k_split_wait();
      return;
    }
    // Per stage one TMA load per operand and chunk (a bulk copy per weight tile and per pair group
    // made the single issuing thread the bottleneck): X [MT][64] swizzled per chunk, the stage's
    // chunks of the CTA's 8 weight row tiles (3-D box, zero past the last row tile and chunk) and
    // the pairs of the stage's groups for the 128 rows (2-D box over the group-major copy).
    sm90::tma_prefetch_desc(&tm_x);
    if constexpr (!GROUPED) {  // grouped: the experts' descriptors, not these
      sm90::tma_prefetch_desc(&tm_w);
      sm90::tma_prefetch_desc(&tm_p);
    }
    const uint32_t wbytes = uint32_t(Tile::kWStage);
    const uint32_t xbytes = uint32_t(Tile::kXStage);
    const uint32_t pb = pbytes + sbytes;
    // the item's weight and pair descriptors: the launch's, or its expert's (grouped)
    auto weight_map = [&](const WsItem& it) {
      return GROUPED ? g.maps + it.expert * g.maps_per_expert + g.w_map : &tm_w;
    };
    auto pair_map = [&](const WsItem& it) {
      return GROUPED ? g.maps + it.expert * g.maps_per_expert + g.p_map : &tm_p;
    };
    auto load_weights = [&](uint32_t stage, uint32_t fb, int c, const WsItem& it) {
      sm90::tma_load_3d(w_tiles + stage * Tile::kWStage, weight_map(it), fb, 0, c * CPS, it.nb * kWsRowTiles);
      sm90::tma_load_2d(p_tiles + stage * p_stage, pair_map(it), fb, it.nb * 128, (c * CPS * kChunkK) >> gs);
    };
    auto load_x = [&](uint32_t stage, uint32_t fb, int c, const WsItem& it) {
      if constexpr (A8) {  // the stage's 128 K of e4m3 codes, then its block's factors of the tokens
        sm90::tma_load_2d(x_tiles + stage * Tile::kXStage, &tm_x, fb, c * CPS * kChunkK, it.row0);
        // from the even token at or before row0: a box starts on a 16-byte boundary of its row
        // (an odd start made the grouped kernel's loads fault: a tile's first row is any row)
        sm90::tma_load_2d(p_tiles + stage * p_stage + s_off, &tm_s, fb, it.row0 & ~1, c);
        return;
      }
      if (!GROUPED && p.conv_on) {  // implicit-GEMM convolution: each chunk is one tap's channels
        const Im2colConv& cv = p.conv;
        const int wo = it.row0 % cv.Wo, t = it.row0 / cv.Wo;
        const int ho = t % cv.Ho, img = t / cv.Ho;
        const int w0 = wo * cv.stride_w - cv.pad_w, h0 = ho * cv.stride_h - cv.pad_h;
#pragma unroll
        for (int h = 0; h < CPS; ++h) {
          const int k0 = (c * CPS + h) * kChunkK, tap = k0 / cv.Ck, ci = k0 - tap * cv.Ck;
          const int r = tap / cv.Kw, s = tap - r * cv.Kw;
          sm90::tma_load_im2col_4d(x_tiles + stage * Tile::kXStage + h * Tile::kXBytes, &tm_x, fb, ci, w0, h0, img,
                                   uint16_t(s * cv.dil_w), uint16_t(r * cv.dil_h));
        }
        return;
      }
#pragma unroll
      for (int h = 0; h < CPS; ++h)
          // a shard's leading x_shift columns start left of X: TMA zero-fills them (rows past X
          // too; a grouped tile's rows past its expert's are the next expert's, never stored)
          sm90::tma_load_2d(x_tiles + stage * Tile::kXStage + h * Tile::kXBytes, &tm_x, fb,
                            (c * CPS + h) * kChunkK - p.x_shift, it.row0);
    };
    // The weights and pairs of the first sched.early_stages stages (the plan's choice,
    // wo_plan.cpp) are a prepared weight no kernel of the stream writes: they are in flight before
    // the wait for the previous grid (programmatic dependent launch; the wait is a no-op without
    // it), the activations of those stages follow the wait. They queue ahead of the first
    // activation tile, so the consumers start only once they have landed.
    // The CTA's cursor, built once before anything waits: built again after the wait, its 64-bit
    // divisions sat between the previous grid's end and this grid's first activation load (H100,
    // same-process A/B, W4 g128 f16, M = 16 ... 128: 2-3.5% faster on the two smallest layers,
    // e.g. 4096x4096 M = 16 10.2 -> 9.9 us, 1-2% on the medium ones, ~0.5% on the large ones;
    // docs/decisions/wo-wgmma-stream-k-reduction.md).
    const StreamKCursor cursor(sched, int(blockIdx.x));
    const int early_cap = sched.early_stages < 0 ? S : min(sched.early_stages, S);
    int early = 0;
    if (early_cap > 0)
      ws_for_each_item<GROUPED, MT>(sched, cursor, g, p.M, [&](const WsItem& it) {
        for (int c = it.w.c0; c < it.w.c1 && early < early_cap; ++c, ++early) {
          sm90::mbar_arrive_expect_tx(full + 8 * early, xbytes + wbytes + pb);
          load_weights(early, full + 8 * early, c, it);
        }
      });
    grid_dependency_wait();
    sm90::RingPos ring(S);
    int issued = 0;
    ws_for_each_item<GROUPED, MT>(sched, cursor, g, p.M, [&](const WsItem& it) {
      for (int c = it.w.c0; c < it.w.c1; ++c, ++issued) {
        const uint32_t fb = full + 8 * ring.stage;
        if (issued >= early) {
          sm90::mbar_wait(empty + 8 * ring.stage, ring.phase ^ 1);
          sm90::mbar_arrive_expect_tx(fb, xbytes + wbytes + pb);
          load_weights(ring.stage, fb, c, it);
        }
        load_x(ring.stage, fb, c, it);
        ring.advance();
      }
    });
    if (k_split_on()) ws_k_split_wait();
  } else {
    sm90::setmaxnreg_inc<Tile::kConsumerRegs>();
    const int warp = (threadIdx.x / 32) & 3;
    const int tile_row = (warpgroup - 1) * 4 + warp;  // this warp's 16-row tile in the CTA
    const int r_lo = lane >> 2;                       // rows r_lo and r_lo + 8 of the tile
    // this lane's pairs (rows r_lo, r_lo + 8; group-major) and codes in stage 0
    const uint32_t p_row = p_tiles + uint32_t(tile_row * kTileRows + r_lo) * psz;
    const uint32_t w_lane = w_tiles + uint32_t(tile_row * CPS * kTileBytes + lane * (kTileBytes / 32));
    const uint32_t x_desc0 = sm90::desc_lo_kmajor_sw128(x_tiles);
    const uint32_t pair_group = uint32_t(kWsRowTiles * kTileRows) * psz;  // bytes per pair group

    float acc[kStageBufs][kSets][kAcc];  // fold: per-stage sums; otherwise the tile's sums
    float accm[kAcc];                    // fold: the tile's sums (unused otherwise)
    uint32_t a[NBUF][kSteps][4];  // [buffer][k16 step][register]
    sm90::FoldRow fold_rows[NBUF][2];    // fold: rows r, r + 8 of the stage in A buffer b

    // This lane's code words of chunk h of stage s (16 bytes of int4, 32 of int8 / e4m3).
    auto load_codes = [&](int s, int h, uint32_t (&w)[BITS == 4 ? 4 : 8]) {
      const uint32_t wa = w_lane + uint32_t(s * Tile::kWStage + h * kTileBytes);
      const uint4 lo = sm90::lds128(wa);
      w[0] = lo.x; w[1] = lo.y; w[2] = lo.z; w[3] = lo.w;
      if constexpr (BITS == 8) {
        const uint4 hi = sm90::lds128(wa + 16);
        w[4] = hi.x; w[5] = hi.y; w[6] = hi.z; w[7] = hi.w;
      }
    };
    // Dequantizes stage s into dst (reads the stage's codes and pairs from shared memory).
    auto dequant = [&](int s, uint32_t (&dst)[kSteps][4], sm90::FoldRow (&fr)[2]) {
      if constexpr (FOLD) {  // one group for the whole stage
        const uint32_t pp = p_row + uint32_t(s) * p_stage;
        fr[0] = sm90::fold_row<T, CODES>(sm90::read_pair_raw(pp, p.pair_f32), false);
        fr[1] = sm90::fold_row<T, CODES>(sm90::read_pair_raw(pp + 8 * psz, p.pair_f32), true);
#pragma unroll
        for (int h = 0; h < CPS; ++h) {
          uint32_t w[BITS == 4 ? 4 : 8];
          load_codes(s, h, w);
          if constexpr (A8) {
#pragma unroll
            for (int j = 0; j < 2; ++j) sm90::u4_bytes_k32(w, j, dst[2 * h + j]);
          } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) sm90::fold_codes_k16<T, CODES>(w, j, fr[0], fr[1], dst[4 * h + j]);
          }
        }
      } else {
        const uint32_t pp = p_row + uint32_t(s) * p_stage;
        if (gs >= ws_stage_shift(CPS)) {  // one group for the whole stage: its pairs read once
          const sm90::RowPair p0 = sm90::read_pair<PP>(pp, p.pair_f32);
          const sm90::RowPair p8 = sm90::read_pair<PP>(pp + 8 * psz, p.pair_f32);
#pragma unroll
          for (int h = 0; h < CPS; ++h) {
            uint32_t w[BITS == 4 ? 4 : 8];
            load_codes(s, h, w);
#pragma unroll
            for (int j = 0; j < 4; ++j) sm90::dequant_k16<T, CODES, PP>(w, j, p0, p8, dst[4 * h + j]);
          }
        } else {
#pragma unroll
          for (int h = 0; h < CPS; ++h) {
            uint32_t w[BITS == 4 ? 4 : 8];
            load_codes(s, h, w);
            if (gs >= 6) {  // one group for the whole chunk
              const uint32_t q = uint32_t((h * kChunkK) >> gs) * pair_group;
              const sm90::RowPair p0 = sm90::read_pair<PP>(pp + q, p.pair_f32);
              const sm90::RowPair p8 = sm90::read_pair<PP>(pp + q + 8 * psz, p.pair_f32);
#pragma unroll
              for (int j = 0; j < 4; ++j) sm90::dequant_k16<T, CODES, PP>(w, j, p0, p8, dst[4 * h + j]);
            } else {
#pragma unroll
              for (int j = 0; j < 4; ++j) {
                const uint32_t q = uint32_t((h * kChunkK + j * 16) >> gs) * pair_group;
                const sm90::RowPair p0 = sm90::read_pair<PP>(pp + q, p.pair_f32);
                const sm90::RowPair p8 = sm90::read_pair<PP>(pp + q + 8 * psz, p.pair_f32);
                sm90::dequant_k16<T, CODES, PP>(w, j, p0, p8, dst[4 * h + j]);
              }
            }
          }
        }
      }
    };
    auto fence_acc = [&]() {
#pragma unroll
      for (int b = 0; b < kStageBufs; ++b)
#pragma unroll
        for (int k = 0; k < kSets; ++k)
#pragma unroll
          for (int i = 0; i < kAcc; ++i) sm90::reg_fence(acc[b][k][i]);
    };
    // fold mode: the stage's first wgmma on each accumulator set overwrites it (scale-d 0).
    // nt: the tokens the MMAs compute (kRagged: 64, 128 at MT = 192, or MT; else MT).
    auto mma_stage = [&](int nt, int s, const uint32_t (&src)[kSteps][4], float (&d_acc)[kSets][kAcc]) {
      // chunk h's X box is kXBytes after chunk h - 1's; a k16 step is 32 bytes along its rows
      const uint32_t d = x_desc0 + uint32_t(s * Tile::kXStage) / 16;
      // a k16 (W4A8: k32) step is 32 bytes along the swizzled rows; W4A8's stage is one box
      auto step_bytes = [](int j) {
        return A8 ? uint32_t(j * 32) : uint32_t((j / 4) * Tile::kXBytes + (j % 4) * 32);
      };
      fence_acc();
      if constexpr (kRagged) {
        if (nt <= 64)
          ws_stage_mmas<T, 64, kSteps, kSets, kAcc, FOLD>(d, src, d_acc, step_bytes);
        else if (MT == 192 && nt <= 128)
          ws_stage_mmas<T, (MT == 192 ? 128 : MT), kSteps, kSets, kAcc, FOLD>(d, src, d_acc, step_bytes);
        else
          ws_stage_mmas<T, MT, kSteps, kSets, kAcc, FOLD>(d, src, d_acc, step_bytes);
      } else {
        ws_stage_mmas<T, MT, kSteps, kSets, kAcc, FOLD>(d, src, d_acc, step_bytes);
      }
      sm90::wgmma_commit();
      fence_acc();
    };
    // fold mode (ws_fold_stage): a completed stage's sums into the tile's sums. W4A8: the stage's
    // tokens' factors are read from its slot before it is released (odd: the slot starts one token
    // before the tile's first, whose first row is odd); with p.a8_zero_in_factors (a zero point every
    // group shares, in the factors) the fold takes two FP32 instructions per sum instead of three.
    // The branch is warp-uniform and outside the fold's loop.
    auto fold_stage = [&](const float (&d_acc)[kSets][kAcc], const sm90::FoldRow (&fr)[2], int stage, int odd) {
      if constexpr (FOLD) {
        const uint32_t sa = p_tiles + uint32_t(stage) * p_stage + s_off + uint32_t(2 * (lane & 3) + odd) * 8u;
        if (A8 && p.a8_zero_in_factors) ws_fold_stage<A8, true, MT>(accm, d_acc, fr, sa);
        else ws_fold_stage<A8, false, MT>(accm, d_acc, fr, sa);
      }
    };

    // A piece of a tile cut between CTAs: its sums go to this CTA's partial slot (0: the first
    // piece of its stream-K range, 1: the last) for stream_k_fixup_kernel.
    auto store_partial = [&](const StreamKWork& w, const float (&r)[kAcc]) {
      float4* dst = stream_k_slot<MT>(p.partial, 2 * blockIdx.x + (w.first ? 0 : 1), warpgroup - 1,
                                      threadIdx.x & 127);
#pragma unroll
      for (int q = 0; q < MT / 8; ++q)
        __stcg(dst + q * 128, make_float4(r[4 * q], r[4 * q + 1], r[4 * q + 2], r[4 * q + 3]));
    };

    uint32_t* const flags = reinterpret_cast<uint32_t*>(p.tickets);
    // The only tile this CTA can own cut (inline reduction) is the one its stream-K range ends in
    // (the owner's piece is the last of its range). Its last contributor is resolved here, while
    // the first stage is still in flight: sk_owner and slot_of are 64-bit divisions, which at the
    // owner's end of range sat on the launch's critical path (one per contributor before; H100,
    // W4 g128 f16 M = 16: 4096x4096 11.3 -> 10.1 us, 14336x4096 20.3 -> 19.4, 4096x6144 12.8 ->
    // 12.1; docs/decisions/wo-wgmma-stream-k-reduction.md).
    const int last_contributor = sched.inline_reduce && int(blockIdx.x) < sched.sk_ctas && sched.sk_tiles > 0
                                     ? StreamKCursor::last_contributor(sched, int(blockIdx.x))
                                     : -1;
    // The owner's piece of a cut tile (its first, the last of this CTA's range) is still in
    // registers: wait until this warp's flag counts every other contributor (usually long done),
    // add their slots in CTA order (the fixup kernel's order: the same bits), reset the flag.
    // Every other contributor's piece starts its range (slot 2 b: StreamKCursor::last_contributor).
    auto add_other_pieces = [&](const StreamKWork& w, float (&r)[kAcc]) {
      const int t = w.tile - sched.dp_tiles;
      const int b_hi = last_contributor;
      uint32_t* flag = flags + t * kStreamKFlagsPerTile + tile_row;
      const uint32_t others = uint32_t(b_hi - int(blockIdx.x));
      while (sm90::ld_acquire_gpu(flag) < others) {
      }
      // unrolled where the registers allow: several contributors' loads in flight at once (the
      // sums stay in CTA order)
#pragma unroll(MT <= 64 ? 4 : 1)
      for (int b = int(blockIdx.x) + 1; b <= b_hi; ++b) {
        const float4* src = stream_k_slot<MT>(p.partial, 2 * b, warpgroup - 1, threadIdx.x & 127);
#pragma unroll
        for (int q = 0; q < MT / 8; ++q) {
          const float4 u = __ldcg(src + q * 128);
          r[4 * q] += u.x; r[4 * q + 1] += u.y; r[4 * q + 2] += u.z; r[4 * q + 3] += u.w;
        }
      }
      __syncwarp();  // every lane has seen the count before it is reset for the next launch
      if (lane == 0) *flag = 0u;
    };

    // The TMA-store epilogue (sched.y_rows > 0: 16-bit output, whole tiles or their owner's sum).
    // The direct one stores every accumulator as its own 2-byte value: 8 rows' values, 16 bytes,
    // of 4 token rows per warp store, 128 stores per thread at MT = 256, and all CTAs reach it at
    // once with the tensor cores idle. Here the warpgroup writes its 64 rows x MT tokens, transposed
    // by stmatrix (a token row is 64 rows' outputs, 128 bytes), into its staging tile (MT / 16
    // stores per thread), y_rows tokens at a time, and one thread hands each round to a TMA store,
    // which clips it at M and N and drains while the next tile's MMAs run. The staging tile is
    // rewritten once that thread's last store has read it (bulk_wait_group_read).
    // Grouped, a round's box may cross the expert's last row into the next expert's rows (another
    // CTA's outputs): a round wholly inside the expert's rows is TMA-stored, a partly filled one
    // is copied out by the warpgroup (16-byte rows of 8 outputs from the staging tile, its rows
    // only), and one wholly past them is skipped.
    const uint32_t y_tile = y_tiles + uint32_t(warpgroup - 1) * y_bytes;
    const bool y_issuer = (threadIdx.x & 127) == 0;
    const int y_barrier = kWsEpilogueBarrier0 + warpgroup - 1;
    // row0: the tile's first output row; rows: its rows (past M, or the expert's last, not stored)
    auto store_tile_tma = [&](int row0, int rows, int nb, int n_row0, const void* bias, const float (&r)[kAcc]) {
      float b0 = 0.f, b8 = 0.f;  // bias of rows n_row0, n_row0 + 8
      if (bias) {
        if (n_row0 < p.N) b0 = load_io(bias, n_row0, p.bias_type);
        if (n_row0 + 8 < p.N) b8 = load_io(bias, n_row0 + 8, p.bias_type);
      }
      auto claim = [&]() {
        if (y_issuer) sm90::bulk_wait_group_read<0>();  // the last store has read y_tile
        sm90::named_barrier_sync(y_barrier, 128);
      };
      const int y_rows = sched.y_rows;
      const int col0 = nb * 128 + (warpgroup - 1) * 64;  // the warpgroup's first output column
      auto store = [&](int t0) {  // tokens t0 .. t0 + y_rows - 1 of the tile are staged
        sm90::fence_proxy_async_shared();  // the staging writes, before the TMA engine reads them
        sm90::named_barrier_sync(y_barrier, 128);
        const int live = rows - t0;  // <= 0: a round wholly past the tile's rows stores nothing
        if (!GROUPED || live >= y_rows) {
          if (y_issuer && live > 0) {
            sm90::tma_store_2d(&tm_y, y_tile, col0, row0 + t0);
            sm90::bulk_commit_group();
          }
        } else {
          // 16-byte chunk c of staged token u sits at chunk c ^ (u & 7) of its 128-byte row (the
          // swizzle); a chunk is 8 consecutive columns, inside N or wholly past it (the plan stages
          // only rows TMA can store: N and the row pitch multiples of 8, Y 16-byte aligned)
          for (int i = threadIdx.x & 127; i < live * 8; i += 128) {
            const int u = i >> 3, c = i & 7, n = col0 + 8 * c;
            if (n < p.N)
              *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.y) + int64_t(row0 + t0 + u) * p.ldy + n) =
                  sm90::lds128(y_tile + uint32_t(u) * 128u + uint32_t((c ^ (u & 7)) << 4));
          }
        }
      };
      auto flush = [&](int t) {  // the tokens before t of the tile are staged
        store(t - y_rows);
        claim();
      };
      claim();
      // lane 8i + j addresses row j (token 8 (q + i / 2) + j) of matrix i of each stmatrix.x4:
      // matrix i holds rows 8 (i & 1) .. + 7 of this warp's 16, i.e. 16-byte chunk 2 warp + (i & 1)
      // of the token's 128-byte row, at chunk ^ j in the swizzle
      const int i = lane >> 3, j = lane & 7;
      const uint32_t row_addr = y_tile + uint32_t(8 * (i >> 1) + j) * 128u + uint32_t(((2 * warp + (i & 1)) ^ j) << 4);
      if (p.y_type == IoType::F16)
        ws_stage_outputs<half, MT>(row_addr, r, b0, b8, p.clamp_lo, p.clamp_hi, y_rows, flush);
      else
        ws_stage_outputs<__nv_bfloat16, MT>(row_addr, r, b0, b8, p.clamp_lo, p.clamp_hi, y_rows, flush);
      store(MT - y_rows);
    };

    sm90::RingPos ring(S);
    ws_for_each_item<GROUPED, MT>(sched, StreamKCursor(sched, int(blockIdx.x)), g, p.M, [&](const WsItem& it) {
      const StreamKWork& w = it.w;
      const int mb = it.mb, nb = it.nb;
      const int n_stages = w.c1 - w.c0;
      if constexpr (FOLD) {
#pragma unroll
        for (int i = 0; i < kAcc; ++i) accm[i] = 0.f;
      } else {
#pragma unroll
        for (int k = 0; k < kSets; ++k)
#pragma unroll
          for (int i = 0; i < kAcc; ++i) acc[0][k][i] = 0.f;
      }
      int prev = -1;  // stage whose MMAs may still be running
      if constexpr (FOLD && NBUF == 2) {
        // Software-pipelined: stage t is dequantized while stage t - 1's MMAs run, then
        // wgmma.wait_group 0, the fold of stage t - 1 and stage t's MMAs. The fold reads
        // accumulators only while no wgmma is in flight (otherwise ptxas serializes every wgmma,
        // C7514).
        for (int i = 0; i < n_stages; i += 2) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {  // by two: buffer indices are compile-time constants
            if (i + h < n_stages) {
              sm90::mbar_wait(full + 8 * ring.stage, ring.phase);
              __syncwarp();  // wgmma needs the warp converged after the spin loop
              dequant(ring.stage, a[h], fold_rows[h]);
              sm90::wgmma_wait<0>();
              if (prev >= 0) {
                fold_stage(acc[(1 - h) & kSb], fold_rows[1 - h], prev, it.row0 & 1);
                __syncwarp();  // every lane's reads of the stage before lane 0 releases it
                if (lane == 0) sm90::mbar_arrive(empty + 8 * prev);
              }
              mma_stage(MT, ring.stage, a[h], acc[h & kSb]);
              prev = ring.stage;
              ring.advance();
            }
          }
        }
        sm90::wgmma_wait<0>();
        fence_acc();
        if ((n_stages - 1) % 2 == 0) fold_stage(acc[0], fold_rows[0], prev, it.row0 & 1);
        else fold_stage(acc[(NBUF - 1) & kSb], fold_rows[NBUF - 1], prev, it.row0 & 1);
      } else {
        auto k_loop = [&](int nt) {
          for (int i = 0; i < n_stages; i += 2) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // by two: the A buffer index is a compile-time constant
              if (i + h < n_stages) {
                sm90::mbar_wait(full + 8 * ring.stage, ring.phase);
                __syncwarp();  // wgmma needs the warp converged after the spin loop
                dequant(ring.stage, a[h % NBUF], fold_rows[h % NBUF]);
                mma_stage(nt, ring.stage, a[h % NBUF], acc[0]);
                // two buffers: the previous stage's MMAs are done, release it; one buffer: this
                // stage's MMAs are done (its registers are rewritten next, fold mode folds them)
                sm90::wgmma_wait<NBUF - 1>();
                if constexpr (FOLD) fold_stage(acc[0], fold_rows[0], ring.stage, it.row0 & 1);
                // every lane's shared-memory reads of that stage happen before lane 0's arrival
                // (racecheck flagged the producer's refill against the other lanes' reads without it)
                __syncwarp();
                if (NBUF == 1) prev = ring.stage;
                if (prev >= 0 && lane == 0) sm90::mbar_arrive(empty + 8 * prev);
                prev = NBUF == 1 ? -1 : ring.stage;
                ring.advance();
              }
            }
          }
          sm90::wgmma_wait<0>();
        };
        // A ragged tile (an expert's last): the MMAs cover its rows rounded up to 64 tokens, not
        // MT. The tensor-core time of a tile is proportional to the tokens its MMAs
        // cover, and a grouped GEMM's tiles are often partly empty (an expert of 129 rows in
        // 192-token tiles). The choice is uniform over the warpgroup and made once per tile; each
        // arm is its own loop of straight-line wgmmas that waits for its last MMAs before the arms
        // meet (where the compiler may move the accumulators between registers).
        const int live = it.rows < MT ? it.rows : MT;
        if (!kRagged || !sched.ragged || live > kRaggedMax) k_loop(MT);
        else if (kRaggedMax == 64 || live <= 64) k_loop(64);
        else k_loop(128);
        fence_acc();
      }
      float (&sums)[kAcc] = *(FOLD ? &accm : &acc[0][0]);
      if constexpr (!FOLD) {
#pragma unroll
        for (int k = 1; k < kSets; ++k)
#pragma unroll
          for (int i = 0; i < kAcc; ++i) acc[0][0][i] += acc[0][k][i];
      }
      __syncwarp();
      if (prev >= 0 && lane == 0) sm90::mbar_arrive(empty + 8 * prev);

      if (w.split) {  // a K split's pieces are cut tiles too
        if (k_split_on()) {
          // the cluster's pieces, summed by rank 0 (the others' rings are free: one piece each)
          if (!ws_k_split_sum<MT>(sums, x_tiles, sched.k_split)) return;
        } else if (w.c0 != 0 || !sched.inline_reduce) {
          store_partial(w, sums);
          // a non-owner piece (inline reduction): signal_first_piece publishes it
          if (sched.inline_reduce) sm90::named_barrier_arrive(kPieceBarrier, kPieceBarrierThreads);
          return;
        } else {
          add_other_pieces(w, sums);  // this CTA owns the tile: it writes the output
        }
      }

      // Accumulator 4q + e: weight row r_lo (+8 for e >= 2), token 8q + 2 (lane % 4) + (e & 1).
      const int n_row0 = nb * 128 + tile_row * kTileRows + r_lo;
      // the expert's bias row (grouped), else the layer's
      const void* bias = p.bias;
      if (GROUPED && bias)
        bias = static_cast<const char*>(bias) + it.expert * g.bias_stride * (p.bias_type == IoType::F32 ? 4 : 2);
      if (sched.y_rows > 0) {
        if constexpr (GROUPED) store_tile_tma(it.row0, it.rows < MT ? it.rows : MT, nb, n_row0, bias, sums);
        else store_tile_tma(mb * MT, p.M - mb * MT, nb, n_row0, bias, sums);
        return;
      }
      float b[2] = {0.f, 0.f};  // bias of rows n_row0, n_row0 + 8
#pragma unroll
      for (int h = 0; h < 2; ++h)
        if (bias && n_row0 + 8 * h < p.N) b[h] = load_io(bias, n_row0 + 8 * h, p.bias_type);
      const int t_base = 2 * (lane & 3);  // tokens of the tile from it.row0
#pragma unroll
      for (int q = 0; q < MT / 8; ++q) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int n = n_row0 + ((e >> 1) << 3);
          const int t = t_base + 8 * q + (e & 1);
          if (n < p.N && t < it.rows)
            store_io(p.y, int64_t(it.row0 + t) * p.ldy + n, p.y_type,
                     fminf(fmaxf(sums[4 * q + e] + b[e >> 1], p.clamp_lo), p.clamp_hi));
        }
      }
    });
    if (sched.y_rows > 0 && y_issuer) sm90::bulk_wait_group<0>();  // the last store, before the CTA's exit
  }
#else
  __trap();  // built for a device without sm_90a wgmma/TMA: the host never launches this
#endif
}

}  // namespace ws_detail

}  // namespace mixq::cuda
