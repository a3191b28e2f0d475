// Promotion policy of the Hopper block GEMM (sm90_block_gemm.cuh) for INT8 W8A8 per block
// (int8_gemm.hpp, block mode, K block g = 128 = one pipeline stage):
//   total[m][n] += sx*(sw*dot) + ox*dw + (sx*Σqx)*ow       (dot = the block's s8.s8 -> s32 sum)
// Row meta (sx, ox, Σqx; act_quant.hpp layout: [kb][ld_meta] M-contiguous) and column meta (sw,
// dw, ow; [kb][Np] in the int8_meta_col order) are TMA-loaded per stage as {128 rows} / {BN
// columns} boxes next to the codes. Rows past M read as zeros (TMA out-of-bounds fill), so
// garbage in the meta's pad rows never reaches a stored value.
//
// Cost model (measured with ncu on the H100, 8192 x 8192 x 4096; why the promotion is written this
// way): per K block each consumer thread folds 64 accumulators, and the block's MMAs take the SM's
// tensor cores 512 cycles (128 x 128 x 128 s8 MACs at 4096 per cycle). Two resources compete:
//  - shared-memory wavefronts. The wgmma operand reads are 384 per block (48 KB: each warpgroup
//    reads its 8 KB of A and all 16 KB of B), and a column value costs every warp one wavefront
//    per 4 bytes a thread receives, however wide the load (lanes of one row group read the same
//    address; an LDS.128 is served in four quarter-warp wavefronts). Session 10 loaded a third
//    column field (mw = -magic * sw, for the conversion below): 800 more wavefronts per block,
//    1184 in all, 82% L1 throughput, ~1640 cycles per block. Now each column value (sw, dw; ow
//    with offset weights) is loaded once per block: 384 + 544 wavefronts;
//  - issue slots: two consumer warps share each scheduler, so the promotion must stay near 4
//    instructions per accumulator: I2FP (exact: |dot| <= 128 * 128 * 128 = 2^21 < 2^24), FMUL by
//    sw, then two (offset weights: three) FMAs. Until session 10 the conversion was the magic-number
//    add (acc + 0x4B400000 read as a float, then one FMA with a precomputed -magic * sw, which needed
//    sw rounded to 22 bits at prepare): ncu put 35% of the stall samples on those VIADDs (the
//    half-rate integer pipe), and I2FP + FMUL measured 2-6% faster on all 8 shapes tried
//    (bench/results/session10, call 9).
// The int8_meta_col order gives each thread its columns of two consecutive 8-column groups in one
// 16-byte load (fewer instructions; the same wavefronts). The policy sets kPromoteReadsSmem: the
// skeleton releases the slot only after promote().
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/int8_gemm.hpp"
#include "cuda/kernels/sm90_sync.cuh"
#include "cuda/kernels/sm90_wgmma_ops.cuh"

namespace mixq::cuda::sm90 {

// BM: rows of the CTA tile (128 kSub of the skeleton), the box of the row meta.
template <int BN, bool kOffset, int BM = 128>
struct Int8BlockPolicy {
  static_assert(BN % 32 == 0 && BN <= 256, "TMA box of the column meta: BN <= 256 floats");
  static_assert(BM == 128 || BM == 256, "TMA box of the row meta: BM <= 256 floats");
  template <int N>
  using Mma = WgmmaS8<N>;
  struct Params {
    CUtensorMap sx, ox, sumx;  // {M, num_kb}, box {BM, 1} (f32, f32, s32)
    CUtensorMap sw, dw, ow;    // {Np, num_kb}, box {BN, 1} (f32); ow unused without offsets
  };
  static constexpr bool kPromoteReadsSmem = true;
  static constexpr int kColumnFields = kOffset ? 3 : 2;  // sw, dw (, ow)
  static constexpr int kAMetaBytes = 3 * BM * 4;
  static constexpr int kBMetaBytes = 3 * BN * 4;  // a 128-byte multiple for BN % 32 == 0
  static constexpr uint32_t kMetaTxBytes = 3 * BM * 4 + kColumnFields * BN * 4;

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
    uint8_t* a = static_cast<uint8_t*>(a_meta);
    uint8_t* b = static_cast<uint8_t*>(b_meta);
    tma_load_2d(a, &pp.sx, bar, m0, kb);
    tma_load_2d(a + 4 * BM, &pp.ox, bar, m0, kb);
    tma_load_2d(a + 8 * BM, &pp.sumx, bar, m0, kb);
    tma_load_2d(b, &pp.sw, bar, n0, kb);
    tma_load_2d(b + BN * 4, &pp.dw, bar, n0, kb);
    if constexpr (kOffset) tma_load_2d(b + 2 * BN * 4, &pp.ow, bar, n0, kb);
  }

