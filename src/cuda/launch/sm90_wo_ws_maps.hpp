// The TMA descriptors of a repacked weight for the warp-specialized Hopper weight-only kernel
// (kernels/wo/sm90_wo_ws.cuh): its weight tiles and its group-major pairs. Built per call by the
// plain GEMM's launch (sm90_wo_ws.cu), and once per expert at prepare by the grouped GEMM
// (backend/moe_experts.cpp), whose kernel reads them from global memory.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/kernels/common/wo_layout.hpp"
#include "cuda/kernels/wo/sm90_wo_ws_shape.hpp"
#include "cuda/runtime/tensor_map.hpp"

namespace mixq::cuda {

// codes: [row tile][chunk][tile bytes] as u32; boxes of a stage's cps chunks of 8 row tiles (128
// rows), zero past the last row tile.
inline CUtensorMap ws_weight_map(const void* codes, int bits, int64_t Kp, int64_t N, int cps) {
  const uint64_t chunks = uint64_t(Kp / kChunkK);
  const uint32_t tile_bytes = bits == 4 ? 512u : 1024u;
  const uint64_t n_row_tiles = uint64_t((N + kTileRows - 1) / kTileRows);
  return make_tensor_map_3d(CU_TENSOR_MAP_DATA_TYPE_UINT32, codes, tile_bytes / 4, chunks, n_row_tiles,
                            tile_bytes, chunks * tile_bytes, tile_bytes / 4, uint32_t(cps),
                            uint32_t(ws_detail::kWsRowTiles));
}

// W4A8 activations: X [M][K] e4m3 codes, rows ldx bytes apart, in boxes of one 128-K stage x mt
// tokens (128-byte swizzle, zero past K and M), and their block factors [K blocks][ld_f] (512 s,
// -s sum) f32 pairs (act_quant.hpp), read as 8-byte elements in boxes of ws_a8_factor_box(mt)
// tokens of one block (zero past M).
inline CUtensorMap ws_a8_x_map(const void* x, int64_t ldx, int64_t K, int64_t M, int mt) {
  return make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, x, uint64_t(K), uint64_t(M), uint64_t(ldx),
                            2 * kChunkK, uint32_t(mt), CU_TENSOR_MAP_SWIZZLE_128B);
}
inline CUtensorMap ws_a8_factor_map(const float* factors, int64_t ld_f, int64_t K, int64_t M, int mt) {
  return make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_INT64, factors, uint64_t(M), uint64_t((K + 127) / 128),
                            uint64_t(ld_f) * 8, ws_detail::ws_a8_factor_box(mt), 1, CU_TENSOR_MAP_SWIZZLE_NONE);
}

// Y [M][N] 16-bit, rows ldy elements apart: boxes of 64 columns x y_rows tokens, 128-byte swizzle
// (the TMA-store epilogue's staging tiles' layout).
inline CUtensorMap ws_y_map(void* y, int64_t ldy, int64_t N, int64_t M, int y_rows) {
  return make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT16, y, uint64_t(N), uint64_t(M), uint64_t(ldy) * 2, 64,
                            uint32_t(y_rows), CU_TENSOR_MAP_SWIZZLE_128B);
}

// pairs: [group][ld rows], 4- or 8-byte elements; boxes of 128 rows x the stage's groups.
inline CUtensorMap ws_pair_map(const void* pairs, int64_t ld, int64_t groups, bool pair64, int cps,
                               int group_shift) {
  const int ppc = ws_detail::ws_stage_groups(cps, group_shift);
  return make_tensor_map_2d(pair64 ? CU_TENSOR_MAP_DATA_TYPE_INT64 : CU_TENSOR_MAP_DATA_TYPE_UINT32, pairs,
                            uint64_t(ld), uint64_t(groups), uint64_t(ld) * (pair64 ? 8u : 4u), 128,
                            uint32_t(ppc), CU_TENSOR_MAP_SWIZZLE_NONE);
}

}  // namespace mixq::cuda
