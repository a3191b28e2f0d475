// Hopper weight-only GEMM, warp-specialized (v2 of sm90_wo_wgmma): Y[M][N] = X[M][K] . W[N][K]^T
// with W the packed INT4/INT8 tiles of wo_layout.hpp, dequantized in registers into the A operand
// of wgmma.mma_async (register-A form); X is the B operand in shared memory.
//
// CTA = 3 warpgroups (384 threads), persistent over output tiles of 128 weight rows x MT tokens,
// 1 CTA per SM (2 at token tiles of 16 and 32 for large int4 weights: ws_shape_of), hybrid
// data-parallel + stream-K (wo_stream_k.hpp):
//   warpgroup 0 (producer) gives its registers away; one thread fills a STAGES-deep ring of 64-K
//     stages with three TMA loads each, completing on the stage's `full` mbarrier (expect_tx): the
//     X tile (MT x 64, 128-byte swizzle, zero-filled past M and K), the stage's chunk of the CTA's
//     8 packed 16-row weight tiles (3-D box, zero past the last row tile), and the (s, o') pairs
//     of the stage's groups for the 128 rows (2-D box over a group-major copy of the pairs).
//   warpgroups 1, 2 (consumers) own 64 weight rows each: per stage they wait `full`, dequantize the
//     stage into one of two A register buffers, issue 4 wgmma m64nMTk16, and release the previous
//     stage (`empty`) once wgmma.wait_group 1 says its MMAs are done, so the dequantization of stage
//     i overlaps the tensor-core work of stage i - 1 and no thread of the CTA ever waits on a
//     CTA-wide barrier.
// The consumers do no address arithmetic for copies and no cp.async bookkeeping (the v1 kernel's
// exposed per-chunk overhead, docs/cuda-weight-only.md). The pieces of a tile cut between CTAs go
// to per-CTA partial slots, summed in CTA order (deterministic) either by the CTA that owns the
// tile, at the end of its range, behind per-tile completion flags (the inline reduction: small
// token tiles, and tiles cut into few pieces: ws_inline_reduce), or by stream_k_fixup_kernel
// after the grid.
// Where the plan asks for it (wo_plan.cpp), both kernels are programmatic dependent launches: the
// producer waits for the previous grid (griddepcontrol.wait) after the weight loads of its first
// WoStreamParams::early_stages stages and before any activation load; the fixup waits for the
// kernel. Without it the waits are no-ops. The inline reduction's waits are safe because the
// persistent grid is resident at once (one or two CTAs per SM, sized from the SM count).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "cuda/check.hpp"
#include "cuda/kernel_image.hpp"
#include "cuda/kernels/dequant_codes.cuh"
#include "cuda/kernels/grid_dependency.cuh"
#include "cuda/kernels/sm80_wo_stream.cuh"
#include "cuda/kernels/sm90_sync.cuh"
#include "cuda/kernels/sm90_wgmma.cuh"
#include "cuda/kernels/sm90_wgmma_dequant.cuh"
#include "cuda/kernels/sm90_wo_ws_tile.cuh"
#include "cuda/kernels/sm90_wo_stream_k_reduce.cuh"
#include "cuda/sm90_tensor_map.hpp"
#include "cuda/wo_launch_config.hpp"
#include "cuda/wo_stream_k.hpp"
#include "cuda/wo_wgmma.hpp"

