// Per-K-block promotion policies of the Hopper block-scaled GEMM (sm90_block_gemm.cuh): what
// metadata a K block carries, how TMA brings it next to the codes, and how the block's partial
// sum (the wgmma accumulator) is folded into the f32 running total.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/kernels/sm90_sync.cuh"
#include "cuda/kernels/sm90_wgmma_ops.cuh"

namespace mixq::cuda::sm90 {

// FP8 1x128 activations x 128x128 weights (DeepSeek-V3):
//   total[m][n] += dot_kb(xq[m], wq[n]) * sa[m][kb] * sb[n / 128][kb]
// sa is one float per (row, K block), TMA-loaded per stage for the tile's 128 rows; sb is one
// float per (128-row weight block, K block). An N tile of BN <= 192 columns starting at a
// multiple of 64 touches at most two weight blocks, so each stage loads a {4 K blocks} x {2 weight
// blocks} box of sb (a box's first element must be 16-byte aligned: kb = 1 faults with an illegal
// instruction, hence the aligned group of four K blocks; read() picks kb % 4).
template <int BN>
struct Fp8BlockScaledPolicy {
  static_assert(BN % 64 == 0 && BN <= 192, "an N tile must span at most two weight blocks");
  template <int N>
  using Mma = WgmmaE4M3<N>;
  struct Params {
    CUtensorMap sa;  // f32 {M, num_kb}, box {128, 1}
    CUtensorMap sb;  // f32 {num_kb, N blocks}, box {4, kSbRows}
  };
  static constexpr int kAMetaBytes = 128 * 4;
  static constexpr int kBMetaBytes = 128;  // 32 used; TMA destinations want 128-byte alignment
  // The sb box is {4, 1} (16 bytes) when the tile spans one weight block (BN <= 128) and {4, 2}
  // otherwise; the stage's transaction count must equal the bytes TMA delivers, or the full
  // barrier never completes (a hang: the 128-wide launcher once used box {4, 1} with 32 here).
  static constexpr int kSbRows = BN > 128 ? 2 : 1;
  static constexpr uint32_t kMetaTxBytes = 128 * 4 + 16 * kSbRows;

  __device__ __forceinline__ static void load_meta(const Params& pp, void* a_meta, void* b_meta,
                                                   uint64_t* bar, int m0, int n0, int kb) {
    tma_load_2d(a_meta, &pp.sa, bar, m0, kb);
    tma_load_2d(b_meta, &pp.sb, bar, kb & ~3, n0 / 128);
  }
  struct Scale {
    float lo0, hi0, lo1, hi1;  // rows `row`, `row + 8` x first / second weight block
    int split;                 // first accumulator column group (of 8) in the second block
  };
  __device__ __forceinline__ static Scale read(const void* a_meta, const void* b_meta, int row,
                                               int n0, int kb) {
    const float* sa = static_cast<const float*>(a_meta);
    const float* sb = static_cast<const float*>(b_meta);
    const float lo = sa[row], hi = sa[row + 8], sb0 = sb[kb & 3], sb1 = sb[4 + (kb & 3)];
    return {lo * sb0, hi * sb0, lo * sb1, hi * sb1, (128 - n0 % 128) / 8};
  }
  // wgmma accumulator layout (m64nN): registers 4j, 4j+1 hold row `row`, 4j+2, 4j+3 row `row+8`,
  // columns 8j + 2 (lane % 4) + {0, 1}.
  template <int S, int R>
  __device__ __forceinline__ static void promote(float (&totals)[S][R], const float (&accs)[S][R],
                                                 Scale s) {
    static_assert(S == 1, "read() gives the scales of rows row, row + 8: one m64 sub-tile");
    float(&total)[R] = totals[0];
    const float(&acc)[R] = accs[0];
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
      float lo = s.lo0, hi = s.hi0;
      if (BN > 64 && j >= s.split) {
        lo = s.lo1;
        hi = s.hi1;
      }
      total[4 * j + 0] = fmaf(acc[4 * j + 0], lo, total[4 * j + 0]);
      total[4 * j + 1] = fmaf(acc[4 * j + 1], lo, total[4 * j + 1]);
      total[4 * j + 2] = fmaf(acc[4 * j + 2], hi, total[4 * j + 2]);
      total[4 * j + 3] = fmaf(acc[4 * j + 3], hi, total[4 * j + 3]);
    }
  }
};

}  // namespace mixq::cuda::sm90
