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
// float per (128-row weight block, K block): a 4-float box per stage (16 bytes is TMA's minimum
// and its alignment).
// A 128-wide N tile lies inside one weight block, so one sb serves the whole tile.
struct Fp8BlockScaledPolicy {
  template <int N>
  using Mma = WgmmaE4M3<N>;
  struct Params {
    CUtensorMap sa;  // f32 {M, num_kb}, box {128, 1}
    CUtensorMap sb;  // f32 {num_kb, N blocks}, box {4, 1}
  };
  static constexpr int kAMetaBytes = 128 * 4;
  static constexpr int kBMetaBytes = 128;  // 16 used; TMA destinations want 128-byte alignment
  static constexpr uint32_t kMetaTxBytes = 128 * 4 + 16;

  __device__ __forceinline__ static void load_meta(const Params& pp, void* a_meta, void* b_meta,
                                                   uint64_t* bar, int m0, int n0, int kb) {
    tma_load_2d(a_meta, &pp.sa, bar, m0, kb);
    // The box's first element must be 16-byte aligned in global memory (kb = 1 faults with an
    // illegal instruction): load the aligned group of four K blocks, read() picks kb % 4.
    tma_load_2d(b_meta, &pp.sb, bar, kb & ~3, n0 / 128);
  }
  struct Scale {
    float lo, hi;  // rows `row` and `row + 8`
  };
  __device__ __forceinline__ static Scale read(const void* a_meta, const void* b_meta, int row,
                                               int /*col*/, int kb) {
    const float* sa = static_cast<const float*>(a_meta);
    const float sb = static_cast<const float*>(b_meta)[kb & 3];
    return {sa[row] * sb, sa[row + 8] * sb};
  }
  // wgmma accumulator layout (m64nN): registers 4j, 4j+1 hold row `row`, 4j+2, 4j+3 row `row+8`.
  template <int R>
  __device__ __forceinline__ static void promote(float (&total)[R], const float (&acc)[R],
                                                 Scale s) {
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
      total[4 * j + 0] = fmaf(acc[4 * j + 0], s.lo, total[4 * j + 0]);
      total[4 * j + 1] = fmaf(acc[4 * j + 1], s.lo, total[4 * j + 1]);
      total[4 * j + 2] = fmaf(acc[4 * j + 2], s.hi, total[4 * j + 2]);
      total[4 * j + 3] = fmaf(acc[4 * j + 3], s.hi, total[4 * j + 3]);
    }
  }
};

}  // namespace mixq::cuda::sm90