namespace mixq::cuda {


namespace {
using namespace ws_detail;

#if defined(MIXQ_WS_DIAG_BUILD)
// Diagnostic builds only: a log of every CTA's start, first landed stage and end (%globaltimer, ns)
// and SM, in the order CTAs finish (a CTA of the next launch finishes after every CTA of this one:
// it waits for this grid before its first activation load), read by ws_diag_dump_cta_log.
constexpr int kWsCtaLogMax = 1 << 16;
__device__ unsigned long long g_ws_cta_log[kWsCtaLogMax][4];
__device__ unsigned g_ws_cta_done;
__device__ __forceinline__ unsigned long long ws_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned ws_smid() {
  unsigned id;
  asm volatile("mov.u32 %0, %smid;" : "=r"(id));
  return id;
}
#endif

// Calls f(work, m block, n block) for every piece of work of this CTA (cur: a fresh
// StreamKCursor of it, built once: its construction divides), in the order the producer and the
// consumers both walk (their rings stay in step).
template <class F>
__device__ __forceinline__ void ws_for_each_work(const StreamKSchedule& sched, StreamKCursor cur, F&& f) {
  StreamKWork w;
  while (cur.next(sched, w)) {
    int mb, nb;
    stream_k_tile_coords(sched, w.tile, mb, nb);
    f(w, mb, nb);
  }
}

// FOLD: scale after the MMA (sm90_wgmma_dequant.cuh): the stage (one group) accumulates u - zc
// (or the e4m3 value) in its own registers, folded into the tile's sums with the row scale.
template <typename T, int MT, int CODES, sm90::PairPath PP, WsShape SHAPE, bool FOLD = false>
__global__ void __launch_bounds__(kWsThreads, WsConfig<MT, SHAPE>::kCtas)
    wo_wgmma_ws_kernel(const __grid_constant__ CUtensorMap tm_x, const __grid_constant__ CUtensorMap tm_w,
                       const __grid_constant__ CUtensorMap tm_p, const __grid_constant__ CUtensorMap tm_y,
                       const WoStreamParams p, const StreamKSchedule sched) {
#if defined(MIXQ_SM90A)
  using Tile = WsTile<MT, CODES, SHAPE>;
  constexpr int BITS = Tile::BITS;
  constexpr int CPS = Tile::kCps;
  constexpr int NBUF = Tile::kBufs;
  constexpr int kSteps = 4 * CPS;  // k16 steps per stage
  constexpr int kAcc = MT / 2;
  // Independent accumulator sets for consecutive k16 steps: with small token tiles a wgmma is
  // short and a chain of dependent wgmmas on one accumulator is latency-bound (measured: ~480
  // cycles per 64-K stage at MT = 16 with nothing loaded). Summed in a fixed order at the end.
  // (fold mode keeps a second, per-stage set of accumulators per A buffer: fewer sets)
  constexpr int kSets = FOLD ? (MT <= 32 ? 2 : 1) : MT <= 32 ? (NBUF * CPS == 4 ? 4 : 2) : MT <= 128 ? 2 : 1;
  constexpr int kStageBufs = FOLD ? NBUF : 1;  // stage accumulator buffers
  constexpr int kTileBytes = Tile::kTileBytes;

  extern __shared__ uint8_t smem_raw[];
  // Every shared address as a 32-bit offset computed once (a generic pointer would be converted
  // again at every stage). 1024-byte alignment: the 128-byte swizzle phase is a function of
  // address bits 7..9 (the shared window's base is aligned far beyond that).
  const int gs = p.group_shift;
  const uint32_t psz = ws_pair_bytes<PP>(p);
  const uint32_t pbytes = ws_stage_pair_bytes<PP>(p, CPS);
  const uint32_t p_stage = (pbytes + 127u) & ~127u;
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

  if (warpgroup == 0) {
    // 56 / 224 registers (128 x 56 + 256 x 224 <= 64K): the producer's address arithmetic spills
    // at 40, the consumers of MT = 256 (128 accumulators + 2 A buffers) fit in 224
    sm90::setmaxnreg_dec<Tile::kProducerRegs>();
    if (threadIdx.x != 0) {  // one thread issues every copy
      if (threadIdx.x / 32 == 1 && sched.inline_reduce) signal_first_piece(sched, p.tickets);
      return;
    }
    // Per stage one TMA load per operand and chunk (a bulk copy per weight tile and per pair group
    // made the single issuing thread the bottleneck): X [MT][64] swizzled per chunk, the stage's
    // chunks of the CTA's 8 weight row tiles (3-D box, zero past the last row tile and chunk) and
    // the pairs of the stage's groups for the 128 rows (2-D box over the group-major copy).
    sm90::tma_prefetch_desc(&tm_x);
    sm90::tma_prefetch_desc(&tm_w);
    sm90::tma_prefetch_desc(&tm_p);
    const uint32_t wbytes = (sched.diag & 2) ? 0u : uint32_t(Tile::kWStage);
    const uint32_t xbytes = (sched.diag & 4) ? 0u : uint32_t(Tile::kXStage);
    const uint32_t pb = (sched.diag & 1) ? 0u : pbytes;
    auto load_weights = [&](uint32_t stage, uint32_t fb, int c, int nb) {
      if (wbytes) sm90::tma_load_3d(w_tiles + stage * Tile::kWStage, &tm_w, fb, 0, c * CPS, nb * kWsRowTiles);
      if (pb) sm90::tma_load_2d(p_tiles + stage * p_stage, &tm_p, fb, nb * 128, (c * CPS * kChunkK) >> gs);
    };
    auto load_x = [&](uint32_t stage, uint32_t fb, int c, int mb) {
      if (xbytes)
#pragma unroll
        for (int h = 0; h < CPS; ++h)
          sm90::tma_load_2d(x_tiles + stage * Tile::kXStage + h * Tile::kXBytes, &tm_x, fb,
                            (c * CPS + h) * kChunkK, mb * MT);
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
    // bench/results/session21/call9).
    const StreamKCursor cursor(sched, int(blockIdx.x));
    const int early_cap = sched.early_stages < 0 ? S : min(sched.early_stages, S);
    int early = 0;
    if (early_cap > 0)
      ws_for_each_work(sched, cursor, [&](const StreamKWork& w, int, int nb) {
        for (int c = w.c0; c < w.c1 && early < early_cap; ++c, ++early) {
          sm90::mbar_arrive_expect_tx(full + 8 * early, xbytes + wbytes + pb);
          load_weights(early, full + 8 * early, c, nb);
        }
      });
    grid_dependency_wait();
    sm90::RingPos ring(S);
    int issued = 0;
    ws_for_each_work(sched, cursor, [&](const StreamKWork& w, int mb, int nb) {
      for (int c = w.c0; c < w.c1; ++c, ++issued) {
        const uint32_t fb = full + 8 * ring.stage;
        if (issued >= early) {
          sm90::mbar_wait(empty + 8 * ring.stage, ring.phase ^ 1);
          sm90::mbar_arrive_expect_tx(fb, xbytes + wbytes + pb);
          load_weights(ring.stage, fb, c, nb);
        }
        load_x(ring.stage, fb, c, mb);
        ring.advance();
      }
    });
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
#pragma unroll
          for (int j = 0; j < 4; ++j) sm90::fold_codes_k16<T, CODES>(w, j, fr[0], fr[1], dst[4 * h + j]);
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
    // fold mode: the stage's first wgmma on each accumulator set overwrites it (scale-d 0)
    auto mma_stage = [&](int s, const uint32_t (&src)[kSteps][4], float (&d_acc)[kSets][kAcc]) {
      // chunk h's X box is kXBytes after chunk h - 1's; a k16 step is 32 bytes along its rows
      const uint32_t d = x_desc0 + uint32_t(s * Tile::kXStage) / 16;
      fence_acc();
      sm90::wgmma_fence();
#pragma unroll
      for (int j = 0; j < kSteps; ++j)
        sm90::WgmmaRS<T, MT>::mma(d_acc[j % kSets], src[j],
                                  sm90::desc_from_lo_sw128(d + uint32_t((j / 4) * Tile::kXBytes + (j % 4) * 32) / 16),
                                  FOLD && j < kSets ? 0 : 1);
      sm90::wgmma_commit();
      fence_acc();
    };
    // fold mode: a completed stage's sums, times the row scales, into the tile's sums
    // (accumulator 4q + e holds row r_lo for e < 2, r_lo + 8 for e >= 2)
    auto fold_stage = [&](const float (&d_acc)[kSets][kAcc], const sm90::FoldRow (&fr)[2]) {
      if constexpr (FOLD) {
#pragma unroll
        for (int i = 0; i < kAcc; ++i) {
          float t = d_acc[0][i];
#pragma unroll
          for (int k = 1; k < kSets; ++k) t += d_acc[k][i];
          accm[i] = fmaf(t, fr[(i >> 1) & 1].scale, accm[i]);
        }
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
    // 12.1; bench/results/session21/call3 against call2).
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
    const uint32_t y_tile = y_tiles + uint32_t(warpgroup - 1) * y_bytes;
    const bool y_issuer = (threadIdx.x & 127) == 0;
    const int y_barrier = kWsEpilogueBarrier0 + warpgroup - 1;
    auto store_tile_tma = [&](int mb, int nb, int n_row0, const float (&r)[kAcc]) {
      float b0 = 0.f, b8 = 0.f;  // bias of rows n_row0, n_row0 + 8
      if (p.bias) {
        if (n_row0 < p.N) b0 = load_io(p.bias, n_row0, p.bias_type);
        if (n_row0 + 8 < p.N) b8 = load_io(p.bias, n_row0 + 8, p.bias_type);
      }
      auto claim = [&]() {
        if (y_issuer) sm90::bulk_wait_group_read<0>();  // the last store has read y_tile
        sm90::named_barrier_sync(y_barrier, 128);
      };
      auto store = [&](int m0) {  // tokens m0 .. m0 + y_rows - 1 of the output are staged
        sm90::fence_proxy_async_shared();  // the staging writes, before the TMA engine reads them
        sm90::named_barrier_sync(y_barrier, 128);
        if (y_issuer && m0 < p.M) {  // a round wholly past M (the last token tile) stores nothing
          sm90::tma_store_2d(&tm_y, y_tile, nb * 128 + (warpgroup - 1) * 64, m0);
          sm90::bulk_commit_group();
        }
      };
      const int y_rows = sched.y_rows;
      auto flush = [&](int t) {  // the tokens before t of the tile are staged
        store(mb * MT + t - y_rows);
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
      store(mb * MT + MT - y_rows);
    };

#if defined(MIXQ_WS_DIAG_BUILD)
    const unsigned long long diag_t0 = ws_globaltimer();
    unsigned long long diag_t1 = 0;
#endif
    sm90::RingPos ring(S);
    ws_for_each_work(sched, StreamKCursor(sched, int(blockIdx.x)), [&](const StreamKWork& w, int mb, int nb) {
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
#if defined(MIXQ_WS_DIAG_BUILD)
              if (diag_t1 == 0) diag_t1 = ws_globaltimer();
#endif
              __syncwarp();  // wgmma needs the warp converged after the spin loop
              dequant(ring.stage, a[h], fold_rows[h]);
              sm90::wgmma_wait<0>();
              if (prev >= 0) {
                fold_stage(acc[1 - h], fold_rows[1 - h]);
                __syncwarp();  // every lane's reads of the stage before lane 0 releases it
                if (lane == 0) sm90::mbar_arrive(empty + 8 * prev);
              }
              mma_stage(ring.stage, a[h], acc[h]);
              prev = ring.stage;
              ring.advance();
            }
          }
        }
        sm90::wgmma_wait<0>();
        fence_acc();
        if ((n_stages - 1) % 2 == 0) fold_stage(acc[0], fold_rows[0]);
        else fold_stage(acc[NBUF - 1], fold_rows[NBUF - 1]);
      } else {
        for (int i = 0; i < n_stages; i += 2) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {  // by two: the A buffer index is a compile-time constant
            if (i + h < n_stages) {
              sm90::mbar_wait(full + 8 * ring.stage, ring.phase);
#if defined(MIXQ_WS_DIAG_BUILD)
              if (diag_t1 == 0) diag_t1 = ws_globaltimer();
#endif
              __syncwarp();  // wgmma needs the warp converged after the spin loop
              dequant(ring.stage, a[h % NBUF], fold_rows[h % NBUF]);
              mma_stage(ring.stage, a[h % NBUF], acc[0]);
              // two buffers: the previous stage's MMAs are done, release it; one buffer: this
              // stage's MMAs are done (its registers are rewritten next, fold mode folds them)
              sm90::wgmma_wait<NBUF - 1>();
              if constexpr (FOLD) fold_stage(acc[0], fold_rows[0]);
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

      if (w.split) {
        if (w.c0 != 0 || !sched.inline_reduce) {
          store_partial(w, sums);
          // a non-owner piece (inline reduction): signal_first_piece publishes it
          if (sched.inline_reduce) sm90::named_barrier_arrive(kPieceBarrier, kPieceBarrierThreads);
          return;
        }
        add_other_pieces(w, sums);  // this CTA owns the tile: it writes the output
      }

      // Accumulator 4q + e: weight row r_lo (+8 for e >= 2), token 8q + 2 (lane % 4) + (e & 1).
      const int n_row0 = nb * 128 + tile_row * kTileRows + r_lo;
      if (sched.y_rows > 0) {
        store_tile_tma(mb, nb, n_row0, sums);
        return;
      }
      const int m_base = mb * MT + 2 * (lane & 3);
#pragma unroll
      for (int q = 0; q < MT / 8; ++q) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int n = n_row0 + ((e >> 1) << 3);
          const int m = m_base + 8 * q + (e & 1);
          if (n < p.N && m < p.M)
            store_io(p.y, int64_t(m) * p.ldy + n, p.y_type, epilogue(p, n, sums[4 * q + e]));
        }
      }
    });
    if (sched.y_rows > 0 && y_issuer) sm90::bulk_wait_group<0>();  // the last store, before the CTA's exit
#if defined(MIXQ_WS_DIAG_BUILD)
    if (threadIdx.x == 128) {
      const unsigned v = atomicAdd(&g_ws_cta_done, 1u) % kWsCtaLogMax;
      g_ws_cta_log[v][0] = (unsigned long long)blockIdx.x | ((unsigned long long)ws_smid() << 32);
      g_ws_cta_log[v][1] = diag_t0;
      g_ws_cta_log[v][2] = diag_t1;
      g_ws_cta_log[v][3] = ws_globaltimer();
    }
#endif
  }
#else
  __trap();  // built for a device without sm_90a wgmma/TMA: the host never launches this
#endif
}

int sm_count(int device) {
  static int cached[64];
  if (device < 0 || device >= 64) return 132;
  if (cached[device] == 0) {
    int n = 0;
    MIXQ_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    cached[device] = n;
  }
  return cached[device];
}

// MIXQ_WS_FOLD=0 turns the fold (scale after the MMA) off (tuning knob / A-B comparisons).
bool ws_fold_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("MIXQ_WS_FOLD");
    return !(e && e[0] == '0');
  }();
  return on;
}

// The kernel's TMA descriptors: activations, weight tiles, group-major pairs, and the output of
// the TMA-store epilogue (built only where it may run: y_rows > 0, ws_y_rows).
struct WsMaps {
  CUtensorMap x, w, p, y;
  int y_rows = 0;
};

// Tokens per staging round of the TMA-store epilogue, 0 for the direct stores. It runs where it
// can (16-bit outputs TMA can store: tma_stores_16bit_rows) on token tiles of 128 and 256, 128
// tokens a round: H100, same-process A/B against the direct stores on the nine
// layers, W4 g128 f16, the wgmma kernel forced (bench/results/session24/call1): M = 1024 / 4096
// 4-21% faster (4096x4096 M = 4096 248 -> 197 us, M = 1024 55.8 -> 46.8), M = 256 up to 19%
// (4096x28672 111.7 -> 90.8), M = 128 0-5%. A whole 256-token tile a round leaves the ring 4 of its
// 6 stages (3.6% slower on 8192x8192 M = 256); 128 leaves 5. MIXQ_WS_Y_ROWS=0 forces the direct
// stores, =R rounds of R tokens (a power of two from 16 to the token tile) wherever it can run
// (tuning knob, tests; read per call).
int ws_y_rows(const WoStreamParams& p, int mt) {
  if (p.y_type != IoType::F16 && p.y_type != IoType::BF16) return 0;
  if (!tma_stores_16bit_rows(p.y, p.ldy, p.N)) return 0;
  int rows = mt >= 128 ? 128 : 0;
  if (const char* e = std::getenv("MIXQ_WS_Y_ROWS")) {
    const int v = std::atoi(e);
    rows = 0;
    if (v > 0)
      for (rows = 16; rows * 2 <= std::min(v, mt);) rows *= 2;
  }
  return std::min(rows, mt);
}

template <typename T, int MT, int CODES, sm90::PairPath PP, WsShape SHAPE, bool FOLD>
void launch_ws_kernel(const WoStreamParams& p, const WsMaps& tm, const StreamKSchedule& sch_in,
                      cudaStream_t stream) {
  auto kernel = wo_wgmma_ws_kernel<T, MT, CODES, PP, SHAPE, FOLD>;
  const size_t smem = WsTile<MT, CODES, SHAPE>::kSmem;
  // the TMA-store epilogue only where its staging tiles leave a ring of 4 stages (fewer lost up
  // to 20%: WsTile::kMaxStages)
  StreamKSchedule sch = sch_in;
  const uint32_t p_stage = (ws_stage_pair_bytes<PP>(p, WsTile<MT, CODES, SHAPE>::kCps) + 127u) & ~127u;
  const bool ring_ok = ws_ring_stages<MT, CODES, SHAPE>(p_stage, ws_y_stage_bytes(tm.y_rows), sch.max_stages) >= 4;
  sch.y_rows = ring_ok ? tm.y_rows : 0;
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  MIXQ_CUDA_CHECK(attr);
  {
    const WoLaunchConfig lc(dim3(unsigned(sch.grid)), kWsThreads, smem, stream, p.pdl);
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, kernel, tm.x, tm.w, tm.p, tm.y, p, sch));
  }
  if (!sch.inline_reduce && stream_k_split_pieces(sch) > 0) {
    const dim3 grid(unsigned(sch.sk_tiles), 2, unsigned(MT / 8 / kFixupQ));
    const WoLaunchConfig lc(grid, 128, 0, stream, p.pdl);
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, stream_k_fixup_kernel<MT>, p, sch));
  }
}

