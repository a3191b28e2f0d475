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

}  // namespace mixq::cuda::conv
