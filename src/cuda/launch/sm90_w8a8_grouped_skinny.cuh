// The few-token INT8 W8A8 GEMM's grouped form (kernels/w8a8/sm90_skinny_grouped.cuh with
// SkinnyInt8Policy) for one K block G: the INT8 experts at decode shares, through each expert's
// descriptors 0 (codes, 128 K x 128 rows) and kSm90Int8SkinnyMetaMap.. (sw, dw, ow). Included by
// sm90_w8a8_grouped_skinny_g{64,128}.cu, so the configurations compile in parallel.
#pragma once

#include "cuda/kernels/w8a8/sm90_skinny_policies.cuh"
#include "cuda/launch/sm90_skinny_launch.cuh"
#include "cuda/launch/sm90_w8a8_grouped.hpp"
#include "cuda/runtime/tensor_map.hpp"

namespace mixq::cuda {

template <int MT, int G, bool kOffset>
void launch_i8_grouped_skinny_mt(const Sm90Int8GroupedArgs& a, const SkinnyGroupedWork& w,
                                 cudaStream_t stream) {
  using Policy = sm90::SkinnyInt8Policy<MT, G, kOffset, MT + 4>;
  const BlockGroupedCall& c = a.call;
  const uint64_t rows = uint64_t(c.rows), nkb = uint64_t((c.K + G - 1) / G);
  const CUtensorMap tm_x = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.a, uint64_t(c.K), rows,
                                              uint64_t(a.lda), 128, MT, CU_TENSOR_MAP_SWIZZLE_128B);
  // the row values: MT + 4 rows from the tile's first row rounded down to a multiple of 4
  const auto row_map = [&](const void* base, CUtensorMapDataType type) {
    return make_tensor_map_2d(type, base, rows, nkb, uint64_t(a.ld_meta) * 4, MT + 4,
                              uint32_t(Policy::kBlocks), CU_TENSOR_MAP_SWIZZLE_NONE);
  };
  typename Policy::Params pp{};
  pp.sx = row_map(a.sx, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  pp.ox = row_map(a.ox, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  pp.sum = kOffset ? row_map(a.sumx, CU_TENSOR_MAP_DATA_TYPE_INT32) : pp.sx;  // read with offsets only
  const sm90::SkinnyParams p =
      skinny_grouped_params(c, w, kSm90Int8ExpertMaps, 0, kSm90Int8SkinnyMetaMap);
  launch_skinny_grouped_kernel<Policy, MT>(tm_x, pp, p, c, stream, sm90_int8_grouped_skinny_name(MT));
}

template <int G, bool kOffset>
void launch_i8_grouped_skinny(const Sm90Int8GroupedArgs& a, const SkinnyGroupedWork& w,
                              cudaStream_t stream) {
  if (w.mt == 16) launch_i8_grouped_skinny_mt<16, G, kOffset>(a, w, stream);
  else if (w.mt == 32) launch_i8_grouped_skinny_mt<32, G, kOffset>(a, w, stream);
  else launch_i8_grouped_skinny_mt<64, G, kOffset>(a, w, stream);
}

}  // namespace mixq::cuda