// The fold on the f16x2 path (f16 activations and pairs, int4 codes, integer zero, a group per
// stage): the A operand is the exact (1024 + u) - (1024 + zc) (or 16 (u - zc) for the registers
// of rows r + 8), one f16x2 instruction a register fewer than fma(u, s, o'), and s is applied to
// the stage's sums in f32. H100, same-process A/B on the nine layers, W4/W8 g128 f16, M = 3 ... 64
// (bench/results/session18/call2): W4 at mt = 16 1-4% faster on the weights of 16 MiB and more
// (4096x28672 M = 4 27.4 -> 26.3 us, 14336x21504 64.4 -> 64.0), 0-3% slower on the two smaller
// ones; W4 at mt = 32 and 64 2-5% slower; W8 within 1% at mt = 16 (so not built for it).
// MIXQ_WS_FOLD_HALF=0|1 forces it off or on where it is built (tuning knob, tests; read per call).
bool ws_fold_half(const WoStreamParams& p) {
  const char* e = std::getenv("MIXQ_WS_FOLD_HALF");
  if (e && (e[0] == '0' || e[0] == '1')) return e[0] == '1';
  return int64_t(p.N) * p.Kp / 2 >= (int64_t(16) << 20);
}

// Fold (scale after the MMA) where it applies and pays: the stage is one group with an integer
// zero, and the per-register path would go through f32 (bf16 activations off the Bf16Zero path,
// or f32 pairs; f16 pairs keep their f16x2 path, except int4 at mt = 16: ws_fold_half); token
// tiles up to 64 (the consumer-bound decode range). H100 (bench/results/cuda_wo_wgmma_ws_k128.md,
// MIXQ_WS_FOLD=0 against the default): W4 g128 bf16 M = 16 69.4 us against 80.0 on 14336x21504
// (f32 path), FP8 f16 (f32 block scales) 118.4 against 120.2. Not bf16 x int8 (255 has no exact bf16 bias), not bf16 x e4m3 (its
// 5-instruction bf16 conversion measured 0-3% slower than the f32 path on the memory-bound FP8
// decode), and not at mt = 32 (W4 bf16 M = 32: 1-4% slower than the per-register f32 path on the
// nine layers; at 16 and 64 the fold wins by 2-15%;
// bench/results/cuda_wo_wgmma_ws_k128/h100_fold_bf16_m16_32_64.txt).
template <typename T, int MT, int CODES, sm90::PairPath PP, WsShape SHAPE>
void launch_ws_config(const WoStreamParams& p, const WsMaps& tm, const StreamKSchedule& sch,
                      cudaStream_t stream) {
  constexpr bool kFoldable = PP == sm90::PairPath::F32 && MT <= 64 && MT != 32 &&
                             !(std::is_same_v<T, __nv_bfloat16> && CODES != 4);
  constexpr bool kFoldableHalf = PP == sm90::PairPath::Half && MT == 16 && CODES == 4;
  const int stage_shift = ws_stage_shift(WsConfig<MT, SHAPE>::kCps);
  if constexpr (kFoldable || kFoldableHalf) {
    if (p.int_zero && p.group_shift >= stage_shift && ws_fold_enabled() && (!kFoldableHalf || ws_fold_half(p)))
      return launch_ws_kernel<T, MT, CODES, PP, SHAPE, true>(p, tm, sch, stream);
  }
  launch_ws_kernel<T, MT, CODES, PP, SHAPE, false>(p, tm, sch, stream);
}

