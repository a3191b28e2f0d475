// Per-K-block promotion policies of the Hopper block-scaled GEMM (sm90_block_gemm.cuh): what
// metadata a K block carries, how TMA brings it next to the codes, and how the block's partial
// sum (the wgmma accumulator) is folded into the f32 running total.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/common/sm90_wgmma_ops.cuh"

namespace mixq::cuda::sm90 {

// FP8 1x128 activations x 128x128 weights (DeepSeek-V3):
//   total[m][n] += dot_kb(xq[m], wq[n]) * sa[m][kb] * sb[n / 128][kb]
// sa is one float per (row, K block), TMA-loaded per stage for the tile's 128 rows; sb is one
// float per (128-row weight block, K block). An N tile of BN columns starts at a multiple of BN, so
// at most 128 - gcd(BN, 128) columns into a weight block: with BN <= 128 + gcd(BN, 128) (64, 128,
// 160, 192; the launcher runs 128 and 192) it touches at most two weight blocks, and each stage loads a {4 K blocks} x {2 weight
// blocks} box of sb (a box's first element must be 16-byte aligned: kb = 1 faults with an illegal
// instruction, hence the aligned group of four K blocks; read() picks kb % 4).
// kARows: rows of sa per stage. 128 or 256 (the tile's rows from m0, a multiple of the tile
// height); the grouped GEMM's
// tiles start at any row of the call (an expert's first row), and a box whose first element is
// not 16-byte aligned faults the same way, so its policy (kARows = 132) loads the 132 rows from
// m0 rounded down to a multiple of 4, and the skeleton reads rows m0 % 4 further on
// (meta_row_shift).
template <int BN, int kARows = 128>
struct Fp8BlockScaledPolicy {
  // gcd(n, 128) for n a multiple of 8
  static constexpr int gcd128(int n) {
    return n % 128 == 0 ? 128 : n % 64 == 0 ? 64 : n % 32 == 0 ? 32 : n % 16 == 0 ? 16 : 8;
  }
  static_assert(BN % 8 == 0 && BN <= 128 + gcd128(BN),
                "an N tile must span at most two weight blocks");
  // BN divides 128: every tile lies inside one weight block (no second scale, no split).
  static constexpr bool kOneBlock = 128 % BN == 0;
  template <int N>
  using Mma = WgmmaE4M3<N>;
  static_assert(kARows == 128 || kARows == 256 || kARows == 132,
                "the tile's rows (128 or 256), or 4 more (any first row)");
  struct Params {
    CUtensorMap sa;  // f32 {M, num_kb}, box {kARows, 1}
    CUtensorMap sb;  // f32 {num_kb, N blocks}, box {4, kSbRows}
  };
  static constexpr int kAMetaBytes = (kARows * 4 + 127) / 128 * 128;
  static constexpr int kBMetaBytes = 128;  // 32 used; TMA destinations want 128-byte alignment
  // The sb box is {4, 1} (16 bytes) when the tile spans one weight block (kOneBlock) and {4, 2}
  // otherwise; the stage's transaction count must equal the bytes TMA delivers, or the full
  // barrier never completes (a hang: the 128-wide launcher once used box {4, 1} with 32 here).
  static constexpr int kSbRows = kOneBlock ? 1 : 2;
  static constexpr uint32_t kMetaTxBytes = kARows * 4 + 16 * kSbRows;

