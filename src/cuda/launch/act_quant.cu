// Host launchers of the run-time activation quantizers (kernels/act_quant/act_quant.cuh):
// argument checks, the persistent grid, the instantiation by input type, K block and pieces.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/kernels/act_quant/act_quant.cuh"
#include "cuda/launch/act_quant.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/launch_config.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

using namespace act_quant;

void check_common(const char* op, const void* x, int x_type, int64_t ldx, int64_t M, int64_t K,
                  const void* q, int64_t ldq, int64_t ld_meta) {
  MIXQ_CHECK_ARG(x_type == kF16 || x_type == kBF16 || x_type == kF32, op, ": x_type ", x_type,
                 " is not 0 (f16), 1 (bf16) or 2 (f32)");
  MIXQ_CHECK_ARG(M >= 1 && K >= 1, op, ": empty problem M = ", M, ", K = ", K);
  MIXQ_CHECK_ARG(x != nullptr && q != nullptr, op, ": null x or q");
  MIXQ_CHECK_ARG(ldx >= K, op, ": ldx (", ldx, ") < K (", K, ")");
  MIXQ_CHECK_ARG(ldq >= act_row_pitch(K), op, ": ldq (", ldq, ") < act_row_pitch(K) (",
                 act_row_pitch(K), ")");
  MIXQ_CHECK_ARG(ld_meta >= M, op, ": ld_meta (", ld_meta, ") < M (", M, ")");
  // 32-bit row / column cursors in the kernels
  MIXQ_CHECK(M <= (int64_t{1} << 30) && K <= (int64_t{1} << 30), ErrorCode::Unsupported, op,
             ": M = ", M, ", K = ", K, " (at most 2^30 each)");
}

void check_clear(const char* op, const ActQuantClear& c) {
  MIXQ_CHECK_ARG(c.count >= 0 && c.count < (int64_t{1} << 31) && (c.count == 0 || c.words != nullptr), op,
                 ": clear ", c.count, " words at ", static_cast<const void*>(c.words),
                 " (0 .. 2^31 - 1 words, not null)");
}

// 16-byte vector accesses need 16-byte aligned row starts for x and q.
bool vector_ok(const void* x, int x_type, int64_t ldx, const void* q, int64_t ldq) {
  const auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const int64_t esize = x_type == kF32 ? 4 : 2;
  return a16(x) && a16(q) && (ldx * esize) % 16 == 0 && ldq % 16 == 0;
}

// W4A8 factors' zero: 1 (rows keep their own zero points), or the 4-bit zero point 0 ... 15 that every
// group shares.
void check_zero(const char* op, float zero) {
  MIXQ_CHECK_ARG(zero == 1.f || (zero >= 0.f && zero <= 15.f && zero == float(int(zero))), op, ": zero (", zero,
                 ") is neither 1 nor a shared 4-bit zero point 0 ... 15");
}

// The tuning's rows per band (log2, 0..3) and pieces per lane (1 or 2), else the defaults.
int band_of(const ActQuantTuning& t, int fallback) { return t.band >= 0 && t.band <= 3 ? t.band : fallback; }
int pieces_of(const ActQuantTuning& t, int fallback) { return t.pieces == 1 || t.pieces == 2 ? t.pieces : fallback; }

// Persistent grid: enough CTAs for every SM to hold its resident maximum, fewer if the problem is
// smaller (the kernels loop, so any grid size is correct).
template <auto Kernel, int BLOCK, int P, class... Args>
void launch_persistent(const void* x, int64_t ldx, int64_t M, int64_t K, bool vec, int band_shift,
                       int ctas_per_sm_cap, cudaStream_t stream, bool pdl, const ActQuantClear& clear,
                       Args... args) {
  int dev = 0, sms = 0;
  MIXQ_CUDA_CHECK(cudaGetDevice(&dev));
  MIXQ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  // never more CTAs than fit at once: the grid-stride split assumes they all run concurrently
  const int resident = resident_blocks_per_sm<Kernel, kThreads>();  // registers decide
  const int per_sm = ctas_per_sm_cap > 0 ? std::min(ctas_per_sm_cap, resident) : resident;
  constexpr int L = BLOCK / (kChunk * P);
  const int64_t nb = (K + BLOCK - 1) / BLOCK;
  // Tasks walk bands of 2^band_shift rows, the rows past M of the last band included (their lanes
  // idle): count them, or a small M gets too few CTAs and loops (INT8 at M = 1 with 8-row bands
  // took 8 serial rounds: ~10 us more than M = 8 on 4096 x 4096: docs/decisions/act-quant-quantizers.md).
  const int64_t rows = (M + (int64_t{1} << band_shift) - 1) >> band_shift << band_shift;
  const int64_t needed = (rows * nb * L + kThreads - 1) / kThreads;
  const int64_t grid = std::max<int64_t>(1, std::min<int64_t>(needed, int64_t(sms) * per_sm));
  const int64_t stride = grid * (kThreads / L);  // groups per grid step
  Geom geo;
  geo.M = static_cast<int>(M);
  geo.K = static_cast<int>(K);
  geo.nb = static_cast<int>(nb);
  geo.band_shift = band_shift;
  geo.bands = static_cast<int>((M + (int64_t{1} << band_shift) - 1) >> band_shift);
  const int64_t per = nb << band_shift;
  geo.dband = static_cast<int>(stride / per);
  geo.dq = static_cast<int>(stride % per);
  geo.ldx = ldx;
  geo.vec = vec;
  geo.clear = clear.words;
  geo.clear_n = clear.words ? static_cast<int>(clear.count) : 0;
  WoLaunchConfig lc(dim3(static_cast<unsigned>(grid)), kThreads, 0, stream, pdl);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, Kernel, x, geo, args...));
}