// The shape of token tile mt (H100, bench/results/cuda_wo_wgmma_ws_k128.md, W4/W8 g128 at
// M = 1, 4, 16 on the nine layers): W4 weights of 48 MB or more run two CTAs per SM at mt = 16
// (14336x21504: 67 us against 71 with one CTA; 8192x57344 98 against 104); smaller W4 weights
// and 8-bit codes (memory-bound) are 0-20% faster with one CTA. At mt = 32 (session 25, call 4:
// same-process A/B at M = 17 / 24 / 32, bench/results/session25/call4/ab_shape_mt32.md) two CTAs
// take 9-18% off W4 weights of 48 MB or more in f16 and bf16 (14336x21504 M = 32 78.6 -> 68.4 us,
// 8192x57344 124.6 -> 102.1) and 4-7% off bf16 W4 weights of 24-48 MB (8192x8192 24.2 -> 22.6),
// where f16 is within +-2%; they cost 1-10% on the small W4 layers and up to 10% on W8. (Token
// tiles of 64 with two CTAs, int4, measured 2-3.5x slower in call 5: their consumers spill at 104
// registers. Not built.) MIXQ_WS_SHAPE=1|2 forces one or two CTAs per SM at mt = 16 and 32
// (tuning knob, read per call so that one process can compare).
WsShape ws_shape_of(int mt, int bits, int64_t weight_bytes, bool bf16) {
  if (mt > 32) return WsShape::OneCta;
  const char* e = std::getenv("MIXQ_WS_SHAPE");
  const int env = e ? std::atoi(e) : 0;
  if (env == 1 || env == 2) return env == 1 ? WsShape::OneCta : WsShape::TwoCtas;
  const int64_t min_mib = mt == 16 || !bf16 ? 48 : 24;
  return bits == 4 && weight_bytes >= (min_mib << 20) ? WsShape::TwoCtas : WsShape::OneCta;
}
int ws_chunks_per_stage(WsShape shape, int mt) {
  if (shape == WsShape::TwoCtas) return WsConfig<16, WsShape::TwoCtas>::kCps;
  return mt <= 64 ? WsConfig<64, WsShape::OneCta>::kCps : WsConfig<128, WsShape::OneCta>::kCps;
}

