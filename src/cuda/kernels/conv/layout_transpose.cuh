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
// 4-byte pairs where the rows allow it. The 32 x 32 kernel keeps 2 KB of loads in flight a block
// (256 threads x 4 two-byte loads), too few to cover the memory latency: on an H100 it moved a
// [32][64][3136] image (12.8 MB each way) in 27.6 µs, the pair kernel in 14.2 (events around one
// launch after an L2 flush, 1.3 µs of which the events alone; bench/results/cuda_conv.md).
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

// The 16-bit and 8-bit forms (E = uint16_t, uint8_t). A 64 x 64 tile per iteration, 32 x 8
// threads; each thread reads 16 source elements, all issued before any is used (32 bytes in
// flight a thread and 8 KB a block for 16-bit elements), and after the barrier writes the
// destination as pairs of two consecutive elements (two source rows of one source column): a
// warp writes one destination row (a source column) as 32 pairs, 128 contiguous bytes (64 for
// bytes), as one store a pair where kPairStore (rows even and dst aligned to a pair: every
// destination row then starts aligned), else one an element.
// - kPairLoad (16-bit only; cols even and src 4-byte aligned): thread (tx, ty) reads (r, 2 tx)
//   and (r, 2 tx + 1) as one word for rows r = 2 ty + 16 k and r + 1 (k = 0..3), recombines each
//   2 x 2 block into two words that each hold one column's two rows (byte_perm), and parks them
//   as tile[column][row pair]. A tile column of 32 + 1 words puts word (c, p) on bank
//   (c + p) % 32; the writers of one instruction (one row pair, columns 2 tx or 2 tx + 1) would
//   put lanes tx and tx + 16 on one bank, so lanes tx >= 16 write their odd column first: the
//   columns of each store instruction are 0, 2, .., 30, 33, 35, .., 63 (or the other way round),
//   32 distinct banks. The readers (a column c, row pairs tx) touch banks c + tx: all distinct.
// - else (odd cols, e.g. a 7 x 7 image's rows of 49 elements; all 8-bit images): each warp
//   reads a source row's 64 elements as two runs of 32 consecutive loads (lanes tx and 32 + tx)
//   into an element tile whose rows are an odd number of words long ([64][66] halves, [64][68]
//   bytes), and the writers gather their two rows from it (a 2-way bank conflict). For 16-bit
//   elements the word form's strided 2-byte loads (lanes 4 bytes apart, two loads a word) ran
//   ~1.5x slower on an H100 ([8][512][49]: 7.7 against 4.9 µs for this form, events around one
//   launch).
constexpr int kPairTile = 64;   // tile side (elements)
constexpr int kPairWords = 33;  // words per tile column in the word form's tile (32 row pairs + 1)

template <typename E>
struct TransposePair;  // two consecutive destination elements as one store
template <>
struct TransposePair<uint16_t> {
  using type = uint32_t;
};
template <>
struct TransposePair<uint8_t> {
  using type = uint16_t;
};

