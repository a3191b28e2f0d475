// The few-token FP8 block GEMM's grouped form (kernels/w8a8/sm90_skinny_grouped.cuh with
// SkinnyFp8Policy): the FP8 experts at decode shares. It reads each expert through the block GEMM's
// grouped descriptors (launch/sm90_fp8_grouped.cu): codes in boxes of 128 K x 128 rows, block scales
// in boxes of 4 K blocks x 1, the shapes the plain few-token kernel's maps have.
#include "cuda/kernels/w8a8/sm90_skinny_policies.cuh"
#include "cuda/launch/sm90_fp8_grouped.hpp"
#include "cuda/launch/sm90_skinny_launch.cuh"
#include "cuda/runtime/tensor_map.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

template <int MT>
void launch_mt(const Sm90Fp8GroupedArgs& a, const SkinnyGroupedWork& w, cudaStream_t stream) {
  using Policy = sm90::SkinnyFp8Policy<MT, MT + 4>;
  const BlockGroupedCall& c = a.call;
  const int64_t num_kb = (c.K + 127) / 128;
  const CUtensorMap tm_x =
      make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.a, uint64_t(c.K), uint64_t(c.rows),
                         uint64_t(a.lda), 128, MT, CU_TENSOR_MAP_SWIZZLE_128B);
  typename Policy::Params pp{};
  pp.sa = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sa, uint64_t(c.rows),
                             uint64_t(num_kb), uint64_t(a.ld_sa) * 4, MT + 4, 1,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  // the experts' descriptors: codes (map 0), block scales (map 1)
  const sm90::SkinnyParams p = skinny_grouped_params(c, w, kSm90Fp8ExpertMaps, 0, 1);
  launch_skinny_grouped_kernel<Policy, MT>(tm_x, pp, p, c, stream, sm90_fp8_grouped_skinny_name(MT));
}

}  // namespace

const char* sm90_fp8_grouped_skinny_name(int mt) {
  return mt == 16   ? "sm90_fp8_block_grouped_skinny_mt16"
         : mt == 32 ? "sm90_fp8_block_grouped_skinny_mt32"
                    : "sm90_fp8_block_grouped_skinny_mt64";
}

void launch_sm90_fp8_grouped_skinny(const Sm90Fp8GroupedArgs& a, const SkinnyGroupedWork& w,
                                    cudaStream_t stream) {
  const BlockGroupedCall& c = a.call;
  const char* name = "sm90 fp8 grouped skinny gemm";
  check_block_grouped_call(c, int64_t(1) << 31, name, true);
  check_skinny_grouped_work(w, (c.K + 127) / 128, name);
  MIXQ_CHECK_ARG(a.lda >= c.K && a.lda % 16 == 0 && a.ld_sa >= c.rows && a.ld_sa % 4 == 0, name,
                 ": lda ", a.lda, " (>= K, a multiple of 16) or ld_sa ", a.ld_sa,
                 " (>= rows, a multiple of 4)");
  if (c.max_tiles == 0) return;
  if (w.mt == 16) launch_mt<16>(a, w, stream);
  else if (w.mt == 32) launch_mt<32>(a, w, stream);
  else launch_mt<64>(a, w, stream);
}

}  // namespace mixq::cuda
