// Promotion policy of the Hopper block GEMM (sm90_block_gemm.cuh) for INT8 W8A8 per block
// (int8_gemm.hpp, block mode, K block g = 128 = one pipeline stage, or g = 64 = half a stage):
//   total[m][n] = sum over K blocks kb of  sx*(sw*dot) + ox*dw + (sx*Σqx)*ow
// (dot = the block's s8.s8 -> s32 sum). The two dot-independent terms form a small GEMM of their
// own, R = [ox | u] . [dw ; ow] (u = sx*Σqx) with K' = one or two values per K block, and run on the
// tensor cores (the rank-1 stages, below); the per-block promotion is then sx*(sw*dot) only.
//
// Main stages (one per 128 K): codes A 128 x 128, B BN x 128, plus sx ({BM rows} x kBlocks box of
// the row meta, act_quant.hpp layout [kb][ld_meta]) and sw ({BN} x kBlocks box of [kb][Np] in the
// int8_meta_col order). Rows past M read as zeros (TMA out-of-bounds fill), so garbage in the
// meta's pad rows never reaches a stored value; so do K blocks past the last (g = 64 with an odd
// number of blocks: the codes there are zeros too, and the half adds 0 · 0).
// g = 64 (kBlocks = 2): the skeleton commits each half stage's two k32 MMAs as its own group into
// its own accumulator set and promotes the halves one after the other; the promotion work per K
// doubles while the MMA work stays, so the kernel is more issue-bound than at g = 128.
//
// Rank-1 stages (ceil(num_kb / 8) per tile, before the main stages, in the same ring slots): the
// A slot receives ox (and, with offset weights, sx and Σqx) for the tile's rows and 8 K blocks
// ({BM, 8} boxes: [8][BM] floats); the B slot receives the prepared K-major tf32 pairs of dw (and
// ow): hi = tf32(v), lo = tf32(v - hi), [BN][8] each, 32-byte swizzled. Each consumer thread builds
// its A fragments (16 x 8 per warp, mma.sync tf32 layout) from the [8][BM] boxes, splits them the
// same way (hi = the top 19 bits, lo = the exact rest), and issues hi.hi + lo.hi + hi.lo
// (wgmma m64nBNk8 tf32, A in registers) into the f32 totals: the dropped lo.lo and tf32 rounding
// of lo leave ~2^-20 relative error per term, below the 1e-5 the INT8 path promises.
//
// Cost model (H100, ncu on 8192 x 8192 x 4096; why the promotion is written this way): per K
// block each consumer thread folds 64 accumulators, and the block's MMAs take the SM's tensor
// cores 512 cycles. Two consumer warps share each scheduler, so every instruction per accumulator
// costs ~128 issue cycles per block: with the rank-1 terms in the promotion it was 4 (I2FP, FMUL,
// two FFMA; 345 instructions per warp per block with the loads and the MMA issue) and the kernel
// took ~1460 cycles per block; now it is 3 (I2FP, FMUL by sw, FFMA by sx) and one column field
// (sw) instead of two, while the rank-1 stages cost the tensor cores 3 tf32 k8 MMAs per 8 K
// blocks and term (tf32 runs at 1/4 of the s8 rate: ~9% of the s8 MMA time, 19% with offsets).
// Shared-memory wavefronts are the other budget: the wgmma operand reads are 384 per block, and a
// column value costs every warp one wavefront per 4 bytes a thread receives (lanes of a row group
// read the same address), so the promotion reads one column field (sw) per block.
// The magic-number int -> float conversion (docs/decisions/int8-block-gemm.md) lost to I2FP: its VIADDs ran on the
// half-rate integer pipe (35% of the stall samples).
// The int8_meta_col order gives each thread its columns of two consecutive 8-column groups in one
// 16-byte load. The policy sets kPromoteReadsSmem: the skeleton releases a main slot only after
// promote().
//
// kARows: rows of every row-value box (sx per stage; ox, sx, Σqx per rank-1 stage). BM for the
// plain kernel, whose tiles start at multiples of BM. The grouped (mixture-of-experts) form's
// tiles start at an expert's first row, anywhere; a TMA box whose first element is not 16-byte
// aligned faults, so its policy (kARows = BM + 4) loads from the tile's first row rounded down to
// a multiple of 4, and the consumers' `row` (the skeleton's meta_row) is that many rows further on.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/kernels/common/int8_params.hpp"
#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/common/sm90_wgmma.cuh"

