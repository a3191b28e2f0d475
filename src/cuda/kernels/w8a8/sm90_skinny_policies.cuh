// Promotion policies of the few-token GEMM (sm90_skinny_gemm.cuh): which meta a 128-K stage
// carries for the weight tile and for the tokens, how TMA brings it next to the codes, and how a
// K block's MMA partial sums are folded into the f32 totals. A consumer thread holds the
// accumulators of weight rows `row`, `row + 8` (of the 128-row tile) and tokens 8 j + col + {0, 1}:
// register 4 j + e is row row + 8 (e >> 1), token 8 j + col + (e & 1).
// Policy interface (a policy is a template of the token tile MT): Mma (wgmma wrapper), kBlocks
// (K blocks per 128-K stage), Params (tensor maps), kWMetaBytes / kXMetaBytes (per-stage shared
// memory, 128-byte multiples) and kWMetaTx / kXMetaTx (bytes TMA delivers into them),
// load_wmeta(pp, dst, bar, nb, stage), load_xmeta(pp, dst, bar, stage),
// promote(total, acc, wmeta, xmeta, stage, block, row, col).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/kernels/common/int8_params.hpp"  // int8_meta_col
#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/common/sm90_wgmma_ops.cuh"

namespace mixq::cuda::sm90 {

// FP8 1x128 activations x 128x128 weights (DeepSeek-V3): the 128-row weight tile is one weight
// block, so its scale is one float per K block: total += acc * (sb[nb][kb] * sa[m][kb]).
template <int MT>
struct SkinnyFp8Policy {
  using Mma = WgmmaE4M3<MT>;
  static constexpr int kBlocks = 1;
  struct Params {
    CUtensorMap sa;  // f32 {M, num_kb}, box {MT, 1}
    CUtensorMap sb;  // f32 {num_kb, N blocks}, box {4, 1}: TMA wants 16-byte aligned boxes
  };
  static constexpr int kWMetaBytes = 128, kXMetaBytes = (MT * 4 + 127) / 128 * 128;
  static constexpr uint32_t kWMetaTx = 16, kXMetaTx = MT * 4;
  __device__ __forceinline__ static void load_wmeta(const Params& pp, void* dst, uint64_t* bar,
                                                    int nb, int kb) {
    tma_load_2d(dst, &pp.sb, bar, kb & ~3, nb);
  }
  __device__ __forceinline__ static void load_xmeta(const Params& pp, void* dst, uint64_t* bar,
                                                    int kb) {
    tma_load_2d(dst, &pp.sa, bar, 0, kb);
  }
  template <int R>
  __device__ __forceinline__ static void promote(float (&total)[R], const float (&acc)[R],
                                                 uint32_t wmeta, uint32_t xmeta, int kb, int,
                                                 int, int col) {
    const float sb = __uint_as_float(lds32(wmeta + 4 * (kb & 3)));
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
      const uint2 v = lds64(xmeta + 4 * (8 * j + col));
      const float s0 = __uint_as_float(v.x) * sb, s1 = __uint_as_float(v.y) * sb;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        total[4 * j + e] = fmaf(acc[4 * j + e], e & 1 ? s1 : s0, total[4 * j + e]);
    }
  }
};

