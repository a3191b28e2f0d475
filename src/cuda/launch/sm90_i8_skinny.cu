// Host launcher of the few-token INT8 W8A8 per-block GEMM (kernels/sm90_skinny_gemm.cuh with
// SkinnyInt8Policy): tensor maps over the codes and both metas, then the launch.
#include "cuda/kernels/w8a8/sm90_skinny_policies.cuh"
#include "cuda/launch/sm90_skinny_launch.cuh"
#include "cuda/runtime/tensor_map.hpp"
#include "cuda/launch/sm90_w8a8_gemm.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

template <int MT, int G, bool kOffset>
void launch_i8_skinny(const Int8GemmParams& a, const Sm90SkinnyPlan& plan, cudaStream_t stream) {
  using Policy = sm90::SkinnyInt8Policy<MT, G, kOffset>;
  constexpr uint32_t kB = Policy::kBlocks;
  const uint64_t M = uint64_t(a.M), N = uint64_t(a.N), K = uint64_t(a.K);
  const uint64_t nkb = uint64_t(a.n_kblocks), Np = uint64_t(a.Np);
  // Codes: columns past K (and weight rows past N) read as zeros (TMA fill).
  const CUtensorMap tm_w = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.b, K, N,
                                              uint64_t(a.ldb), 128, 128,
                                              CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap tm_x = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.a, K, M,
                                              uint64_t(a.lda), 128, MT,
                                              CU_TENSOR_MAP_SWIZZLE_128B);
  const auto col_map = [&](const float* base) {
    return make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, base, Np, nkb, Np * 4, 128, kB,
                              CU_TENSOR_MAP_SWIZZLE_NONE);
  };
  const auto row_map = [&](const void* base, CUtensorMapDataType type) {
    return make_tensor_map_2d(type, base, M, nkb, uint64_t(a.ld_meta) * 4, MT, kB,
                              CU_TENSOR_MAP_SWIZZLE_NONE);
  };
  typename Policy::Params pp;
  pp.w[0] = col_map(a.sw);
  pp.w[1] = col_map(a.dw);
  pp.w[2] = kOffset ? col_map(a.ow) : pp.w[0];  // read only with offset weights
  pp.sx = row_map(a.sx, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  pp.ox = row_map(a.ox, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  pp.sum = row_map(a.sumx, CU_TENSOR_MAP_DATA_TYPE_INT32);
  sm90::SkinnyParams p;
  p.set(a.M, a.N, plan.sched, a.partial, a.tickets, a.y, a.ldy, a.y_type, a.bias, a.bias_type,
        a.clamp_lo, a.clamp_hi);
  launch_skinny_kernel<Policy, MT>(tm_w, tm_x, pp, p, a.pdl, stream, sm90_int8_skinny_name(MT));
}

template <int MT>
void launch_mt(const Int8GemmParams& a, const Sm90SkinnyPlan& plan, cudaStream_t stream) {
  const bool off = a.ow != nullptr;
  if constexpr (MT == 128) {  // g = 64's two accumulators a stage do not fit beside MT = 128's
    if (off) launch_i8_skinny<MT, 128, true>(a, plan, stream);
    else launch_i8_skinny<MT, 128, false>(a, plan, stream);
  } else if (a.kb == 64) {
    if (off) launch_i8_skinny<MT, 64, true>(a, plan, stream);
    else launch_i8_skinny<MT, 64, false>(a, plan, stream);
  } else {
    if (off) launch_i8_skinny<MT, 128, true>(a, plan, stream);
    else launch_i8_skinny<MT, 128, false>(a, plan, stream);
  }
}

}  // namespace

const char* sm90_int8_skinny_name(int mt) {
  return mt == 16   ? "sm90_i8_skinny_mt16"
         : mt == 32 ? "sm90_i8_skinny_mt32"
         : mt == 64 ? "sm90_i8_skinny_mt64"
                    : "sm90_i8_skinny_mt128";
}

void launch_sm90_int8_skinny(const Int8GemmParams& p, int mt, cudaStream_t stream) {
  MIXQ_CHECK_ARG(p.mode == Int8Mode::Block && (p.kb == 128 || (p.kb == 64 && mt <= 64)),
                 "sm90 int8 skinny gemm: block mode with K block 64 or 128 only, 128 for the "
                 "128-token tile (got K block ", p.kb, ", token tile ", mt, ")");
  MIXQ_CHECK_ARG(p.M >= 1 && p.M <= mt && p.lda % 16 == 0 && p.ldb % 16 == 0 &&
                     p.ld_meta % 4 == 0 && p.Np % 128 == 0,
                 "sm90 int8 skinny gemm: M (", p.M, ") must be in [1, ", mt,
                 "], the pitches lda ", p.lda, ", ldb ", p.ldb, " multiples of 16 bytes, ld_meta ",
                 p.ld_meta, " of 4 and Np ", p.Np, " of 128");
  MIXQ_CHECK_ARG(reinterpret_cast<uintptr_t>(p.partial) % 16 == 0 && p.partial != nullptr &&
                     p.tickets != nullptr,
                 "sm90 int8 skinny gemm: the partial sums (", static_cast<void*>(p.partial),
                 ") must be given, 16-byte aligned, and the tickets too");
  MIXQ_CHECK_ARG(p.num_sms > 0, "sm90 int8 skinny gemm: num_sms (", p.num_sms,
                 ") must be the SM count the workspace was planned for");
  const Sm90SkinnyPlan plan = sm90_skinny_plan(p.M, p.N, p.K, p.num_sms, mt);
  if (mt == 16) launch_mt<16>(p, plan, stream);
  else if (mt == 32) launch_mt<32>(p, plan, stream);
  else if (mt == 64) launch_mt<64>(p, plan, stream);
  else launch_mt<128>(p, plan, stream);
}

}  // namespace mixq::cuda