// codes 4, 8 or kCodesE4M3; the Bf16Zero path decodes int4 and int8 (ws_bf16_zero_path)
template <typename T, sm90::PairPath PP, int MT, WsShape SHAPE>
void launch_ws_codes(const WoStreamParams& p, const WsMaps& tm, const StreamKSchedule& sch, int codes,
                     cudaStream_t stream) {
  if constexpr (PP == sm90::PairPath::Bf16Zero) {
    MIXQ_CHECK(codes == 4 || codes == 8, ErrorCode::Internal,
               "wo_wgmma_ws: the bf16 integer-zero path decodes int4 / int8, not code kind ", codes);
    if (codes == 4) launch_ws_config<T, MT, 4, PP, SHAPE>(p, tm, sch, stream);
    else launch_ws_config<T, MT, 8, PP, SHAPE>(p, tm, sch, stream);
  } else {
    if (codes == 4) launch_ws_config<T, MT, 4, PP, SHAPE>(p, tm, sch, stream);
    else if (codes == 8) launch_ws_config<T, MT, 8, PP, SHAPE>(p, tm, sch, stream);
    else launch_ws_config<T, MT, kCodesE4M3, PP, SHAPE>(p, tm, sch, stream);
  }
}

template <typename T, sm90::PairPath PP>
void launch_ws_type(const WoStreamParams& p, const WsMaps& tm, const StreamKSchedule& sch, WsShape shape,
                    int mt, int codes, cudaStream_t stream) {
  switch (mt) {
    case 16:
      if (shape == WsShape::OneCta) return launch_ws_codes<T, PP, 16, WsShape::OneCta>(p, tm, sch, codes, stream);
      return launch_ws_codes<T, PP, 16, WsShape::TwoCtas>(p, tm, sch, codes, stream);
    case 32:
      if (shape == WsShape::OneCta) return launch_ws_codes<T, PP, 32, WsShape::OneCta>(p, tm, sch, codes, stream);
      return launch_ws_codes<T, PP, 32, WsShape::TwoCtas>(p, tm, sch, codes, stream);
    case 64: return launch_ws_codes<T, PP, 64, WsShape::OneCta>(p, tm, sch, codes, stream);
    case 128: return launch_ws_codes<T, PP, 128, WsShape::OneCta>(p, tm, sch, codes, stream);
    case 256: return launch_ws_codes<T, PP, 256, WsShape::OneCta>(p, tm, sch, codes, stream);
  }
  MIXQ_FAIL(ErrorCode::Internal, "wo_wgmma_ws: no configuration for mt=", mt);
}

