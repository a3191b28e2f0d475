// The launch of one configuration of the Hopper FP8 block GEMM: tensor maps, tile grid,
// persistent launch. Included by the per-configuration files (sm90_fp8_gemm_bn*.cu).
#pragma once

#include "cuda/kernels/common/sm90_promotion.cuh"
#include "cuda/launch/sm90_block_gemm_launch.cuh"
#include "cuda/launch/sm90_fp8_gemm_configs.hpp"
#include "cuda/runtime/tensor_map.hpp"

namespace mixq::cuda {

template <int BN, int S, int C, int kSets, int kSub>
void launch_fp8(const Sm90Fp8GemmArgs& a, cudaStream_t stream) {
  using Policy = sm90::Fp8BlockScaledPolicy<BN, 128 * kSub>;
  using Shape = sm90::BlockGemmShape<BN, S, Policy, C, kSub>;
  const int64_t num_kb = (a.K + 127) / 128, n_blocks = (a.N + 127) / 128;
  static_assert(Shape::kSmemBytes <= 227 * 1024, "the ring must fit in shared memory");
  const CUtensorMap tm_a =
      make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.a, uint64_t(a.K), uint64_t(a.M),
                         uint64_t(a.lda), 128, Shape::kBM, CU_TENSOR_MAP_SWIZZLE_128B);
  // Each CTA of a pair loads (and multicasts) its share of B's rows.
  const CUtensorMap tm_b = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.b, uint64_t(a.K),
                                              uint64_t(a.N), uint64_t(a.ldb), 128,
                                              Shape::kBRowsPerCta, CU_TENSOR_MAP_SWIZZLE_128B);
  typename Policy::Params pp;
  pp.sa = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sa, uint64_t(a.M),
                             uint64_t(num_kb), uint64_t(a.ld_sa) * 4, Shape::kBM, 1,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  pp.sb = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sb, uint64_t(num_kb),
                             uint64_t(n_blocks), uint64_t(a.ld_sb) * 4, 4, Policy::kSbRows,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  sm90::BlockGemmParams p;
  p.set_tiles(int(a.M), int(a.N), int(num_kb), Shape::kBM, BN, C);
  // Raster groups of 2 N tiles: the 132 tiles in flight share few weight tiles, each read by
  // every M tile of the group. Measured against 4, 8, 16 and 32 on the H100 (docs/decisions/fp8-block-gemm.md):
  // fastest or within 1% on all 8 target shapes, up to 15% faster than 8.
  p.group_n = a.group_n > 0 ? a.group_n : kSm90Fp8DefaultGroupN;
  p.set_output(a.y, a.ldy, a.y_type, a.bias, a.bias_type, a.clamp_lo, a.clamp_hi);
  const char* name = sm90_fp8_gemm_name({BN, C, Shape::kBM});
  if constexpr (BN == 128) {
    if (a.quant.kind != 0) {  // (the host checks: quantized outputs take 128-wide tiles)
      p.quant = a.quant;
      launch_block_gemm<BN, S, Policy, C, kSub, kSets, false, true>(tm_a, tm_b, pp, p, a.num_sms,
                                                                    0, stream, name);
      return;
    }
  }
  launch_block_gemm<BN, S, Policy, C, kSub, kSets>(tm_a, tm_b, pp, p, a.num_sms, a.y_tma, stream,
                                                   name);
}

}  // namespace mixq::cuda
