// The instances of the warp-specialized Hopper weight-only kernel: which (activation type, token
// tile, code kind, pair path, shape, fold) combinations exist, and the declaration of their
// launchers (defined in the generated instance files, cmake/cuda_instances.cmake). The registry
// (sm90_wo_ws.cu) calls them by the plan's KernelId without compiling any kernel itself.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "cuda/kernels/common/sm90_pair_path.hpp"
#include "cuda/kernels/common/stream_k.hpp"
#include "cuda/kernels/common/wo_layout.hpp"
#include "cuda/kernels/common/wo_params.hpp"
#include "cuda/kernels/moe/moe_params.hpp"
#include "cuda/kernels/wo/sm90_wo_ws_shape.hpp"

namespace mixq::cuda {

// The kernel's TMA descriptors: activations, weight tiles, group-major pairs, and the output of
// the TMA-store epilogue (built only where it runs).
// W4A8: s, the activations' block factors.
struct WsMaps {
  CUtensorMap x, w, p, y, s;
};

// The activation kind of an instance's type: 0 f16, 1 bf16, 3 e4m3 (W4A8; KernelId::act).
template <typename T>
constexpr int ws_act_of() {
  return std::is_same_v<T, half> ? 0 : std::is_same_v<T, __nv_bfloat16> ? 1 : 3;
}

// The shape of a plan's instance: its CTAs per SM and, at token tile 128, its stage depth in K.
constexpr ws_detail::WsShape ws_shape_of(int ctas, bool wide) {
  return ctas == 2 ? ws_detail::WsShape::TwoCtas
         : wide    ? ws_detail::WsShape::OneCtaWide
                   : ws_detail::WsShape::OneCta;
}

// Which variants are built. Two CTAs per SM only at token tiles of 16 and 32; 128-K stages at
// token tile 128 only, for 16-bit activations without the fold (the plain kernel); the bf16
// integer-zero path decodes bf16 int4 / int8 only; the Half path is f16's. The fold (scale after
// the MMA) on the f32 path up to mt = 64 except 32 (not bf16 x 8-bit codes), and on the f16x2
// path for int4 at mt = 16 (docs/decisions/wo-wgmma-fold-and-bf16-path.md). W4A8 (act 3, u4f8
// codes only): the fold on f32 pairs, one CTA, token tiles 16, 64, 128 (docs/decisions/w4a8.md).
constexpr bool ws_variant_exists(int act, int mt, int codes, sm90::PairPath pp,
                                 ws_detail::WsShape shape, bool fold) {
  const bool two_ctas = shape == ws_detail::WsShape::TwoCtas;
  if (shape == ws_detail::WsShape::OneCtaWide && (mt != 128 || act == 3 || fold)) return false;
  if ((act == 3) != (codes == kCodesU4F8)) return false;
  if (act == 3) return (mt == 16 || mt == 64 || mt == 128) && !two_ctas && fold && pp == sm90::PairPath::F32;
  const bool bf16 = act == 1;
  if (two_ctas && mt > 32) return false;
  if (pp == sm90::PairPath::Half && bf16) return false;
  if (pp == sm90::PairPath::Bf16Zero && (!bf16 || (codes != kCodesU4 && codes != kCodesU8))) return false;
  if (!fold) return true;
  const bool foldable = pp == sm90::PairPath::F32 && mt <= 64 && mt != 32 && !(bf16 && codes != kCodesU4);
  const bool foldable_half = pp == sm90::PairPath::Half && mt == 16 && codes == kCodesU4;
  return foldable || foldable_half;
}

template <typename T, int MT, int CODES, sm90::PairPath PP, ws_detail::WsShape SHAPE, bool FOLD>
void launch_ws_kernel(const WoStreamParams& p, const WsMaps& tm, const StreamKSchedule& sch, bool fixup,
                      cudaStream_t stream);

// The grouped (mixture-of-experts) variants: the plain kernel's at token tiles of 16 (one or two
// CTAs), 64, 128 and 256, and 192 (an expert of ~100-160 rows in one tile; docs/decisions/
// moe-stacked-experts.md).
constexpr bool moe_ws_variant_exists(int act, int mt, int codes, sm90::PairPath pp,
                                     ws_detail::WsShape shape, bool fold) {
  return (mt == 16 || mt == 64 || mt == 128 || mt == 192 || mt == 256) &&
         shape != ws_detail::WsShape::OneCtaWide &&
         ws_variant_exists(act, mt, codes, pp, shape, fold);
}

// tm_x: X [rows][K] of the whole call (tm_s: its W4A8 block factors), tm_y: Y [rows][N] (read where
// sch.y_rows > 0); the experts' weight and pair descriptors are in g.maps.
template <typename T, int MT, int CODES, sm90::PairPath PP, ws_detail::WsShape SHAPE, bool FOLD>
void launch_moe_ws_kernel(const WoStreamParams& p, const CUtensorMap& tm_x, const CUtensorMap& tm_s,
                          const CUtensorMap& tm_y, const StreamKSchedule& sch, const MoeWsGroup& g,
                          cudaStream_t stream);

}  // namespace mixq::cuda