// The bf16 dequantization path of token tile mt: Bf16Zero (int4 codes, integer zero, groups of at
// least a chunk: one packed word per row and chunk or stage, WoStreamParams::pairs_gm_bz) from
// mt = 32 on, and at 16 where the fold does not apply (groups shorter than a stage); otherwise the
// fold (mt = 16). H100, same-process A/B on the nine layers, W4 g128 bf16, MIXQ_WS_BF16_NATIVE=0
// against 1 (bench/results/session18/call5, packed pairs): Bf16Zero is 4-8% faster than the f32
// path at mt = 32, 3-5% at mt = 128, 0-9% at mt = 256 and 7-14% at M = 1024, and within -2% /
// +0.5% of the fold at mt = 64. (Session 16, when it derived zc with a division per stage and
// row: 3-5% faster at mt = 32, 2-8% slower at mt = 128, 6-10% slower than the fold at mt = 16.)
// MIXQ_WS_BF16_NATIVE=0|1 forces it off or on (wherever it applies; tuning knob, read per call so
// that one process can compare: cuda_wo_sweep --variants).
// int8 (pairs_gm_bz holds its words only where they are exact: symmetric codes) takes it at every
// token tile: the fold does not decode bf16 int8.
bool ws_bf16_zero_path(const WoStreamParams& p, int codes, int mt, WsShape shape) {
  if ((codes != 4 && codes != 8) || !p.int_zero || p.group_shift < 6 || !p.pairs_gm_bz) return false;
  const char* e = std::getenv("MIXQ_WS_BF16_NATIVE");
  if (e && (e[0] == '0' || e[0] == '1')) return e[0] == '1';
  if (codes == 8) return true;
  const bool folds = ws_fold_enabled() && p.group_shift >= ws_stage_shift(ws_chunks_per_stage(shape, mt));
  return mt >= 32 || !folds;
}