  __device__ __forceinline__ static void load_meta(const Params& pp, void* a_meta, void* b_meta,
                                                   uint64_t* bar, int m0, int n0, int kb) {
    tma_load_2d(a_meta, &pp.sa, bar, m0, kb);
    tma_load_2d(b_meta, &pp.sb, bar, kb & ~3, n0 / 128);
  }
  // The grouped GEMM: sa from the aligned row below m0, sb through the unit's expert's descriptor
  // (the same box as pp.sb's).
  __device__ __forceinline__ static void load_meta_expert(const Params& pp, void* a_meta,
                                                          void* b_meta, uint64_t* bar, int m0,
                                                          int n0, int kb, const CUtensorMap* sb) {
    static_assert(kARows == 132, "the grouped GEMM's tiles start at any row");
    tma_load_2d(a_meta, &pp.sa, bar, m0 & ~3, kb);
    tma_load_2d(b_meta, sb, bar, kb & ~3, n0 / 128);
  }
  struct Scale {
    float lo0, hi0, lo1, hi1;  // rows `row`, `row + 8` x first / second weight block
    int split;                 // first accumulator column group (of 8) in the second block
  };
  static constexpr int kNoSplit = BN / 8;  // split past the last column group
  __device__ __forceinline__ static Scale read(const void* a_meta, const void* b_meta, int row,
                                               int n0, int kb, int /*half: one block a stage*/) {
    // ld.shared by 32-bit address: through the generic pointers these were generic LD.E loads
    // (the metadata slots sit in a re-aligned dynamic buffer), slower and on the long scoreboard.
    const uint32_t sa = smem_u32(a_meta), sb = smem_u32(b_meta) + 4 * (kb & 3);
    const float lo = __uint_as_float(lds32(sa + 4 * row));
    const float hi = __uint_as_float(lds32(sa + 4 * (row + 8)));
    const float sb0 = __uint_as_float(lds32(sb));
    if constexpr (kOneBlock) {
      return {lo * sb0, hi * sb0, 0.f, 0.f, kNoSplit};
    } else {
      const float sb1 = __uint_as_float(lds32(sb + 16));
      return {lo * sb0, hi * sb0, lo * sb1, hi * sb1, (128 - n0 % 128) / 8};
    }
  }
  // wgmma accumulator layout (m64nN): registers 4j, 4j+1 hold row `row`, 4j+2, 4j+3 row `row+8`,
  // columns 8j + 2 (lane % 4) + {0, 1}. Column groups j < kSplit take the first block's scales.
  template <int kSplit, int R>
  __device__ __forceinline__ static void promote_split(float (&total)[R], const float (&acc)[R],
                                                       const Scale& s) {
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
      const float lo = j < kSplit ? s.lo0 : s.lo1, hi = j < kSplit ? s.hi0 : s.hi1;
      total[4 * j + 0] = fmaf(acc[4 * j + 0], lo, total[4 * j + 0]);
      total[4 * j + 1] = fmaf(acc[4 * j + 1], lo, total[4 * j + 1]);
      total[4 * j + 2] = fmaf(acc[4 * j + 2], hi, total[4 * j + 2]);
      total[4 * j + 3] = fmaf(acc[4 * j + 3], hi, total[4 * j + 3]);
    }
  }
  // The split is constant over a tile but only known at run time: one uniform branch per K block
  // to a straight-line FFMA sequence per possible split (tiles start kOffset = 0, g, 2g, ... into a
  // weight block, g = gcd(BN, 128)), rather than a select per column group.
  template <int kOffset, int R>
  __device__ __forceinline__ static void promote_at(float (&total)[R], const float (&acc)[R],
                                                    const Scale& s) {
    if constexpr (kOffset + gcd128(BN) >= 128) {
      promote_split<(128 - kOffset) / 8>(total, acc, s);
    } else {
      if (s.split == (128 - kOffset) / 8) promote_split<(128 - kOffset) / 8>(total, acc, s);
      else promote_at<kOffset + gcd128(BN)>(total, acc, s);
    }
  }
  template <int S, int R>
  __device__ __forceinline__ static void promote(float (&totals)[S][R], const float (&accs)[S][R],
                                                 Scale s) {
    static_assert(S == 1, "read() gives the scales of rows row, row + 8: one m64 sub-tile");
    if constexpr (kOneBlock) promote_split<kNoSplit>(totals[0], accs[0], s);
    else promote_at<0>(totals[0], accs[0], s);
  }
};

}  // namespace mixq::cuda::sm90