namespace mixq::cuda::sm90 {

// BM: rows of the CTA tile (128 kSub of the skeleton). G: the K block. kARows: rows of the row
// meta's boxes (BM, or BM + 4 for tiles starting at any row).
template <int BN, bool kOffset, int BM = 128, int G = 128, int kARows = BM>
struct Int8BlockPolicy {
  static_assert(BN == 64 || BN == 128, "TMA box of the column meta; tf32 rank-1 MMA widths");
  static_assert(BM == 128 || BM == 256, "the skeleton's tile rows");
  static_assert(kARows == BM || (BM == 128 && kARows == BM + 4),
                "row-meta boxes of the tile's rows, or 4 more (tiles at any row): <= 256 floats");
  static_assert(G == 64 || G == 128, "K blocks of 64 (two a stage) or 128 (one)");
  static constexpr int kBlocks = 128 / G;
  template <int N>
  using Mma = WgmmaS8<N>;
  struct Params {
    // main stages: sx {M, K blocks} box {kARows, kBlocks}; sw {Np, K blocks} box {BN, kBlocks}
    // (grouped: sw and r1w are each expert's, in device memory; these two are unused)
    CUtensorMap sx, sw;
    CUtensorMap ox8, sx8, sumx8;  // rank-1 stages: {M, num_kb} box {kARows, 8} (f32, f32, s32)
    CUtensorMap r1w;              // {KBp, 2 T Np} box {8, BN}, 32-byte swizzle (int8_gemm.hpp)
    int r1_np = 0;                // Np: row stride between the hi / lo / term planes of r1w
  };
  static constexpr bool kPromoteReadsSmem = true;
  // sx: [kBlocks][kARows] (a 128-byte multiple of the slot: TMA destinations)
  static constexpr int kAMetaBytes = (kBlocks * kARows * 4 + 127) / 128 * 128;
  static constexpr int kBMetaBytes = kBlocks * BN * 4;  // sw (a 128-byte multiple: BN % 32 == 0)
  static constexpr uint32_t kMetaTxBytes = kBlocks * (kARows + BN) * 4;

  // Rank-1 stages: kInt8Rank1Blocks K blocks each; A slot [terms' row values][8][kARows] floats, B
  // slot [2 T][BN][8] tf32 (T terms: dw, and ow with offset weights).
  static constexpr bool kRank1 = true;
  static constexpr int kTerms = kOffset ? 2 : 1;
  static constexpr int kRowFields = kOffset ? 3 : 1;  // ox (, sx, Σqx)
  static constexpr int kR1RowBytes = kInt8Rank1Blocks * kARows * 4;  // a 128-byte multiple
  static constexpr int kR1ColBytes = kInt8Rank1Blocks * BN * 4;
  static constexpr uint32_t kRank1TxBytes = kRowFields * kR1RowBytes + 2 * kTerms * kR1ColBytes;
  static_assert(kRowFields * kR1RowBytes <= BM * 128, "rank-1 row values fit the A slot");
  static_assert(2 * kTerms * kR1ColBytes <= BN * 128, "rank-1 weight values fit the B slot");
  // num_kb: the skeleton's 128-K stages (kBlocks K blocks each; with g = 64 and an odd number of
  // blocks the count of rank-1 stages is the same: 2 s and 2 s - 1 round up alike over 8).
  __host__ __device__ static int rank1_stages(int num_kb) {
    return (num_kb * kBlocks + kInt8Rank1Blocks - 1) / kInt8Rank1Blocks;
  }