// Where the cut tiles are summed: inside the kernel by their owner CTA, or by the fixup kernel
// after the grid. Inline saves the fixup launch and its wait for the whole grid on the boundary
// between back-to-back calls, but the owner sums the other pieces alone at the end of its range,
// and a tile cut into many pieces makes it wait for CTAs that end with it. H100, same-process A/B
// on the nine layers, W4/W8 g128 f16 (bench/results/session20/call2, call3; rows of the small
// layers are stable to 1%, the large ones drift by up to 10% between rounds at M >= 64):
// - mt = 16 and 32: inline is 1-7% faster on every layer but 28672x8192 (equal), however many
//   pieces a tile has (4096x4096 M = 8: 11.3 -> 10.8 us; 8192x8192 W8 M = 32: 32.5 -> 30.3);
// - mt = 64: 2-5% faster where a cut tile has at most ~2.5 pieces (8192x10240, 8192x8192,
//   4096x28672), 2-5% slower at 2.75-4 (4096x6144, 4096x4096, 14336x21504);
// - mt >= 128: 1-18% slower on most layers (14336x4096 M = 256 50.4 -> 59.6). Since the
//   TMA-store epilogue (session 25, call 5, W4 g128 f16 M = 256 / 1024 / 4096): 3-15% faster where
//   the whole grid is stream-K (fewer tiles than CTAs) and a cut tile has at most ~2.5 pieces
//   (M = 256: 4096x6144 31.0 -> 26.5 us, 8192x10240 70.1 -> 64.4, 8192x8192 57.0 -> 53.0,
//   28672x8192 177.3 -> 171.4); with ~4 pieces (14336x4096 M = 256) or behind rounds of whole
//   tiles 0-3% slower, or within the large-M drift.
// MIXQ_WS_REDUCE=fixup|inline forces one (tuning knob, tests; read per call).
bool ws_inline_reduce(const StreamKSchedule& sch, int mt) {
  const char* e = std::getenv("MIXQ_WS_REDUCE");
  if (e && std::string(e) == "fixup") return false;
  if (e && std::string(e) == "inline") return true;
  const bool few_pieces = 2 * sch.sk_ctas <= 5 * sch.sk_tiles;
  return mt <= 32 || (mt == 64 && few_pieces) || (sch.dp_tiles == 0 && few_pieces);
}

}  // namespace

#if defined(MIXQ_WS_DIAG_BUILD)
void ws_diag_dump_cta_log(const char* path) {
  static unsigned long long log[kWsCtaLogMax][4];
  unsigned done = 0;
  MIXQ_CUDA_CHECK(cudaDeviceSynchronize());
  MIXQ_CUDA_CHECK(cudaMemcpyFromSymbol(&done, g_ws_cta_done, sizeof(done)));
  MIXQ_CUDA_CHECK(cudaMemcpyFromSymbol(log, g_ws_cta_log, sizeof(log)));
  FILE* f = std::fopen(path, "w");
  MIXQ_CHECK(f != nullptr, ErrorCode::Internal, "cannot write ", path);
  std::fprintf(f, "seq,cta,sm,t_start_ns,t_first_stage_ns,t_end_ns\n");
  const unsigned n = done < unsigned(kWsCtaLogMax) ? done : unsigned(kWsCtaLogMax);
  for (unsigned i = done - n; i < done; ++i) {
    const auto& r = log[i % kWsCtaLogMax];
    std::fprintf(f, "%u,%llu,%llu,%llu,%llu,%llu\n", i, r[0] & 0xffffffffull, r[0] >> 32, r[1], r[2], r[3]);
  }
  std::fclose(f);
}
#endif

bool wo_wgmma_ws_available(int device) {
  static PerDeviceFlag cache;
  return runs_sm90_image(
      cache, device, reinterpret_cast<const void*>(wo_wgmma_ws_kernel<half, 64, 4, sm90::PairPath::Half, WsShape::OneCta>));
}

