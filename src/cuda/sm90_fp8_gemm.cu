// Host launcher of the Hopper FP8 block-scaled GEMM: tensor maps, tile grid, persistent launch.
#include "cuda/sm90_fp8_gemm.hpp"

#include <algorithm>

#include "cuda/check.hpp"
#include "cuda/sm90_block_gemm_launch.cuh"
#include "cuda/kernels/sm90_promotion.cuh"
#include "cuda/sm90_tensor_map.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

template <int BN, int S, int C>
void launch_fp8(const Sm90Fp8GemmArgs& a, cudaStream_t stream) {
  using Policy = sm90::Fp8BlockScaledPolicy<BN>;
  using Shape = sm90::BlockGemmShape<BN, S, Policy, C>;
  const int64_t num_kb = (a.K + 127) / 128, n_blocks = (a.N + 127) / 128;
  const CUtensorMap tm_a =
      make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.a, uint64_t(a.K), uint64_t(a.M),
                         uint64_t(a.lda), 128, Shape::kBM, CU_TENSOR_MAP_SWIZZLE_128B);
  // Each CTA of a pair loads (and multicasts) its share of B's rows.
  const CUtensorMap tm_b = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.b, uint64_t(a.K),
                                              uint64_t(a.N), uint64_t(a.ldb), 128,
                                              Shape::kBRowsPerCta, CU_TENSOR_MAP_SWIZZLE_128B);
  typename Policy::Params pp;
  pp.sa = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sa, uint64_t(a.M),
                             uint64_t(num_kb), uint64_t(a.ld_sa) * 4, 128, 1,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  pp.sb = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sb, uint64_t(num_kb),
                             uint64_t(n_blocks), uint64_t(a.ld_sb) * 4, 4, Policy::kSbRows,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  sm90::BlockGemmParams p;
  p.set_tiles(int(a.M), int(a.N), int(num_kb), Shape::kBM, BN, C);
  // Raster groups of 2 N tiles: the 132 tiles in flight share few weight tiles, each read by
  // every M tile of the group. Measured against 4, 8, 16 and 32 on the H100 (session 9, call 6):
  // fastest or within 1% on all 8 target shapes, up to 15% faster than 8.
  p.group_n = a.group_n > 0 ? a.group_n : block_gemm_group_n(kSm90Fp8DefaultGroupN);
  p.set_output(a.y, a.ldy, a.y_type, a.bias, a.bias_type, a.clamp_lo, a.clamp_hi);
  launch_block_gemm<BN, S, Policy, C>(tm_a, tm_b, pp, p, a.num_sms, stream,
                                      sm90_fp8_gemm_name(C));
}

}  // namespace

// Defaults measured on the H100 (session 9, bench/results/session9/): single CTAs. CTA pairs
// multicasting B were 1-14% slower on 7 of the 8 target shapes (3% faster on the eighth), and a
// 192-wide N tile (one accumulator set: two do not fit in registers) 2-25% slower than 128.
int sm90_fp8_gemm_cluster(int cluster) {
  MIXQ_CHECK_ARG(cluster >= 0 && cluster <= 2,
                 "sm90 fp8 gemm: cluster must be 0 (default), 1 or 2, got ", cluster);
  return cluster ? cluster : 1;
}

const char* sm90_fp8_gemm_name(int cluster) {
  return cluster == 2 ? "sm90_fp8_block_gemm_bm128_bn128_s6_c2"
                      : "sm90_fp8_block_gemm_bm128_bn128_s6";
}

int sm90_fp8_gemm_cluster_by_name(const std::string& name) {
  for (int cl : {1, 2})
    if (name == sm90_fp8_gemm_name(cl)) return cl;
  return 0;
}

std::string sm90_fp8_gemm_names() {
  return std::string(sm90_fp8_gemm_name(1)) + ", " + sm90_fp8_gemm_name(2);
}

void launch_sm90_fp8_block_gemm(const Sm90Fp8GemmArgs& a, cudaStream_t stream) {
  MIXQ_CHECK_ARG(a.M >= 1 && a.N >= 1 && a.K >= 1 && a.M < (int64_t(1) << 31) &&
                     a.N < (int64_t(1) << 31) && a.K < (int64_t(1) << 31),
                 "sm90 fp8 gemm: M, N, K (", a.M, ", ", a.N, ", ", a.K, ") must be in [1, 2^31)");
  MIXQ_CHECK_ARG(a.lda >= a.K && a.lda % 16 == 0 && a.ldb >= a.K && a.ldb % 16 == 0,
                 "sm90 fp8 gemm: code pitches lda ", a.lda, ", ldb ", a.ldb,
                 " must be >= K (", a.K, ") and multiples of 16 bytes (TMA)");
  MIXQ_CHECK_ARG(a.ld_sa >= a.M && a.ld_sa % 4 == 0 && a.ld_sb >= (a.K + 127) / 128 &&
                     a.ld_sb % 4 == 0,
                 "sm90 fp8 gemm: scale pitches ld_sa ", a.ld_sa, ", ld_sb ", a.ld_sb,
                 " must cover M / the K blocks and be multiples of 4");
  MIXQ_CHECK_ARG(a.ldy >= a.N && a.y_type >= 0 && a.y_type <= 2 && a.bias_type >= 0 &&
                     a.bias_type <= 2,
                 "sm90 fp8 gemm: bad output (ldy ", a.ldy, ", type ", a.y_type, ") or bias type ",
                 a.bias_type);
  MIXQ_CHECK_ARG(a.block_n == 0 || a.block_n == 128,
                 "sm90 fp8 gemm: block_n must be 0 (default) or 128, got ", a.block_n);
  if (sm90_fp8_gemm_cluster(a.cluster) == 2) launch_fp8<128, 6, 2>(a, stream);
  else launch_fp8<128, 6, 1>(a, stream);
}

}  // namespace mixq::cuda
