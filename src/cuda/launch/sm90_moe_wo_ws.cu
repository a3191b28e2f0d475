// Registry of the grouped warp-specialized Hopper weight-only kernel (mixture-of-experts prefill):
// builds the activation descriptor of the call and calls the instance the plan's KernelId names
// (compiled in the generated files of cmake/cuda_instances.cmake; this file compiles no kernel).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

#include "cuda/launch/dispatch_int.hpp"
#include "cuda/launch/moe_kernels.hpp"
#include "cuda/launch/sm90_wo_ws_instances.hpp"
#include "cuda/launch/sm90_wo_ws_maps.hpp"
#include "cuda/runtime/tensor_map.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

void launch_moe_wo_wgmma(const WoStreamParams& p, const MoeWsGroup& g, const MoeWoPlan& plan,
                         cudaStream_t stream) {
  const KernelId& id = plan.id;
  MIXQ_CHECK(id.family == Family::WoWgmma, ErrorCode::Internal,
             "launch_moe_wo_wgmma: plan runs ", id.name());
  if (plan.max_tiles == 0) return;
  // X [rows][K] 16-bit of the whole call; boxes of 64 K x mt tokens from a tile's first row,
  // zero-filled past the last row and K
  // (W4A8: e4m3 codes of 128-K stages and their block factors, sm90_wo_ws_maps.hpp)
  const bool a8 = id.codes == kCodesU4F8;
  MIXQ_CHECK(!a8 || p.x_factors, ErrorCode::Internal, "moe wo wgmma W4A8: no activation block factors");
  const CUtensorMap tm_x = a8 ? ws_a8_x_map(p.x, p.ldx, p.K, p.M, id.tile_m)
                              : make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT16, p.x, uint64_t(p.K), uint64_t(p.M),
                                                   uint64_t(p.ldx) * 2, kChunkK, uint32_t(id.tile_m),
                                                   CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap tm_s = a8 ? ws_a8_factor_map(p.x_factors, p.ld_x_factors, p.K, p.M, id.tile_m) : CUtensorMap{};
  // Y of the whole call (the TMA-store epilogue's rounds wholly inside an expert's rows)
  const CUtensorMap tm_y = plan.sched.y_rows > 0 ? ws_y_map(p.y, p.ldy, p.N, p.M, plan.sched.y_rows) : CUtensorMap{};
  bool launched = false;
  auto with_type = [&](auto t) {
    using T = typename decltype(t)::type;
    dispatch_int<16, 64, 128, 192, 256>(id.tile_m, [&](auto mt) {
      dispatch_int<kCodesU4, kCodesU8, kCodesE4M3, kCodesU4F8>(id.codes, [&](auto codes) {
        dispatch_int<0, 1, 2>(int(id.pairs), [&](auto pp) {
          dispatch_int<1, 2>(id.ctas, [&](auto ctas) {
            dispatch_int<0, 1>(int(id.fold), [&](auto fold) {
              constexpr sm90::PairPath PP = sm90::PairPath(decltype(pp)::value);
              constexpr bool kFold = decltype(fold)::value == 1;
              constexpr ws_detail::WsShape kShape = ws_shape_of(decltype(ctas)::value, false);
              constexpr int MT = decltype(mt)::value, CODES = decltype(codes)::value;
              if constexpr (moe_ws_variant_exists(ws_act_of<T>(), MT, CODES, PP, kShape, kFold)) {
                launch_moe_ws_kernel<T, MT, CODES, PP, kShape, kFold>(p, tm_x, tm_s, tm_y,
                                                                      plan.sched, g, stream);
                launched = true;
              }
            });
          });
        });
      });
    });
  };
  if (id.act == 0) with_type(TypeTag<half>{});
  else if (id.act == 1) with_type(TypeTag<__nv_bfloat16>{});
  else if (id.act == 3) with_type(TypeTag<__nv_fp8_e4m3>{});
  MIXQ_CHECK(launched, ErrorCode::Internal, "moe wo wgmma: no instance of ", id.name());
}

}  // namespace mixq::cuda