// INT8 W8A8 per block of G (64 or 128) along K (int8_gemm.hpp): per K block
//   total += sx*(sw*dot) + ox*dw (+ (sx*Σqx)*ow with offset weights)
// in the sm_80 kernel's order of operations (sm80_int8_gemm.cuh). Weight meta sw, dw (, ow):
// [kb][Np] f32 in the int8_meta_col order, a {128, kBlocks} box each; token meta sx, ox (f32), Σqx
// (s32): [kb][ld_meta], an {MT, kBlocks} box each. Boxes past the last K block read zeros.
template <int MT, int G, bool kOffset>
struct SkinnyInt8Policy {
  static_assert(G == 64 || G == 128, "K blocks of 64 or 128");
  using Mma = WgmmaS8<MT>;
  static constexpr int kBlocks = 128 / G;
  static constexpr int kWFields = kOffset ? 3 : 2;  // sw, dw (, ow)
  struct Params {
    CUtensorMap sw, dw, ow;   // f32 {Np, n_kblocks}, box {128, kBlocks} (ow: offset weights)
    CUtensorMap sx, ox, sum;  // f32 / f32 / s32 {M, n_kblocks}, box {MT, kBlocks}
  };
  static constexpr int kWFieldBytes = kBlocks * 128 * 4;  // a 128-byte multiple
  static constexpr int kWMetaBytes = kWFields * kWFieldBytes;
  static constexpr uint32_t kWMetaTx = kWMetaBytes;
  static constexpr int kXFieldBytes = (kBlocks * MT * 4 + 127) / 128 * 128;
  static constexpr int kXMetaBytes = 3 * kXFieldBytes;
  static constexpr uint32_t kXMetaTx = 3 * kBlocks * MT * 4;
  __device__ __forceinline__ static void load_wmeta(const Params& pp, void* dst, uint64_t* bar,
                                                    int nb, int stage) {
    uint8_t* d = static_cast<uint8_t*>(dst);
    tma_load_2d(d, &pp.sw, bar, nb * 128, stage * kBlocks);
    tma_load_2d(d + kWFieldBytes, &pp.dw, bar, nb * 128, stage * kBlocks);
    if constexpr (kOffset)
      tma_load_2d(d + 2 * kWFieldBytes, &pp.ow, bar, nb * 128, stage * kBlocks);
  }
  __device__ __forceinline__ static void load_xmeta(const Params& pp, void* dst, uint64_t* bar,
                                                    int stage) {
    uint8_t* d = static_cast<uint8_t*>(dst);
    tma_load_2d(d, &pp.sx, bar, 0, stage * kBlocks);
    tma_load_2d(d + kXFieldBytes, &pp.ox, bar, 0, stage * kBlocks);
    tma_load_2d(d + 2 * kXFieldBytes, &pp.sum, bar, 0, stage * kBlocks);
  }
  template <int R>
  __device__ __forceinline__ static void promote(float (&total)[R], const int32_t (&acc)[R],
                                                 uint32_t wmeta, uint32_t xmeta, int, int b,
                                                 int row, int col) {
    static_assert(R == MT / 2, "accumulators of an m64nMT tile");
    float sw[2], dw[2], ow[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // the tile starts at a multiple of 128 rows: the permutation stays inside it
      const uint32_t at = wmeta + 4 * uint32_t(b * 128 + int(int8_meta_col(row + 8 * h)));
      sw[h] = __uint_as_float(lds32(at));
      dw[h] = __uint_as_float(lds32(at + kWFieldBytes));
      ow[h] = kOffset ? __uint_as_float(lds32(at + 2 * kWFieldBytes)) : 0.f;
    }
    const uint32_t xs = xmeta + 4 * (b * MT + col);
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
      const uint2 sx = lds64(xs + 32 * j), ox = lds64(xs + kXFieldBytes + 32 * j);
      const uint2 sq = lds64(xs + 2 * kXFieldBytes + 32 * j);
      const float a[2] = {__uint_as_float(sx.x), __uint_as_float(sx.y)};
      const float c[2] = {__uint_as_float(ox.x), __uint_as_float(ox.y)};
      const float u[2] = {kOffset ? a[0] * float(int32_t(sq.x)) : 0.f,
                          kOffset ? a[1] * float(int32_t(sq.y)) : 0.f};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1, m = e & 1;
        float v = fmaf(a[m], float(acc[4 * j + e]) * sw[h], total[4 * j + e]);
        v = fmaf(c[m], dw[h], v);
        if constexpr (kOffset) v = fmaf(u[m], ow[h], v);
        total[4 * j + e] = v;
      }
    }
  }
};

}  // namespace mixq::cuda::sm90