template <int XT, int P>
void launch_fp8_typed(const ActQuantTuning& tune, const ActQuantClear& clear, cudaStream_t stream, bool pdl,
                      const void* x, int64_t ldx, int64_t M,
                      int64_t K, bool vec, uint8_t* q, int64_t ldq, float* scale, float2* factors,
                      int64_t ld_meta, float zero) {
  launch_persistent<quantize_fp8_1x128_kernel<XT, P>, 128, P>(
      x, ldx, M, K, vec, band_of(tune, kFp8BandShift), tune.ctas_per_sm, stream, pdl, clear, q, ldq, scale,
      factors, ld_meta, zero);
}

void launch_fp8(const void* x, int x_type, int64_t ldx, int64_t M, int64_t K, uint8_t* q, int64_t ldq, float* scale,
                float2* factors, int64_t ld_meta, float zero, cudaStream_t stream, bool pdl,
                const ActQuantTuning& tune, const ActQuantClear& clear) {
  const bool vec = vector_ok(x, x_type, ldx, q, ldq);
  const bool two = pieces_of(tune, kFp8Pieces) == 2;
  switch (x_type) {
    case kF16:
      if (two) launch_fp8_typed<kF16, 2>(tune, clear, stream, pdl, x, ldx, M, K, vec, q, ldq, scale, factors, ld_meta, zero);
      else launch_fp8_typed<kF16, 1>(tune, clear, stream, pdl, x, ldx, M, K, vec, q, ldq, scale, factors, ld_meta, zero);
      break;
    case kBF16:
      if (two) launch_fp8_typed<kBF16, 2>(tune, clear, stream, pdl, x, ldx, M, K, vec, q, ldq, scale, factors, ld_meta, zero);
      else launch_fp8_typed<kBF16, 1>(tune, clear, stream, pdl, x, ldx, M, K, vec, q, ldq, scale, factors, ld_meta, zero);
      break;
    default:
      launch_fp8_typed<kF32, 1>(tune, clear, stream, pdl, x, ldx, M, K, vec, q, ldq, scale, factors, ld_meta, zero);
      break;
  }
  MIXQ_CUDA_CHECK_LAUNCH("quantize_fp8_1x128_kernel");
}

template <int XT, int P>
void launch_int8_typed(const ActQuantTuning& tune, const ActQuantClear& clear, int64_t block, cudaStream_t stream, bool pdl, const void* x, int64_t ldx,
                       int64_t M, int64_t K, bool vec, int8_t* q, int64_t ldq, float* scale,
                       float* offset, int32_t* sums, int64_t ld_meta) {
#define MIXQ_INT8_CASE(B)                                                          \
  case B:                                                                          \
    launch_persistent<quantize_int8_block_kernel<XT, B, P>, B, P>(                 \
        x, ldx, M, K, vec, band_of(tune, kInt8BandShift), tune.ctas_per_sm, stream, pdl, clear, q, ldq, scale, offset, \
        sums, ld_meta);                                                            \
    break;
  switch (block) {
    MIXQ_INT8_CASE(32)
    MIXQ_INT8_CASE(64)
    MIXQ_INT8_CASE(128)
    default:
      MIXQ_INT8_CASE(256)
  }
#undef MIXQ_INT8_CASE
}

}  // namespace

void launch_quantize_fp8_1x128(const void* x, int x_type, int64_t ldx, int64_t M, int64_t K,
                               uint8_t* q, int64_t ldq, float* scale, int64_t ld_meta,
                               cudaStream_t stream, bool pdl, const ActQuantTuning& tune,
                               const ActQuantClear& clear) {
  check_common("launch_quantize_fp8_1x128", x, x_type, ldx, M, K, q, ldq, ld_meta);
  MIXQ_CHECK_ARG(scale != nullptr, "launch_quantize_fp8_1x128: null scale");
  check_clear("launch_quantize_fp8_1x128", clear);
  launch_fp8(x, x_type, ldx, M, K, q, ldq, scale, nullptr, ld_meta, 1.f, stream, pdl, tune, clear);
}