  // Shared-window loads (sm90_sync.cuh): through a generic pointer kept in a struct, the compiler
  // emits a generic LD (address-space check per load) instead of LDS.
  __device__ __forceinline__ static float lds(uint32_t addr) { return __uint_as_float(lds32(addr)); }
  __device__ __forceinline__ static float4 lds4(uint32_t addr) {
    const uint4 v = lds128(addr);
    return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z),
                       __uint_as_float(v.w));
  }
  __device__ __forceinline__ static void load_meta(const Params& pp, void* a_meta, void* b_meta,
                                                   uint64_t* bar, int m0, int n0, int kb) {
    tma_load_2d(a_meta, &pp.sx, bar, m0, kb * kBlocks);
    tma_load_2d(b_meta, &pp.sw, bar, n0, kb * kBlocks);
  }
  // The grouped form: the row values from the aligned row at or below m0, sw through the unit's
  // expert's descriptor (box {BN, kBlocks}, as pp.sw's).
  __device__ __forceinline__ static void load_meta_expert(const Params& pp, void* a_meta,
                                                          void* b_meta, uint64_t* bar, int m0,
                                                          int n0, int kb, const CUtensorMap* sw) {
    static_assert(kARows == BM + 4, "the grouped form's tiles start at any row");
    tma_load_2d(a_meta, &pp.sx, bar, m0 & ~3, kb * kBlocks);
    tma_load_2d(b_meta, sw, bar, n0, kb * kBlocks);
  }
  // r1w: the plain kernel's pp.r1w, or (grouped) the unit's expert's; m0 already aligned when the
  // tile may start at any row.
  __device__ __forceinline__ static void load_rank1_from(const Params& pp, const CUtensorMap* r1w,
                                                         void* a_slot, void* b_slot, uint64_t* bar,
                                                         int m0, int n0, int stage) {
    uint8_t* a = static_cast<uint8_t*>(a_slot);
    uint8_t* b = static_cast<uint8_t*>(b_slot);
    const int kb0 = stage * kInt8Rank1Blocks;
    tma_load_2d(a, &pp.ox8, bar, m0, kb0);
    if constexpr (kOffset) {
      tma_load_2d(a + kR1RowBytes, &pp.sx8, bar, m0, kb0);
      tma_load_2d(a + 2 * kR1RowBytes, &pp.sumx8, bar, m0, kb0);
    }
#pragma unroll
    for (int plane = 0; plane < 2 * kTerms; ++plane)
      tma_load_2d(b + plane * kR1ColBytes, r1w, bar, kb0, plane * pp.r1_np + n0);
  }
  __device__ __forceinline__ static void load_rank1(const Params& pp, void* a_slot, void* b_slot,
                                                    uint64_t* bar, int m0, int n0, int stage) {
    load_rank1_from(pp, &pp.r1w, a_slot, b_slot, bar, m0, n0, stage);
  }
  __device__ __forceinline__ static void load_rank1_expert(const Params& pp, void* a_slot,
                                                           void* b_slot, uint64_t* bar, int m0,
                                                           int n0, int stage,
                                                           const CUtensorMap* r1w) {
    static_assert(kARows == BM + 4, "the grouped form's tiles start at any row");
    load_rank1_from(pp, r1w, a_slot, b_slot, bar, m0 & ~3, n0, stage);
  }

  // Consumer side of a rank-1 stage: total[sub] += A'.B' over its 8 K blocks (row: the thread's
  // first row in the boxes, the skeleton's meta_row). Issues and commits one group of MMAs; the caller
  // waits for it before touching `total` or releasing the slot.
  template <int S, int R>
  __device__ __forceinline__ static void rank1(float (&total)[S][R], const void* a_slot,
                                               const void* b_slot, int row) {
    const uint32_t a = smem_u32(a_slot), b = smem_u32(b_slot);
    const int t = threadIdx.x % 4;
    uint32_t hi[kTerms][S][4], lo[kTerms][S][4];
#pragma unroll
    for (int sub = 0; sub < S; ++sub)
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
        const uint32_t at = a + 4 * ((t + 4 * (i >> 1)) * kARows + row + 64 * sub + 8 * (i & 1));
        float v[kTerms];
        v[0] = lds(at);  // ox
        if constexpr (kOffset)  // u = sx * Σqx, in the order the reference rounds it
          v[kTerms - 1] = lds(at + kR1RowBytes) * float(__float_as_int(lds(at + 2 * kR1RowBytes)));
#pragma unroll
        for (int term = 0; term < kTerms; ++term) {
          hi[term][sub][i] = __float_as_uint(v[term]) & 0xFFFFE000u;  // tf32 (truncated)
          lo[term][sub][i] = __float_as_uint(v[term] - __uint_as_float(hi[term][sub][i]));
        }
      }
    wgmma_fence();
