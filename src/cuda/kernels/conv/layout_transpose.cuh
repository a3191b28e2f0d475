// The layout change between NCHW and NHWC images: a batch of [rows][cols] matrices transposed
// into [cols][rows] (NCHW -> NHWC: rows = C, cols = H * W; back: rows = H * W, cols = C). The
// CUDA conv runs an NCHW call's x and y through it to give the call the NHWC kernels (the wgmma
// implicit GEMM reads x through a TMA im2col map, which exists for NHWC only).
//
// One block moves a 32 x 32 tile through shared memory: 32 x 8 threads, each warp reading one
// tile row of 32 consecutive source elements and, after the barrier, writing one tile column as
// 32 consecutive destination elements. Both sides of global memory are thus accessed as whole
// contiguous runs per warp instruction (128 bytes for 4-byte elements, 64 bytes, two full 32-byte
// sectors, for 2-byte ones) where a direct element-by-element transpose would touch 32 sectors
// on one side for 32 useful elements. The transpose happens in shared memory instead, where the
// column read of a tile stored row-major would put all 32 lanes on one bank (rows 32 words
// apart, a 32-way conflict): each tile row is padded so that it is an odd number of 32-bit words
// long (33 words for 4-byte elements, 17 for 2-byte ones), which spreads a column over all 32
// banks. The kernel copies bits (uint16_t / uint32_t), so f16, bf16 and f32 images move exactly.
//
// 16-bit images take image_transpose_pairs_kernel instead: 64 x 64 tiles whose elements move in
// 4-byte pairs where the rows allow it. The 32 x 32 kernel keeps only 8 KB of loads in flight per
// block (256 threads x 4 two-byte loads), which on an H100 moved a batch-32 ResNet image at ~1.1
// TB/s of the ~3 TB/s a stream reaches: the transfer is latency-bound, not bandwidth-bound.
#pragma once

#include <cstdint>

#include "cuda/kernels/common/grid_dependency.cuh"

namespace mixq::cuda::conv {

constexpr int kTransposeTile = 32;  // tile side (elements)
constexpr int kTransposeRows = 8;   // threadIdx.y extent: each thread moves 32 / 8 elements

// dst[b][c][r] = src[b][r][c] for b < batch, r < rows, c < cols. Tiles t = blockIdx.x, +
// gridDim.x, ... (column tiles fastest, then row tiles, then matrices), so any grid covers any
// size; partial tiles at the right and bottom edges are masked.
template <typename T>
__global__ void __launch_bounds__(kTransposeTile * kTransposeRows)
    image_transpose_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t batch,
                           int64_t rows, int64_t cols) {
  // pad to an odd number of 32-bit words per tile row (see the header comment)
  constexpr int kPad = int(4 / sizeof(T));
  static_assert(((kTransposeTile + kPad) * sizeof(T) / 4) % 2 == 1,
                "tile rows must be an odd number of 32-bit words");
  __shared__ T tile[kTransposeTile][kTransposeTile + kPad];
  // Launched with programmatic dependent launch (sm_90), the next kernel of the stream (the GEMM
  // after the input's transpose, nothing after the output's) may start its prologue now: it
  // waits for this grid to complete before it reads what this grid writes. This grid in turn
  // waits for the previous one (the GEMM, before the output's transpose) before reading.
  allow_dependent_launch();
  grid_dependency_wait();
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  const int64_t row_tiles = (rows + kTransposeTile - 1) / kTransposeTile;
  const int64_t col_tiles = (cols + kTransposeTile - 1) / kTransposeTile;
  const int64_t per_matrix = row_tiles * col_tiles;
  const int64_t tiles = batch * per_matrix;
  const int64_t matrix = rows * cols;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t b = t / per_matrix, in = t % per_matrix;
    const int64_t r0 = (in / col_tiles) * kTransposeTile, c0 = (in % col_tiles) * kTransposeTile;
    const T* s = src + b * matrix;
    T* d = dst + b * matrix;
    // a warp reads 32 consecutive elements of source row r0 + i
    const int64_t c = c0 + tx;
#pragma unroll
    for (int i = ty; i < kTransposeTile; i += kTransposeRows) {
      const int64_t r = r0 + i;
      if (r < rows && c < cols) tile[i][tx] = s[r * cols + c];
    }
    __syncthreads();
    // ... and writes 32 consecutive elements of destination row c0 + i (a tile column)
    const int64_t r = r0 + tx;
#pragma unroll
    for (int i = ty; i < kTransposeTile; i += kTransposeRows) {
      const int64_t cc = c0 + i;
      if (cc < cols && r < rows) d[cc * rows + r] = tile[tx][i];
    }
    __syncthreads();  // the tile is refilled by the next iteration
  }
}