void launch_quantize_fp8_w4a8(const void* x, int x_type, int64_t ldx, int64_t M, int64_t K, uint8_t* q,
                              int64_t ldq, float* factors, int64_t ld_meta, float zero, cudaStream_t stream,
                              const ActQuantTuning& tune) {
  check_common("launch_quantize_fp8_w4a8", x, x_type, ldx, M, K, q, ldq, ld_meta);
  MIXQ_CHECK_ARG(factors != nullptr && reinterpret_cast<uintptr_t>(factors) % 8 == 0,
                 "launch_quantize_fp8_w4a8: factors (", static_cast<void*>(factors), ") null or not 8-byte aligned");
  check_zero("launch_quantize_fp8_w4a8", zero);
  launch_fp8(x, x_type, ldx, M, K, q, ldq, nullptr, reinterpret_cast<float2*>(factors), ld_meta, zero, stream,
             false, tune, {});
}

void launch_w4a8_factors(const uint8_t* q, int64_t ldq, const float* scale, int64_t ld_scale, int64_t M, int64_t K,
                         float* factors, int64_t ld_meta, float zero, cudaStream_t stream) {
  MIXQ_CHECK_ARG(M >= 1 && K >= 1 && M <= (int64_t{1} << 30) && K <= (int64_t{1} << 30),
                 "launch_w4a8_factors: M = ", M, ", K = ", K, " (1 ... 2^30 each)");
  MIXQ_CHECK_ARG(q && scale && factors && reinterpret_cast<uintptr_t>(factors) % 8 == 0,
                 "launch_w4a8_factors: null q / scale, or factors (", static_cast<void*>(factors),
                 ") null or not 8-byte aligned");
  MIXQ_CHECK_ARG(ldq >= K && ld_scale >= M && ld_meta >= M, "launch_w4a8_factors: ldq (", ldq, ") < K (", K,
                 ") or ld_scale (", ld_scale, ") / ld_meta (", ld_meta, ") < M (", M, ")");
  check_zero("launch_w4a8_factors", zero);
  const int64_t threads = M * ((K + 127) / 128) * (128 / kChunk);
  w4a8_factors_kernel<<<unsigned((threads + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      q, ldq, scale, ld_scale, int(M), int(K), reinterpret_cast<float2*>(factors), ld_meta, zero);
  MIXQ_CUDA_CHECK_LAUNCH("w4a8_factors_kernel");
}

void launch_quantize_int8_block(const void* x, int x_type, int64_t ldx, int64_t M, int64_t K,
                                int64_t block, int8_t* q, int64_t ldq, float* scale,
                                float* offset, int32_t* sums, int64_t ld_meta,
                                cudaStream_t stream, bool pdl, const ActQuantTuning& tune,
                                const ActQuantClear& clear) {
  check_common("launch_quantize_int8_block", x, x_type, ldx, M, K, q, ldq, ld_meta);
  check_clear("launch_quantize_int8_block", clear);
  MIXQ_CHECK_ARG(block == 32 || block == 64 || block == 128 || block == 256,
                 "launch_quantize_int8_block: block (", block, ") must be 32, 64, 128 or 256");
  MIXQ_CHECK_ARG(scale != nullptr && offset != nullptr && sums != nullptr,
                 "launch_quantize_int8_block: null scale, offset or sums");
  const bool vec = vector_ok(x, x_type, ldx, q, ldq);
  const bool two = pieces_of(tune, kInt8Pieces) == 2;
  switch (x_type) {
    case kF16:
      if (two) launch_int8_typed<kF16, 2>(tune, clear, block, stream, pdl, x, ldx, M, K, vec, q, ldq, scale, offset, sums, ld_meta);
      else launch_int8_typed<kF16, 1>(tune, clear, block, stream, pdl, x, ldx, M, K, vec, q, ldq, scale, offset, sums, ld_meta);
      break;
    case kBF16:
      if (two) launch_int8_typed<kBF16, 2>(tune, clear, block, stream, pdl, x, ldx, M, K, vec, q, ldq, scale, offset, sums, ld_meta);
      else launch_int8_typed<kBF16, 1>(tune, clear, block, stream, pdl, x, ldx, M, K, vec, q, ldq, scale, offset, sums, ld_meta);
      break;
    default:
      launch_int8_typed<kF32, 1>(tune, clear, block, stream, pdl, x, ldx, M, K, vec, q, ldq, scale, offset, sums, ld_meta);
      break;
  }
  MIXQ_CUDA_CHECK_LAUNCH("quantize_int8_block_kernel");
}

}  // namespace mixq::cuda
