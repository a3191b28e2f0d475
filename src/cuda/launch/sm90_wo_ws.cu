// Registry of the warp-specialized Hopper weight-only kernel: builds the TMA descriptors the plan's
// schedule asks for and calls the one instance the plan's KernelId names (the instances are
// compiled in their own files; this file compiles no kernel).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

#include "cuda/launch/dispatch_int.hpp"
#include "cuda/launch/sm90_wo_ws_instances.hpp"
#include "cuda/launch/sm90_wo_ws_maps.hpp"
#include "cuda/launch/wo_wgmma.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/tensor_map.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

using ws_detail::WsShape;
using sm90::PairPath;

void launch_instance(const KernelId& id, const WoStreamParams& p, const WsMaps& tm, const StreamKSchedule& s,
                     bool fixup, cudaStream_t stream) {
  bool launched = false;
  auto with_type = [&](auto t) {
    using T = typename decltype(t)::type;
    dispatch_int<16, 32, 64, 128, 256>(id.tile_m, [&](auto mt) {
      dispatch_int<kCodesU4, kCodesU8, kCodesE4M3, kCodesU4F8>(id.codes, [&](auto codes) {
        dispatch_int<0, 1, 2>(int(id.pairs), [&](auto pp) {
          dispatch_int<1, 2>(id.ctas, [&](auto ctas) {
            dispatch_int<0, 1>(int(id.wide), [&](auto wide) {
              dispatch_int<0, 1>(int(id.fold), [&](auto fold) {
                constexpr PairPath PP = PairPath(decltype(pp)::value);
                constexpr bool kFold = decltype(fold)::value == 1;
                constexpr WsShape kShape =
                    ws_shape_of(decltype(ctas)::value, decltype(wide)::value == 1);
                constexpr int MT = decltype(mt)::value, CODES = decltype(codes)::value;
                if constexpr (ws_variant_exists(ws_act_of<T>(), MT, CODES, PP, kShape, kFold)) {
                  launch_ws_kernel<T, MT, CODES, PP, kShape, kFold>(p, tm, s, fixup, stream);
                  launched = true;
                }
              });
            });
          });
        });
      });
    });
  };
  if (id.act == 0) with_type(TypeTag<half>{});
  else if (id.act == 1) with_type(TypeTag<__nv_bfloat16>{});
  else if (id.act == 3) with_type(TypeTag<__nv_fp8_e4m3>{});
  MIXQ_CHECK(launched, ErrorCode::Internal, "wo wgmma: no instance of ", id.name());
}

}  // namespace

void launch_wo_wgmma(const WoStreamParams& p, const WoPlan& plan, cudaStream_t stream) {
  const KernelId& id = plan.id;
  const StreamKSchedule& s = plan.sched;
  MIXQ_CHECK(id.family == Family::WoWgmma, ErrorCode::Internal, "launch_wo_wgmma: plan runs ", id.name());
  MIXQ_CHECK(p.group_shift >= 4, ErrorCode::Internal, "wo wgmma: groups of at least 16");
  MIXQ_CHECK(p.partial && p.tickets, ErrorCode::Internal, "wo wgmma: no stream-K workspace");
  MIXQ_CHECK(p.pairs_gm && p.pairs_gm_ld % 128 == 0 && p.pairs_gm_ld >= p.N, ErrorCode::Internal,
             "wo wgmma: needs the group-major pairs");
  const int bits = id.codes == kCodesU4 || id.codes == kCodesU4F8 ? 4 : 8;
  const int mt = id.tile_m, cps = plan.chunks_per_stage;
  WsMaps tm{};
  if (id.codes == kCodesU4F8) {  // W4A8: e4m3 codes and their block factors (quantized per call)
    MIXQ_CHECK(p.x_factors && p.x_shift == 0 && !p.conv_on && cps == 2, ErrorCode::Internal,
               "wo wgmma W4A8: needs the activations' block factors, whole groups and 128-K stages");
    tm.x = ws_a8_x_map(p.x, p.ldx, p.K, p.M, mt);
    tm.s = ws_a8_factor_map(p.x_factors, p.ld_x_factors, p.K, p.M, mt);
  } else if (p.conv_on) {
    // an NHWC image: boxes of mt output pixels x 64 channels of one tap (the same swizzled
    // [mt][64] tile as a row-major X's), zeros in the padding, past the last image and past Ci
    // (a weight whose taps were padded to Ck channels)
    const Im2colConv& cv = p.conv;
    MIXQ_CHECK(cv.Ck > 0 && im2col_taps_fit(cv, kChunkK, p.K) && p.x_shift == 0,
               ErrorCode::Internal, "wo wgmma conv: columns per tap (", cv.Ck, ") must be Ci (",
               cv.Ci, ") rounded up to a multiple of ", kChunkK, ", K (", p.K,
               ") Kh Kw times that");
    tm.x = make_tensor_map_im2col_nhwc(p.x, cv, kChunkK, uint32_t(mt), CU_TENSOR_MAP_SWIZZLE_128B);
  } else {
    // X [M][K - x_shift] 16-bit, rows ldx apart; boxes of 64 K x mt tokens, zero-filled outside X
    // (past K and M, and left of column 0 for a shard's leading x_shift columns).
    tm.x = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT16, p.x, uint64_t(p.K - p.x_shift), uint64_t(p.M),
                              uint64_t(p.ldx) * 2, kChunkK, uint32_t(mt), CU_TENSOR_MAP_SWIZZLE_128B);
  }
  tm.w = ws_weight_map(p.codes, bits, p.Kp, p.N, cps);
  // the bf16 integer-zero path reads its packed copy of the pairs
  const bool bf16_zero = id.pairs == PairKind::Bf16Zero;
  MIXQ_CHECK(!bf16_zero || p.pairs_gm_bz, ErrorCode::Internal, "wo wgmma: no packed bf16 pairs");
  tm.p = ws_pair_map(bf16_zero ? p.pairs_gm_bz : p.pairs_gm, p.pairs_gm_ld, p.groups, p.pair_f32 && !bf16_zero,
                     cps, p.group_shift);
  if (s.y_rows > 0) tm.y = ws_y_map(p.y, p.ldy, p.N, p.M, s.y_rows);
  launch_instance(id, p, tm, s, plan.fixup, stream);
}

}  // namespace mixq::cuda
