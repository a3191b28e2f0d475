// Promotion policies of the few-token GEMM (sm90_skinny_gemm.cuh): which meta a 128-K stage
// carries for the weight tile and for the tokens, how TMA brings it next to the codes, and how a
// K block's MMA partial sums are folded into the f32 totals. A consumer thread holds the
// accumulators of weight rows `row`, `row + 8` (of the 128-row tile) and tokens 8 j + col + {0, 1}:
// register 4 j + e is row row + 8 (e >> 1), token 8 j + col + (e & 1).
// Policy interface (a policy is a template of the token tile MT and of kXRows, the rows of token
// meta a stage holds): Mma (wgmma wrapper), kBlocks (K blocks per 128-K stage), Params (tensor
// maps), kWMetaBytes / kXMetaBytes (per-stage shared memory, 128-byte multiples) and kWMetaTx /
// kXMetaTx (bytes TMA delivers into them), load_wmeta(pp, dst, bar, nb, stage) or, through a
// weight's own meta descriptors (the grouped form's experts), load_wmeta_from(maps, ...),
// load_xmeta(pp, dst, bar, stage, row0), promote(total, acc, wmeta, xmeta, stage, block, row, col,
// xrow).
// kXRows: MT, or MT + 4 in the grouped form, whose token tile starts at any row: a box of f32 row
// values must start 16-byte aligned (a box at another row faults with an illegal instruction), so
// it loads from the tile's first row rounded down to a multiple of 4 (row0) and the promotion reads
// xrow = first row % 4 rows further on, with 4-byte loads (an odd row breaks the 8-byte pairs).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/kernels/common/int8_params.hpp"  // int8_meta_col
#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/common/sm90_wgmma_ops.cuh"