void launch_wo_wgmma_ws(const WoStreamParams& p, int mt, int codes, int num_n, int num_m,
                        cudaStream_t stream) {
  MIXQ_CHECK(codes == 4 || codes == 8 || codes == kCodesE4M3, ErrorCode::Internal,
             "wo_wgmma_ws: code kind ", codes);
  const int bits = codes == 4 ? 4 : 8;
  MIXQ_CHECK(p.group_shift >= 4, ErrorCode::Internal, "wo_wgmma_ws: groups of at least 16");
  MIXQ_CHECK(p.partial, ErrorCode::Internal, "wo_wgmma_ws: no stream-K workspace");
  MIXQ_CHECK(p.pairs_gm && p.pairs_gm_ld % 128 == 0 && p.pairs_gm_ld >= p.N, ErrorCode::Internal,
             "wo_wgmma_ws: needs the group-major pairs");
  int device = 0;
  MIXQ_CUDA_CHECK(cudaGetDevice(&device));
  // X [M][K] 16-bit, rows ldx apart; boxes of 64 K x mt tokens, zero-filled past K and M.
  WsMaps tm{};
  tm.x = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT16, p.x, uint64_t(p.K), uint64_t(p.M),
                            uint64_t(p.ldx) * 2, kChunkK, uint32_t(mt), CU_TENSOR_MAP_SWIZZLE_128B);
  // codes: [row tile][chunk][tile bytes] as u32, boxes of a stage's chunks of 8 row tiles (128 rows)
  const WsShape shape = ws_shape_of(mt, bits, int64_t(p.N) * p.Kp * bits / 8, p.x_type == IoType::BF16);
  const int cps = ws_chunks_per_stage(shape, mt);
  const int chunks = p.Kp / kChunkK;
  const uint32_t tile_bytes = bits == 4 ? 512u : 1024u;
  const int n_row_tiles = (p.N + kTileRows - 1) / kTileRows;
  tm.w = make_tensor_map_3d(CU_TENSOR_MAP_DATA_TYPE_UINT32, p.codes, tile_bytes / 4, uint64_t(chunks),
                            uint64_t(n_row_tiles), tile_bytes, uint64_t(chunks) * tile_bytes,
                            tile_bytes / 4, uint32_t(cps), 8);
  // pairs: [group][pairs_gm_ld rows], 4- or 8-byte elements, boxes of 128 rows x the stage's groups
  // (the bf16 integer-zero path reads its packed copy of the pairs)
  const bool bf16_zero = p.x_type == IoType::BF16 && ws_bf16_zero_path(p, codes, mt, shape);
  const int ppc = ws_stage_groups(cps, p.group_shift);
  const bool pair64 = p.pair_f32 && !bf16_zero;
  tm.p = make_tensor_map_2d(pair64 ? CU_TENSOR_MAP_DATA_TYPE_INT64 : CU_TENSOR_MAP_DATA_TYPE_UINT32,
                            bf16_zero ? p.pairs_gm_bz : p.pairs_gm, uint64_t(p.pairs_gm_ld), uint64_t(p.groups),
                            uint64_t(p.pairs_gm_ld) * (pair64 ? 8u : 4u), 128, uint32_t(ppc),
                            CU_TENSOR_MAP_SWIZZLE_NONE);
  // Y [M][N] 16-bit: boxes of 64 rows x y_rows tokens, 128-byte swizzle (the staging tiles' layout)
  tm.y_rows = ws_y_rows(p, mt);
  if (tm.y_rows > 0)
    tm.y = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT16, p.y, uint64_t(p.N), uint64_t(p.M), uint64_t(p.ldy) * 2,
                              64, uint32_t(tm.y_rows), CU_TENSOR_MAP_SWIZZLE_128B);
  static const int mode = [] {  // tuning knob (benchmarks): dp = whole tiles, sk = stream-K
    const char* e = std::getenv("MIXQ_WS_SCHEDULE");
    return !e ? 0 : std::string(e) == "dp" ? 1 : std::string(e) == "sk" ? 2 : 0;
  }();
  StreamKSchedule sch =
      make_stream_k_schedule(num_n, num_m, (chunks + cps - 1) / cps, sm_count(device) * (shape == WsShape::OneCta ? 1 : 2), mt,
                             mode, cps);
  // Timing experiments only (results are wrong with it): honoured only in builds configured with
  // -DMIXQ_WS_DIAG_BUILD, so a stray environment variable can never corrupt a user's output.
#if defined(MIXQ_WS_DIAG_BUILD)
  static const int diag = [] {
    const char* e = std::getenv("MIXQ_WS_DIAG");
    return e ? std::atoi(e) : 0;
  }();
#else
  constexpr int diag = 0;
#endif
  sch.diag = diag;
  static const int max_stages = [] {  // tuning knob (benchmarks): cap on the ring depth
    const char* e = std::getenv("MIXQ_WS_STAGES");
    return e ? std::atoi(e) : 0;
  }();
  sch.max_stages = max_stages;
  if (const char* e = std::getenv("MIXQ_WS_GROUP_N")) {  // tuning knob: N blocks per raster group
    const int g = std::atoi(e);
    if (g > 0) sch.group_n = g;
  }
  // the plan's weight stages before the grid dependency wait; MIXQ_WS_EARLY overrides it (tuning
  // knob, read per call: 0 none, the order of a launch without dependent launch; -1 the whole ring)
  sch.early_stages = p.early_stages;
  if (const char* e = std::getenv("MIXQ_WS_EARLY")) sch.early_stages = std::atoi(e);
  sch.inline_reduce = ws_inline_reduce(sch, mt);
  if (sch.inline_reduce) {
    MIXQ_CHECK(p.tickets, ErrorCode::Internal, "wo_wgmma_ws: no stream-K flags");
    MIXQ_CHECK(int64_t(sch.sk_tiles) * kStreamKFlagsPerTile <= ws_flags(sm_count(device), mt), ErrorCode::Internal,
               "wo_wgmma_ws: ", sch.sk_tiles, " stream-K tiles need more flags than the workspace holds");
  }
  using sm90::PairPath;
  if (p.x_type == IoType::F16) {
    if (!p.pair_f32) launch_ws_type<half, PairPath::Half>(p, tm, sch, shape, mt, codes, stream);
    else launch_ws_type<half, PairPath::F32>(p, tm, sch, shape, mt, codes, stream);
  } else {
    MIXQ_CHECK(p.x_type == IoType::BF16, ErrorCode::Internal, "wo_wgmma_ws: f16/bf16 activations only");
    if (bf16_zero) launch_ws_type<__nv_bfloat16, PairPath::Bf16Zero>(p, tm, sch, shape, mt, codes, stream);
    else launch_ws_type<__nv_bfloat16, PairPath::F32>(p, tm, sch, shape, mt, codes, stream);
  }
}

}  // namespace mixq::cuda