  // Only the stage's addresses: the row values are read in promote(), after the MMAs, so that the
  // two accumulator sets in flight do not each hold 6 more live registers (the consumer's 232 are
  // nearly all taken by 3 x 64 accumulators and totals).
  struct Scale {
    uint32_t row;  // shared address of this thread's sx (ox at +4 BM, Σqx at +8 BM; row + 8 at +32)
    uint32_t col;  // shared address of this thread's first 16 bytes of the stage's sw[BN] row
  };
  __device__ __forceinline__ static Scale read(const void* a_meta, const void* b_meta, int row,
                                               int /*n0*/, int /*kb*/) {
    return {smem_u32(a_meta) + 4 * row, smem_u32(b_meta) + 16 * (threadIdx.x % 4)};
  }

  // Accumulator layout (m64nN): registers 4j, 4j+1 are row `row`, 4j+2, 4j+3 row `row + 8`,
  // columns 8j + 2 (lane % 4) + {0, 1} of the tile; sub-tile `sub` is 64 sub rows further. In the
  // int8_meta_col order the column values of j = 2q, 2q + 1 are the 16 bytes at 64 q + 16 (lane %
  // 4) of each field's row; they are loaded once and serve every sub-tile.
  template <int S, int R>
  __device__ __forceinline__ static void promote(float (&total)[S][R], const int32_t (&acc)[S][R],
                                                 const Scale& s) {
    static_assert(64 * S <= BM / 2, "a consumer warpgroup's sub-tiles lie inside its half");
    float sx[S][2], ox[S][2], u[S][2];  // per sub-tile, rows +0 / +8: sx, ox, sx * Σqx
#pragma unroll
    for (int sub = 0; sub < S; ++sub)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t r = s.row + 4 * (64 * sub + 8 * h);
        sx[sub][h] = lds(r);
        ox[sub][h] = lds(r + 4 * BM);
        u[sub][h] = kOffset ? sx[sub][h] * float(__float_as_int(lds(r + 8 * BM))) : 0.f;
      }
#pragma unroll
    for (int q = 0; q < R / 8; ++q) {
      const uint32_t at = s.col + 64 * q;
      const float4 w4 = lds4(at), d4 = lds4(at + 4 * BN);
      float4 o4 = make_float4(0.f, 0.f, 0.f, 0.f);
      if constexpr (kOffset) o4 = lds4(at + 8 * BN);
      const float w[4] = {w4.x, w4.y, w4.z, w4.w};
      const float d[4] = {d4.x, d4.y, d4.z, d4.w}, o[4] = {o4.x, o4.y, o4.z, o4.w};
#pragma unroll
      for (int sub = 0; sub < S; ++sub)
#pragma unroll
        for (int jj = 0; jj < 2; ++jj)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int i = 4 * (2 * q + jj) + 2 * h + e, c = 2 * jj + e;
              const float sd = __int2float_rn(acc[sub][i]) * w[c];  // sw * dot, rounded once
              float v = fmaf(ox[sub][h], d[c], total[sub][i]);
              if constexpr (kOffset) v = fmaf(u[sub][h], o[c], v);
              total[sub][i] = fmaf(sx[sub][h], sd, v);
            }
    }
  }
};

}  // namespace mixq::cuda::sm90
