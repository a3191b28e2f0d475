// The grouped FP8 block GEMM's one configuration: 128 x 128 tiles, a 6-stage ring, single CTAs
// (a CTA pair shares B along M, but a pair's two token tiles may belong to different experts),
// two accumulator sets: the plain GEMM's 128-wide instance (sm90_fp8_gemm_bn128.cu) in its
// grouped form.
#include "cuda/launch/sm90_fp8_grouped.hpp"

#include "cuda/kernels/common/sm90_promotion.cuh"
#include "cuda/launch/sm90_block_gemm_launch.cuh"
#include "cuda/runtime/tensor_map.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

constexpr int kBN = 128, kStages = 6;
// scales of 132 rows from the tile's first row rounded down to a multiple of 4 (sm90_promotion.cuh)
constexpr int kSaRows = 132;
using Policy = sm90::Fp8BlockScaledPolicy<kBN, kSaRows>;
using Shape = sm90::BlockGemmShape<kBN, kStages, Policy, 1>;

}  // namespace

const char* sm90_fp8_grouped_name() { return "sm90_fp8_block_grouped_bm128_bn128_s6"; }

void make_sm90_fp8_expert_maps(const uint8_t* codes, int64_t ldb, const float* sb, int64_t ld_sb,
                               int64_t N, int64_t K, CUtensorMap* out) {
  const int64_t num_kb = (K + 127) / 128, n_blocks = (N + 127) / 128;
  out[0] = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, codes, uint64_t(K), uint64_t(N),
                              uint64_t(ldb), 128, Shape::kBRowsPerCta, CU_TENSOR_MAP_SWIZZLE_128B);
  out[1] = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, sb, uint64_t(num_kb),
                              uint64_t(n_blocks), uint64_t(ld_sb) * 4, 4, Policy::kSbRows,
                              CU_TENSOR_MAP_SWIZZLE_NONE);
}

void launch_sm90_fp8_grouped_gemm(const Sm90Fp8GroupedArgs& a, cudaStream_t stream) {
  const BlockGroupedCall& c = a.call;
  check_block_grouped_call(c, int64_t(1) << 31, "sm90 fp8 grouped gemm");
  MIXQ_CHECK_ARG(a.lda >= c.K && a.lda % 16 == 0 && a.ld_sa >= c.rows && a.ld_sa % 4 == 0,
                 "sm90 fp8 grouped gemm: lda ", a.lda, " (>= K, a multiple of 16) or ld_sa ",
                 a.ld_sa, " (>= rows, a multiple of 4)");
  if (c.max_tiles == 0) return;
  const int64_t num_kb = (c.K + 127) / 128;
  const CUtensorMap tm_a =
      make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.a, uint64_t(c.K), uint64_t(c.rows),
                         uint64_t(a.lda), 128, Shape::kBM, CU_TENSOR_MAP_SWIZZLE_128B);
  Policy::Params pp{};
  pp.sa = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sa, uint64_t(c.rows),
                             uint64_t(num_kb), uint64_t(a.ld_sa) * 4, kSaRows, 1,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  const sm90::BlockGemmParams p =
      block_grouped_params(c, int(num_kb), Shape::kBM, kBN, kSm90Fp8ExpertMaps, 1);
  launch_block_gemm<kBN, kStages, Policy, 1, 1, 2, true>(tm_a, CUtensorMap{}, pp, p, c.num_sms,
                                                         c.y_tma, stream, sm90_fp8_grouped_name(),
                                                         c.pdl);
}

}  // namespace mixq::cuda
