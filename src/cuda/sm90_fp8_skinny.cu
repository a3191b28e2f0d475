// Host launcher of the few-token FP8 block-scaled GEMM (kernels/sm90_fp8_skinny.cuh): plan
// (token tile, stream-K schedule over all SMs, workspace), tensor maps, launch.
#include <cstdlib>
#include <string>

#include "cuda/check.hpp"
#include "cuda/kernels/sm90_fp8_skinny.cuh"
#include "cuda/sm90_fp8_gemm.hpp"
#include "cuda/sm90_tensor_map.hpp"
#include "cuda/wo_launch_config.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

// 8 stages of 16 KB of weights: 128 KB in flight per SM, ~17 MB over the GPU, several times
// what the H100's DRAM needs to stay busy (~3 TB/s x ~2 us).
constexpr int kSkinnyStages = 8;

template <int MT>
void launch_skinny(const Sm90Fp8GemmArgs& a, const Sm90Fp8SkinnyPlan& plan, float* partial,
                   unsigned* tickets, cudaStream_t stream) {
  using Shape = sm90::Fp8SkinnyShape<MT, kSkinnyStages>;
  static_assert(Shape::kSmemBytes <= 227 * 1024, "the ring must fit in shared memory");
  const int64_t num_kb = (a.K + 127) / 128, n_blocks = (a.N + 127) / 128;
  const CUtensorMap tm_w =
      make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.b, uint64_t(a.K), uint64_t(a.N),
                         uint64_t(a.ldb), 128, 128, CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap tm_x =
      make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.a, uint64_t(a.K), uint64_t(a.M),
                         uint64_t(a.lda), 128, MT, CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap tm_sa =
      make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sa, uint64_t(a.M), uint64_t(num_kb),
                         uint64_t(a.ld_sa) * 4, MT, 1, CU_TENSOR_MAP_SWIZZLE_NONE);
  const CUtensorMap tm_sb =
      make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sb, uint64_t(num_kb),
                         uint64_t(n_blocks), uint64_t(a.ld_sb) * 4, 4, 1,
                         CU_TENSOR_MAP_SWIZZLE_NONE);
  sm90::Fp8SkinnyParams p;
  p.M = int(a.M);
  p.N = int(a.N);
  p.num_kb = int(num_kb);
  p.sched = plan.sched;
  p.partial = partial;
  p.tickets = tickets;
  p.y = a.y;
  p.ldy = a.ldy;
  p.y_type = a.y_type;
  p.bias = a.bias;
  p.bias_type = a.bias_type;
  p.clamp_lo = a.clamp_lo;
  p.clamp_hi = a.clamp_hi;
  auto kernel = sm90::sm90_fp8_skinny_kernel<MT, kSkinnyStages>;
  MIXQ_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       Shape::kSmemBytes));
  WoLaunchConfig lc(dim3(plan.sched.grid), Shape::kThreads, Shape::kSmemBytes, stream,
                    sm90_fp8_skinny_pdl());
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, kernel, tm_w, tm_x, tm_sa, tm_sb, p));
  MIXQ_CUDA_CHECK_LAUNCH(sm90_fp8_skinny_name(MT));
}

}  // namespace

Sm90Fp8SkinnyPlan sm90_fp8_skinny_plan(int64_t M, int64_t N, int64_t K, int sms, int mt) {
  MIXQ_CHECK_ARG(M >= 1 && M <= kSm90Fp8SkinnyMaxM && N >= 1 && K >= 1,
                 "sm90 fp8 skinny gemm: M (", M, ") must be in [1, ", kSm90Fp8SkinnyMaxM,
                 "], N (", N, ") and K (", K, ") positive");
  MIXQ_CHECK_ARG(mt == 0 || ((mt == 16 || mt == 32 || mt == 64) && M <= mt),
                 "sm90 fp8 skinny gemm: token tile ", mt, " must be 16, 32 or 64 and hold M = ", M);
  Sm90Fp8SkinnyPlan plan;
  plan.mt = mt ? mt : M <= 16 ? 16 : M <= 32 ? 32 : 64;
  StreamKSchedule& s = plan.sched;
  s.num_n = int((N + 127) / 128);
  s.num_m = 1;
  s.tiles = s.num_n;
  s.chunks = int((K + 127) / 128);
  s.cps = 1;
  // Every tile in the stream-K part: each SM streams the same number of 16 KB weight blocks
  // (decode is bound by DRAM, so a partial last round of whole tiles would idle SMs).
  stream_k_split(s, 0, sms < 1 ? 1 : sms);
  plan.partial_floats = stream_k_partial_floats(s.grid, plan.mt);
  plan.tickets = s.tiles;
  return plan;
}

bool sm90_fp8_skinny_pdl() {
  const char* e = std::getenv("MIXQ_SKINNY_PDL");
  return !(e && e[0] == '0');
}

const char* sm90_fp8_skinny_name(int mt) {
  return mt == 16 ? "sm90_fp8_block_skinny_mt16"
                  : mt == 32 ? "sm90_fp8_block_skinny_mt32" : "sm90_fp8_block_skinny_mt64";
}

int sm90_fp8_skinny_mt_by_name(const std::string& name) {
  for (int mt : {16, 32, 64})
    if (name == sm90_fp8_skinny_name(mt)) return mt;
  return 0;
}

void launch_sm90_fp8_skinny_gemm(const Sm90Fp8GemmArgs& a, const Sm90Fp8SkinnyPlan& plan,
                                 float* partial, unsigned* tickets, cudaStream_t stream) {
  check_sm90_fp8_gemm_args(a);
  MIXQ_CHECK_ARG(a.M <= plan.mt && (plan.mt == 16 || plan.mt == 32 || plan.mt == 64),
                 "sm90 fp8 skinny gemm: M = ", a.M, " does not fit the plan's token tile ", plan.mt);
  MIXQ_CHECK_ARG(reinterpret_cast<uintptr_t>(partial) % 16 == 0 && tickets != nullptr,
                 "sm90 fp8 skinny gemm: the partial sums (", static_cast<void*>(partial),
                 ") must be 16-byte aligned and the tickets given");
  if (plan.mt == 16) launch_skinny<16>(a, plan, partial, tickets, stream);
  else if (plan.mt == 32) launch_skinny<32>(a, plan, partial, tickets, stream);
  else launch_skinny<64>(a, plan, partial, tickets, stream);
}

}  // namespace mixq::cuda