template <typename E, bool kPairLoad, bool kPairStore>
__global__ void __launch_bounds__(32 * 8)
    image_transpose_pairs_kernel(const E* __restrict__ src, E* __restrict__ dst, int64_t batch,
                                 int64_t rows, int64_t cols) {
  static_assert(!kPairLoad || sizeof(E) == 2, "the word form moves 16-bit elements");
  using Pair = typename TransposePair<E>::type;
  constexpr int kElemPad = int(4 / sizeof(E));  // element tile rows: an odd number of words
  constexpr int kElemRow = kPairTile + kElemPad;
  constexpr int kWords = kPairLoad ? kPairTile * kPairWords : kPairTile * kElemRow * int(sizeof(E)) / 4;
  // word form: [column][row pair] words; element form: [row][column] elements
  __shared__ uint32_t smem[kWords];
  uint32_t(*tile)[kPairWords] = reinterpret_cast<uint32_t(*)[kPairWords]>(smem);
  E(*tile_e)[kElemRow] = reinterpret_cast<E(*)[kElemRow]>(smem);
  // programmatic dependent launch: as in image_transpose_kernel
  allow_dependent_launch();
  grid_dependency_wait();
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  const int64_t row_tiles = (rows + kPairTile - 1) / kPairTile;
  const int64_t col_tiles = (cols + kPairTile - 1) / kPairTile;
  const int64_t per_matrix = row_tiles * col_tiles;
  const int64_t tiles = batch * per_matrix;
  const int64_t matrix = rows * cols;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t b = t / per_matrix, in = t % per_matrix;
    const int64_t r0 = (in / col_tiles) * kPairTile, c0 = (in % col_tiles) * kPairTile;
    const E* s = src + b * matrix;
    E* d = dst + b * matrix;
    if constexpr (kPairLoad) {
      const int64_t c = c0 + 2 * tx;
      // [k][0]: row 2 ty + 16 k, [k][1]: the next row; each word holds columns c (low half), c + 1
      uint32_t w[4][2];
#pragma unroll
      for (int k = 0; k < 4; ++k)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t r = r0 + 2 * ty + 16 * k + h;
          // c even and cols even: c < cols implies c + 1 < cols
          w[k][h] =
              r < rows && c < cols ? *reinterpret_cast<const uint32_t*>(s + r * cols + c) : 0u;
        }
      const bool odd_first = tx >= 16;  // see the bank note above
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int p = ty + 8 * k;  // row pair (rows 2p, 2p + 1 of the tile)
        // column 2 tx: the low halves of the two rows; column 2 tx + 1: the high halves
        const uint32_t even = __byte_perm(w[k][0], w[k][1], 0x5410);
        const uint32_t odd = __byte_perm(w[k][0], w[k][1], 0x7632);
        tile[2 * tx + (odd_first ? 1 : 0)][p] = odd_first ? odd : even;
        tile[2 * tx + (odd_first ? 0 : 1)][p] = odd_first ? even : odd;
      }
    } else {
      E v[8][2];  // rows ty + 8 k, columns tx and 32 + tx
#pragma unroll
      for (int k = 0; k < 8; ++k)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t r = r0 + ty + 8 * k, c = c0 + tx + 32 * h;
          v[k][h] = r < rows && c < cols ? s[r * cols + c] : E(0);
        }
#pragma unroll
      for (int k = 0; k < 8; ++k)
#pragma unroll
        for (int h = 0; h < 2; ++h) tile_e[ty + 8 * k][tx + 32 * h] = v[k][h];
    }
    __syncthreads();
    // warp ty writes destination rows c0 + ty + 8 i: row pair tx of each
    const int64_t r = r0 + 2 * tx;
#pragma unroll
    for (int i = 0; i < kPairTile / 8; ++i) {
      const int cc = ty + 8 * i;
      if (c0 + cc >= cols || r >= rows) continue;
      E* at = d + (c0 + cc) * rows + r;
      if constexpr (kPairLoad) {
        const uint32_t v = tile[cc][tx];
        if constexpr (kPairStore) {
          *reinterpret_cast<uint32_t*>(at) = v;  // r even, rows even: r + 1 < rows
        } else {
          at[0] = E(v & 0xFFFFu);
          if (r + 1 < rows) at[1] = E(v >> 16);
        }
      } else if constexpr (kPairStore) {
        constexpr int kBits = 8 * int(sizeof(E));
        *reinterpret_cast<Pair*>(at) = Pair(Pair(tile_e[2 * tx][cc]) | Pair(tile_e[2 * tx + 1][cc]) << kBits);
      } else {
        at[0] = tile_e[2 * tx][cc];
        if (r + 1 < rows) at[1] = tile_e[2 * tx + 1][cc];
      }
    }
    __syncthreads();  // the tile is refilled by the next iteration
  }
}

}  // namespace mixq::cuda::conv