#pragma unroll
    for (int term = 0; term < kTerms; ++term) {
      const uint64_t d_hi = desc_kmajor_sw32(b + (2 * term) * kR1ColBytes);
      const uint64_t d_lo = desc_kmajor_sw32(b + (2 * term + 1) * kR1ColBytes);
#pragma unroll
      for (int sub = 0; sub < S; ++sub) {
        WgmmaTf32RS<BN>::mma(total[sub], hi[term][sub], d_hi);
        WgmmaTf32RS<BN>::mma(total[sub], lo[term][sub], d_hi);
        WgmmaTf32RS<BN>::mma(total[sub], hi[term][sub], d_lo);
      }
    }
    wgmma_commit();
  }

  // Only the stage's addresses: the row values are read in promote(), after the MMAs, so that the
  // two accumulator sets in flight do not each hold more live registers.
  struct Scale {
    uint32_t row;  // shared address of this thread's sx (row + 8 at +32)
    uint32_t col;  // shared address of this thread's first 16 bytes of the stage's sw[BN] row
  };
  __device__ __forceinline__ static Scale read(const void* a_meta, const void* b_meta, int row,
                                               int /*n0*/, int /*kb*/, int half) {
    return {smem_u32(a_meta) + 4 * (kARows * half + row),
            smem_u32(b_meta) + 4 * (BN * half) + 16 * (threadIdx.x % 4)};
  }

  // Accumulator layout (m64nN): registers 4j, 4j+1 are row `row`, 4j+2, 4j+3 row `row + 8`,
  // columns 8j + 2 (lane % 4) + {0, 1} of the tile; sub-tile `sub` is 64 sub rows further. In the
  // int8_meta_col order the sw values of j = 2q, 2q + 1 are the 16 bytes at 64 q + 16 (lane % 4)
  // of the stage's row; they are loaded once and serve every sub-tile.
  // Per accumulator: I2FP (exact, |dot| <= 2^21), FMUL by sw (sw * dot rounded once), FFMA by sx.
  template <int S, int R>
  __device__ __forceinline__ static void promote(float (&total)[S][R], const int32_t (&acc)[S][R],
                                                 const Scale& s) {
    static_assert(64 * S <= BM / 2, "a consumer warpgroup's sub-tiles lie inside its half");
    float sx[S][2];
#pragma unroll
    for (int sub = 0; sub < S; ++sub)
#pragma unroll
      for (int h = 0; h < 2; ++h) sx[sub][h] = lds(s.row + 4 * (64 * sub + 8 * h));
#pragma unroll
    for (int q = 0; q < R / 8; ++q) {
      const float4 w4 = lds4(s.col + 64 * q);
      const float w[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
      for (int sub = 0; sub < S; ++sub)
#pragma unroll
        for (int jj = 0; jj < 2; ++jj)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int i = 4 * (2 * q + jj) + 2 * h + e, c = 2 * jj + e;
              total[sub][i] = fmaf(sx[sub][h], __int2float_rn(acc[sub][i]) * w[c], total[sub][i]);
            }
    }
  }
};

}  // namespace mixq::cuda::sm90