// The 16-bit form. A 64 x 64 tile per iteration, 32 x 8 threads. Thread (tx, ty) reads the
// source elements (r, 2 tx) and (r, 2 tx + 1) of the tile's rows r = 2 ty + 16 k and r + 1
// (k = 0..3): 16 elements, as eight 4-byte loads where kPairLoad (cols even and src 4-byte
// aligned: every row then starts 4-byte aligned), else sixteen 2-byte ones, all issued before
// any is used (32 bytes in flight a thread, 8 KB a block). It recombines each 2 x 2 block into two
// words that each hold one source column's two rows (byte_perm), i.e. two consecutive
// destination elements, and parks them in shared memory as tile[column][row pair], a word per
// entry. After the barrier a warp writes one destination row (a source column) as 32 words of
// consecutive row pairs: 128 contiguous bytes, as 4-byte stores where kPairStore (rows even and
// dst 4-byte aligned), else 2-byte ones.
// Banks: a tile row of 32 + 1 words puts word (c, p) on bank (c + p) % 32. The writers of one
// instruction (a warp: one row pair p, columns 2 tx or 2 tx + 1) would put lanes tx and tx + 16 on
// one bank; lanes tx >= 16 therefore write their odd column first, so that the 32 columns of
// each of the two store instructions are 0, 2, .., 30, 33, 35, .., 63 (and the other way round):
// 32 distinct banks. The readers (a column c, row pairs tx) touch banks c + tx: all distinct.
constexpr int kPairTile = 64;     // tile side (16-bit elements)
constexpr int kPairWords = 33;    // words per tile column in shared memory (32 row pairs + 1)

template <bool kPairLoad, bool kPairStore>
__global__ void __launch_bounds__(32 * 8)
    image_transpose_pairs_kernel(const uint16_t* __restrict__ src, uint16_t* __restrict__ dst,
                                 int64_t batch, int64_t rows, int64_t cols) {
  __shared__ uint32_t tile[kPairTile][kPairWords];
  // programmatic dependent launch: as in image_transpose_kernel
  allow_dependent_launch();
  grid_dependency_wait();
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  const int64_t row_tiles = (rows + kPairTile - 1) / kPairTile;
  const int64_t col_tiles = (cols + kPairTile - 1) / kPairTile;
  const int64_t per_matrix = row_tiles * col_tiles;
  const int64_t tiles = batch * per_matrix;
  const int64_t matrix = rows * cols;
  const bool odd_first = tx >= 16;  // see the bank note above
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t b = t / per_matrix, in = t % per_matrix;
    const int64_t r0 = (in / col_tiles) * kPairTile, c0 = (in % col_tiles) * kPairTile;
    const uint16_t* s = src + b * matrix;
    uint16_t* d = dst + b * matrix;
    const int64_t c = c0 + 2 * tx;
    // [k][0]: row 2 ty + 16 k, [k][1]: the next row; each word holds columns c (low half), c + 1
    uint32_t w[4][2];
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t r = r0 + 2 * ty + 16 * k + h;
        const uint16_t* at = s + r * cols + c;
        uint32_t v = 0;
        if (r < rows) {
          if constexpr (kPairLoad) {
            if (c < cols) v = *reinterpret_cast<const uint32_t*>(at);  // c even, cols even: c + 1 < cols
          } else {
            if (c < cols) v = at[0];
            if (c + 1 < cols) v |= uint32_t(at[1]) << 16;
          }
        }
        w[k][h] = v;
      }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int p = ty + 8 * k;  // row pair (rows 2p, 2p + 1 of the tile)
      // column 2 tx: the low halves of the two rows; column 2 tx + 1: the high halves
      const uint32_t even = __byte_perm(w[k][0], w[k][1], 0x5410);
      const uint32_t odd = __byte_perm(w[k][0], w[k][1], 0x7632);
      tile[2 * tx + (odd_first ? 1 : 0)][p] = odd_first ? odd : even;
      tile[2 * tx + (odd_first ? 0 : 1)][p] = odd_first ? even : odd;
    }
    __syncthreads();
    // warp ty writes destination rows c0 + ty + 8 i: row pair tx of each
    const int64_t r = r0 + 2 * tx;
#pragma unroll
    for (int i = 0; i < kPairTile / 8; ++i) {
      const int cc = ty + 8 * i;
      if (c0 + cc >= cols || r >= rows) continue;
      const uint32_t v = tile[cc][tx];
      uint16_t* at = d + (c0 + cc) * rows + r;
      if constexpr (kPairStore) {
        *reinterpret_cast<uint32_t*>(at) = v;  // r even, rows even: r + 1 < rows
      } else {
        at[0] = uint16_t(v & 0xFFFFu);
        if (r + 1 < rows) at[1] = uint16_t(v >> 16);
      }
    }
    __syncthreads();  // the tile is refilled by the next iteration
  }
}

}  // namespace mixq::cuda::conv
