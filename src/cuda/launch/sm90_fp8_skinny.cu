// Host launcher of the few-token FP8 block-scaled GEMM (kernels/sm90_skinny_gemm.cuh with
// SkinnyFp8Policy): tensor maps over the codes and both scales, then the launch.
#include <string>

#include "cuda/kernels/w8a8/sm90_skinny_policies.cuh"
#include "cuda/launch/sm90_fp8_gemm.hpp"
#include "cuda/launch/sm90_skinny_launch.cuh"
#include "cuda/runtime/tensor_map.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

template <int MT>
void launch_fp8_skinny(const Sm90Fp8GemmArgs& a, const Sm90SkinnyPlan& plan, float* partial,
                       unsigned* tickets, cudaStream_t stream) {
  using Policy = sm90::SkinnyFp8Policy<MT>;
  const int64_t num_kb = (a.K + 127) / 128, n_blocks = (a.N + 127) / 128;
  const CUtensorMap tm_w =
      make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.b, uint64_t(a.K), uint64_t(a.N),
                         uint64_t(a.ldb), 128, 128, CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap tm_x =
      make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.a, uint64_t(a.K), uint64_t(a.M),
                         uint64_t(a.lda), 128, MT, CU_TENSOR_MAP_SWIZZLE_128B);
  typename Policy::Params pp;
  pp.sa = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sa, uint64_t(a.M),
                             uint64_t(num_kb), uint64_t(a.ld_sa) * 4, MT, 1,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  pp.sb = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sb, uint64_t(num_kb),
                             uint64_t(n_blocks), uint64_t(a.ld_sb) * 4, 4, 1,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  sm90::SkinnyParams p;
  p.set(int(a.M), int(a.N), plan.sched, partial, tickets, a.y, a.ldy, a.y_type, a.bias,
        a.bias_type, a.clamp_lo, a.clamp_hi);
  launch_skinny_kernel<Policy, MT>(tm_w, tm_x, pp, p, a.pdl, stream, sm90_fp8_skinny_name(MT));
}

}  // namespace

const char* sm90_fp8_skinny_name(int mt) {
  return mt == 16   ? "sm90_fp8_block_skinny_mt16"
         : mt == 32 ? "sm90_fp8_block_skinny_mt32"
         : mt == 64 ? "sm90_fp8_block_skinny_mt64"
                    : "sm90_fp8_block_skinny_mt128";
}

int sm90_fp8_skinny_mt_by_name(const std::string& name) {
  for (int mt : {16, 32, 64, 128})
    if (name == sm90_fp8_skinny_name(mt)) return mt;
  return 0;
}

void launch_sm90_fp8_skinny_gemm(const Sm90Fp8GemmArgs& a, const Sm90SkinnyPlan& plan,
                                 float* partial, unsigned* tickets, cudaStream_t stream) {
  check_sm90_fp8_gemm_args(a);
  MIXQ_CHECK_ARG(a.M <= plan.mt &&
                     (plan.mt == 16 || plan.mt == 32 || plan.mt == 64 || plan.mt == 128),
                 "sm90 fp8 skinny gemm: M = ", a.M, " does not fit the plan's token tile ",
                 plan.mt);
  MIXQ_CHECK_ARG(reinterpret_cast<uintptr_t>(partial) % 16 == 0 && tickets != nullptr,
                 "sm90 fp8 skinny gemm: the partial sums (", static_cast<void*>(partial),
                 ") must be 16-byte aligned and the tickets given");
  if (plan.mt == 16) launch_fp8_skinny<16>(a, plan, partial, tickets, stream);
  else if (plan.mt == 32) launch_fp8_skinny<32>(a, plan, partial, tickets, stream);
  else if (plan.mt == 64) launch_fp8_skinny<64>(a, plan, partial, tickets, stream);
  else launch_fp8_skinny<128>(a, plan, partial, tickets, stream);
}

}  // namespace mixq::cuda
