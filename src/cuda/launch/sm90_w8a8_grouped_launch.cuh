// The launch of one configuration of the grouped INT8 W8A8 block GEMM (K block G, offset weights):
// the call's tensor maps (codes, the row values' boxes of 132 rows) and the persistent block GEMM in
// its grouped form. Included by sm90_w8a8_grouped_g{64,128}.cu, so the configurations compile in
// parallel.
#pragma once

#include "cuda/kernels/w8a8/sm90_w8a8_policy.cuh"
#include "cuda/launch/sm90_block_gemm_launch.cuh"
#include "cuda/launch/sm90_w8a8_grouped.hpp"
#include "cuda/runtime/tensor_map.hpp"

namespace mixq::cuda {

// 128 x 128 tiles over a 6-stage ring, single CTAs (a pair's two token tiles may belong to
// different experts), two accumulator sets: the plain kernel's sm90_i8_128x128 configuration; the
// row values' boxes 4 rows taller (tiles start at any row, sm90_w8a8_policy.cuh).
template <int G>
struct Int8GroupedTile {
  static constexpr int kBN = kSm90Int8GroupedTileN, kStages = 6, kARows = kSm90Int8GroupedTileM + 4;
  template <bool kOffset>
  using Policy = sm90::Int8BlockPolicy<kBN, kOffset, kSm90Int8GroupedTileM, G, kARows>;
  template <bool kOffset>
  using Shape = sm90::BlockGemmShape<kBN, kStages, Policy<kOffset>, 1>;
};

template <bool kOffset, int G>
void launch_w8a8_grouped(const Sm90Int8GroupedArgs& a, cudaStream_t stream) {
  using Tile = Int8GroupedTile<G>;
  using Policy = typename Tile::template Policy<kOffset>;
  using Shape = typename Tile::template Shape<kOffset>;
  const BlockGroupedCall& c = a.call;
  const uint64_t rows = uint64_t(c.rows), nkb = uint64_t((c.K + G - 1) / G);
  const CUtensorMap tm_a = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.a, uint64_t(c.K), rows,
                                              uint64_t(a.lda), 128, Shape::kBM,
                                              CU_TENSOR_MAP_SWIZZLE_128B);
  typename Policy::Params pp{};
  const uint64_t row_pitch = uint64_t(a.ld_meta) * 4;
  const auto row_map = [&](const void* base, CUtensorMapDataType type, uint32_t kbs) {
    return make_tensor_map_2d(type, base, rows, nkb, row_pitch, Tile::kARows, kbs,
                              CU_TENSOR_MAP_SWIZZLE_NONE);
  };
  pp.sx = row_map(a.sx, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, uint32_t(Policy::kBlocks));
  pp.ox8 = row_map(a.ox, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, uint32_t(kInt8Rank1Blocks));
  pp.sx8 = kOffset ? row_map(a.sx, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, uint32_t(kInt8Rank1Blocks)) : pp.ox8;
  pp.sumx8 = kOffset ? row_map(a.sumx, CU_TENSOR_MAP_DATA_TYPE_INT32, uint32_t(kInt8Rank1Blocks)) : pp.ox8;
  pp.r1_np = int(a.Np);
  // 128-K stages; descriptors per expert: codes, sw, the rank-1 planes
  const sm90::BlockGemmParams p = block_grouped_params(c, int((c.K + 127) / 128), Shape::kBM, Tile::kBN,
                                                       kSm90Int8ExpertMaps, 1, 2);
  launch_block_gemm<Tile::kBN, Tile::kStages, Policy, 1, 1, 2, true>(
      tm_a, CUtensorMap{}, pp, p, c.num_sms, c.y_tma, stream, sm90_int8_grouped_name(), c.pdl);
}

}  // namespace mixq::cuda