namespace mixq::cuda::sm90 {

// Two adjacent tokens' meta values: one 8-byte load where the pair is 8-byte aligned (kPairs: the
// tile's first row is the box's), else two 4-byte loads.
template <bool kPairs>
__device__ __forceinline__ uint2 token_pair(uint32_t at) {
  if constexpr (kPairs) return lds64(at);
  else return make_uint2(lds32(at), lds32(at + 4));
}

// FP8 1x128 activations x 128x128 weights (DeepSeek-V3): the 128-row weight tile is one weight
// block, so its scale is one float per K block: total += acc * (sb[nb][kb] * sa[m][kb]).
template <int MT, int kXRows = MT>
struct SkinnyFp8Policy {
  static_assert(kXRows == MT || kXRows == MT + 4, "token meta of the tile, or 4 rows more");
  using Mma = WgmmaE4M3<MT>;
  static constexpr int kBlocks = 1;
  struct Params {
    CUtensorMap sa;  // f32 {M, num_kb}, box {kXRows, 1}
    CUtensorMap sb;  // f32 {num_kb, N blocks}, box {4, 1}: TMA wants 16-byte aligned boxes
  };
  static constexpr int kWMetaBytes = 128, kXMetaBytes = (kXRows * 4 + 127) / 128 * 128;
  static constexpr uint32_t kWMetaTx = 16, kXMetaTx = kXRows * 4;
  // sb: the weight's block-scale descriptor (Params::sb, or an expert's)
  __device__ __forceinline__ static void load_wmeta_from(const CUtensorMap* sb, void* dst,
                                                         uint64_t* bar, int nb, int kb) {
    tma_load_2d(dst, sb, bar, kb & ~3, nb);
  }
  __device__ __forceinline__ static void load_wmeta(const Params& pp, void* dst, uint64_t* bar,
                                                    int nb, int kb) {
    load_wmeta_from(&pp.sb, dst, bar, nb, kb);
  }
  __device__ __forceinline__ static void load_xmeta(const Params& pp, void* dst, uint64_t* bar,
                                                    int kb, int row0) {
    tma_load_2d(dst, &pp.sa, bar, row0, kb);
  }
  template <int R>
  __device__ __forceinline__ static void promote(float (&total)[R], const float (&acc)[R],
                                                 uint32_t wmeta, uint32_t xmeta, int kb, int,
                                                 int, int col, int xrow) {
    const float sb = __uint_as_float(lds32(wmeta + 4 * (kb & 3)));
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
      const uint2 v = token_pair<kXRows == MT>(xmeta + 4 * (8 * j + col + xrow));
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
template <int MT, int G, bool kOffset, int kXRows = MT>
struct SkinnyInt8Policy {
  static_assert(G == 64 || G == 128, "K blocks of 64 or 128");
  static_assert(kXRows == MT || kXRows == MT + 4, "token meta of the tile, or 4 rows more");
  using Mma = WgmmaS8<MT>;
  static constexpr int kBlocks = 128 / G;
  static constexpr int kWFields = kOffset ? 3 : 2;  // sw, dw (, ow)
  struct Params {
    CUtensorMap w[3];         // sw, dw, ow: f32 {Np, n_kblocks}, box {128, kBlocks} (ow: offset weights)
    CUtensorMap sx, ox, sum;  // f32 / f32 / s32 {M, n_kblocks}, box {kXRows, kBlocks}
  };
  static constexpr int kWFieldBytes = kBlocks * 128 * 4;  // a 128-byte multiple
  static constexpr int kWMetaBytes = kWFields * kWFieldBytes;
  static constexpr uint32_t kWMetaTx = kWMetaBytes;
  static constexpr int kXFieldBytes = (kBlocks * kXRows * 4 + 127) / 128 * 128;
  static constexpr int kXMetaBytes = 3 * kXFieldBytes;
  static constexpr uint32_t kXMetaTx = 3 * kBlocks * kXRows * 4;
  // w: the weight's sw, dw (, ow) descriptors, consecutive (Params::w, or an expert's)
  __device__ __forceinline__ static void load_wmeta_from(const CUtensorMap* w, void* dst,
                                                         uint64_t* bar, int nb, int stage) {
    uint8_t* d = static_cast<uint8_t*>(dst);
    tma_load_2d(d, w, bar, nb * 128, stage * kBlocks);
    tma_load_2d(d + kWFieldBytes, w + 1, bar, nb * 128, stage * kBlocks);
    if constexpr (kOffset) tma_load_2d(d + 2 * kWFieldBytes, w + 2, bar, nb * 128, stage * kBlocks);
  }
  __device__ __forceinline__ static void load_wmeta(const Params& pp, void* dst, uint64_t* bar,
                                                    int nb, int stage) {
    load_wmeta_from(pp.w, dst, bar, nb, stage);
  }
  __device__ __forceinline__ static void load_xmeta(const Params& pp, void* dst, uint64_t* bar,
                                                    int stage, int row0) {
    uint8_t* d = static_cast<uint8_t*>(dst);
    tma_load_2d(d, &pp.sx, bar, row0, stage * kBlocks);
    tma_load_2d(d + kXFieldBytes, &pp.ox, bar, row0, stage * kBlocks);
    tma_load_2d(d + 2 * kXFieldBytes, &pp.sum, bar, row0, stage * kBlocks);
  }
  template <int R>
  __device__ __forceinline__ static void promote(float (&total)[R], const int32_t (&acc)[R],
                                                 uint32_t wmeta, uint32_t xmeta, int, int b,
                                                 int row, int col, int xrow) {
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
    const uint32_t xs = xmeta + 4 * (b * kXRows + col + xrow);
    constexpr bool kPairs = kXRows == MT;
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
      const uint2 sx = token_pair<kPairs>(xs + 32 * j);
      const uint2 ox = token_pair<kPairs>(xs + kXFieldBytes + 32 * j);
      const uint2 sq = token_pair<kPairs>(xs + 2 * kXFieldBytes + 32 * j);
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
