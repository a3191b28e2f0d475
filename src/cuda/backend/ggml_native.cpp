// The CUDA backend's prepared weight for GGUF block tensors at their native width: prepare splits
// the file's blocks into the planes of kernels/ggml/ggml_gpu_format.hpp (host threads, one upload);
// linear() quantizes X to q8 (per 32 columns, as ggml does) and runs the dp4a GEMV for a few
// tokens or the int8 tensor-core kernel above (both PDL-chained to the quantizer); from there,
// with 16-bit X, the dequantizing tensor-core kernel (X as it is, the weights decoded to its type);
// past that limit, with f32 X past the int8 kernel's, or when asked, it dequantizes rows in chunks
// to X's type for cuBLAS, as the canonical weight-only path does. docs/decisions/cuda-ggml-native.md.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "core/prepared.hpp"
#include "cpu/thread_pool.hpp"
#include "cuda/backend/common.hpp"
#include "cuda/backend/cublas_util.hpp"
#include "cuda/backend/factories.hpp"
#include "cuda/dispatch/plan_log.hpp"
#include "cuda/launch/ggml_native.hpp"
#include "cuda/launch/wo_kernels.hpp"
#include "cuda/runtime/device_context.hpp"
#include "formats/gguf/ggml_split.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

using formats::GgmlType;
using ggml::GFormat;
using ggml::GType;

bool gtype_of(uint32_t id, GType& t) {
  switch (static_cast<GgmlType>(id)) {
    case GgmlType::Q4_0: t = GType::Q4_0; return true;
    case GgmlType::Q4_1: t = GType::Q4_1; return true;
    case GgmlType::Q5_0: t = GType::Q5_0; return true;
    case GgmlType::Q5_1: t = GType::Q5_1; return true;
    case GgmlType::Q8_0: t = GType::Q8_0; return true;
    case GgmlType::IQ4_NL: t = GType::IQ4_NL; return true;
    case GgmlType::Q2_K: t = GType::Q2_K; return true;
    case GgmlType::Q3_K: t = GType::Q3_K; return true;
    case GgmlType::Q4_K: t = GType::Q4_K; return true;
    case GgmlType::Q5_K: t = GType::Q5_K; return true;
    case GgmlType::Q6_K: t = GType::Q6_K; return true;
    case GgmlType::IQ4_XS: t = GType::IQ4_XS; return true;
    default: return false;
  }
}

size_t align256(size_t b) { return (b + 255) / 256 * 256; }
int64_t round16(int64_t b) { return (b + 15) / 16 * 16; }

// Host image of the planes: one row's chunks written from its split blocks.
struct HostPlanes {
  GFormat f;
  int64_t N = 0, K = 0;
  int64_t lo_pitch = 0, hi_pitch = 0, d_pitch = 0, sc_pitch = 0;
  size_t off_lo = 0, off_hi = 0, off_d = 0, off_sc = 0, bytes = 0;
  std::vector<uint8_t> data;

  HostPlanes(GFormat fmt, int64_t n, int64_t k) : f(fmt), N(n), K(k) {
    // pitches padded to 16 bytes (ggml_gpu_format.hpp): the tensor-core kernel's copies are aligned
    lo_pitch = round16(K / 32 * f.lo_chunk());
    hi_pitch = round16(K / 32 * f.hi_chunk());
    d_pitch = round16(K / f.qk * f.d_bytes());
    sc_pitch = round16(K / f.qk * f.sc_bytes());
    off_lo = 0;
    off_hi = align256(off_lo + size_t(N * lo_pitch));
    off_d = align256(off_hi + size_t(N * hi_pitch));
    off_sc = align256(off_d + size_t(N * d_pitch));
    bytes = align256(off_sc + size_t(N * sc_pitch));
    data.assign(bytes, 0);
  }

  void write_block(GgmlType type, int64_t n, int64_t kb, const formats::GgmlSplitBlock& s) {
    uint8_t* lo = data.data() + off_lo + n * lo_pitch;
    uint8_t* hi = data.data() + off_hi + n * hi_pitch;
    const int chunks = f.qk / 32;
    for (int cc = 0; cc < chunks; ++cc) {
      const int64_t c = kb * chunks + cc;
      const uint8_t* u = s.u + 32 * cc;
      uint8_t* l = lo + c * f.lo_chunk();
      if (f.lb == 4) {
        for (int t = 0; t < 16; ++t) l[t] = uint8_t((u[t] & 0xF) | ((u[t + 16] & 0xF) << 4));
      } else if (f.lb == 8) {
        for (int t = 0; t < 32; ++t) l[t] = uint8_t(u[t] ^ 0x80);  // the signed code
      } else {
        for (int t = 0; t < 8; ++t) {
          uint8_t b = 0;
          for (int p = 0; p < 4; ++p) b = uint8_t(b | ((u[t + 8 * p] & 3) << (2 * p)));
          l[t] = b;
        }
      }
      if (f.hb == 1) {
        uint32_t h = 0;
        for (int j = 0; j < 8; ++j)
          for (int i = 0; i < 4; ++i) h |= uint32_t((u[4 * j + i] >> f.lb) & 1) << (8 * i + j);
        std::memcpy(hi + c * 4, &h, 4);
      } else if (f.hb == 2) {
        uint32_t h[2] = {0, 0};
        for (int j = 0; j < 8; ++j)
          for (int i = 0; i < 4; ++i)
            h[j / 4] |= uint32_t((u[4 * j + i] >> 4) & 3) << (8 * i + 2 * (j % 4));
        std::memcpy(hi + c * 8, h, 8);
      }
    }
    uint8_t* d = data.data() + off_d + n * d_pitch + kb * f.d_bytes();
    std::memcpy(d, &s.d, 2);
    if (f.d_bytes() == 4) std::memcpy(d + 2, &s.dm, 2);
    uint8_t* sc = data.data() + off_sc + n * sc_pitch + kb * f.sc_bytes();
    switch (f.sk) {
      case ggml::GScale::K4:
        std::memcpy(sc, s.sc, 8);
        std::memcpy(sc + 8, s.mn, 8);
        break;
      case ggml::GScale::Q2K: std::memcpy(sc, s.sc, 16); break;
      case ggml::GScale::S16:
        if (type == GgmlType::Q3_K)
          for (int j = 0; j < 16; ++j) sc[j] = uint8_t(int8_t(formats::q3k_scale(s.q3, j)));
        else
          std::memcpy(sc, s.sc, 16);
        break;
      case ggml::GScale::S32: std::memcpy(sc, s.sc, 8); break;
      default: break;
    }
  }
};

// The power of two e for which 2^e |w| stays at or below 2^14 for every weight (headroom under
// f16's 65504) while the scales of a small-weight tensor move out of f16's subnormal range: the
// dequantizing kernel forms 2^e (s q + o) in f16 for f16 X. The bound per canonical scale block is
// |s| times the code range's largest |value|, plus |o|.
int f16_weight_exponent(const QuantizedWeight& w) {
  if (!w.has_scales || w.scales.empty()) return 0;
  const double qmax = w.code_type == DType::I4 ? 8 : w.code_type == DType::U4 ? 15
                      : w.code_type == DType::I8 ? 128 : 255;
  double bound = 0;
  for (int64_t nb = 0; nb < w.n_blocks_n(); ++nb)
    for (int64_t kb = 0; kb < w.n_blocks_k(); ++kb) {
      double b = std::fabs(double(w.scale(nb, kb))) * qmax;
      if (w.zero_kind == ZeroKind::Offset) b += std::fabs(double(w.offset(nb, kb)));
      bound = std::max(bound, b);
    }
  if (!(bound > 0) || !std::isfinite(bound)) return 0;
  return std::clamp(int(std::floor(14.0 - std::log2(bound))), -24, 24);
}

class CudaGgmlNative final : public PreparedImpl {
 public:
  CudaGgmlNative(const QuantizedWeight& w, const PrepareOptions& o) {
    backend = BackendKind::CUDA;
    opts = o;
    N = w.N;
    K = w.K;
    device_ = o.device;
    check_device_ordinal(device_);
    DeviceGuard guard(device_);
    ctx_ = &DeviceContext::get(device_);
    caps_ = ctx_->caps();
    MIXQ_CHECK(caps_.cc_major >= 8, ErrorCode::Unsupported, "cuda backend needs compute capability "
               ">= 8.0, device ", device_, " is ", caps_.cc_major, ".", caps_.cc_minor);
    MIXQ_CHECK(gtype_of(w.ggml->type, type_), ErrorCode::Internal, "cuda ggml native: type ",
               formats::ggml_type_name(w.ggml->type));
    const GgmlType gt = static_cast<GgmlType>(w.ggml->type);
    type_name_ = formats::ggml_type_name(w.ggml->type);
    const GFormat f = ggml::gformat(type_);
    MIXQ_CHECK(K % f.qk == 0 && K <= (int64_t(1) << 30) && N <= (int64_t(1) << 30),
               ErrorCode::Unsupported, "cuda ggml native: K (", K, ") must be a multiple of ",
               f.qk, " and N, K < 2^30");
    gemv_max_ = o.tuning.cuda_ggml_q8_max_rows > 0 ? o.tuning.cuda_ggml_q8_max_rows : default_gemv_rows(type_);
    mma_max_ = o.tuning.cuda_ggml_mma_max_rows > 0 ? o.tuning.cuda_ggml_mma_max_rows : kMmaMaxRows;
    mma_max_x16_ = o.tuning.cuda_ggml_mma_max_rows > 0 ? o.tuning.cuda_ggml_mma_max_rows : 0;
    hmma_max_ = o.tuning.cuda_ggml_hmma_max_rows > 0 ? o.tuning.cuda_ggml_hmma_max_rows : default_hmma_rows(type_);
    stream_max_ = o.tuning.cuda_ggml_stream_max_rows > 0 ? o.tuning.cuda_ggml_stream_max_rows
                  : o.tuning.cuda_ggml_stream_max_rows < 0 ? 0 : ggml::kStreamMaxRows;
    if (o.force_kernel == "cuda_ggml_q8") forced_ = Path::Gemv;
    else if (o.force_kernel == "cuda_ggml_mma") forced_ = Path::Mma;
    else if (o.force_kernel == "cuda_ggml_hmma") forced_ = Path::Hmma;
    else if (o.force_kernel == "cuda_ggml_stream") forced_ = Path::Stream;
    else if (o.force_kernel == "cuda_ggml_dequant_cublas") forced_ = Path::Cublas;
    else
      MIXQ_CHECK_ARG(o.force_kernel.empty(), "prepare (cuda, GGUF ", type_name_,
                     "): force_kernel '", o.force_kernel, "' is not a native GGUF kernel "
                     "(cuda_ggml_q8, cuda_ggml_mma, cuda_ggml_stream, cuda_ggml_hmma, "
                     "cuda_ggml_dequant_cublas)");

    // Split the file's blocks into the planes, one task per group of rows.
    HostPlanes hp(f, N, K);
    const formats::GgmlTypeInfo* ti = formats::ggml_type_info(w.ggml->type);
    const int64_t nb = K / f.qk, rb = nb * ti->block_bytes;
    const uint8_t* src = w.ggml->data.data();
    const int64_t row_tasks = (N + 63) / 64;
    cpu::parallel_for(cpu::resolve_num_threads(0), row_tasks, [&](int64_t t) {
      formats::GgmlSplitBlock s;
      for (int64_t n = t * 64; n < std::min(N, t * 64 + 64); ++n)
        for (int64_t kb = 0; kb < nb; ++kb) {
          formats::split_ggml_block(gt, src + n * rb + kb * ti->block_bytes, s);
          hp.write_block(gt, n, kb, s);
        }
    });
    planes_buf_ = DeviceBuffer(hp.bytes, device_);
    planes_buf_.copy_from_host(hp.data.data(), hp.bytes);
    const uint8_t* base = static_cast<const uint8_t*>(planes_buf_.data());
    planes_.lo = base + hp.off_lo;
    planes_.hi = base + hp.off_hi;
    planes_.d = base + hp.off_d;
    planes_.sc = base + hp.off_sc;
    planes_.lo_pitch = hp.lo_pitch;
    planes_.hi_pitch = hp.hi_pitch;
    planes_.d_pitch = hp.d_pitch;
    planes_.sc_pitch = hp.sc_pitch;
    f16_exp_ = f16_weight_exponent(w);
    chunk_rows_ = dequant_chunk_rows(N, size_t(K) * 4, dequant_chunk_cap(o.tuning), kDequantChunkGranule);
    scratch_ = ctx_->reserve_scratch(workspace_size(kScratchRows));
    MIXQ_CUDA_CHECK(cudaDeviceSynchronize());  // prepare is not on the hot path
  }

  // The kernel a call of M rows of `act` activations (16-byte aligned rows) runs.
  std::string kernel_name(int64_t M) const override { return kernel_name(M, DType::F16); }
  std::string kernel_name(int64_t M, DType act) const override {
    switch (path(M, act != DType::F32)) {
      case Path::Gemv: return "cuda_ggml_q8_" + type_name_;
      case Path::Mma: return "cuda_ggml_mma_" + type_name_;
      case Path::Hmma: return "cuda_ggml_hmma_" + type_name_;
      case Path::Stream: return "cuda_ggml_stream_" + type_name_;
      default: return "cuda_ggml_dequant_cublas";
    }
  }

  // enough for the call whatever X's type
  size_t workspace_size(int64_t M) const override {
    return std::max(need(M, path(M, true)), need(M, path(M, false)));
  }

  void linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
              const ExecContext& ctx) const override {
    check_call_device(x, y, device_);
    const int64_t M = x.shape[0];
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    DeviceGuard guard(device_);
    // the dequantizing tensor-core kernel copies X's rows in 16-byte pieces
    const bool x16 = (x.dtype == DType::F16 || x.dtype == DType::BF16) && x.ld() % 8 == 0 &&
                     reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
    const Path pa = path(M, x16);
    char* ws = call_workspace(ctx.workspace, ctx.workspace_bytes, need(M, pa), *scratch_, M);
    if (log_plans()) print_plan("linear (ggml native)", M, kernel_name(M, x16 ? x.dtype : DType::F32));
    if (pa == Path::Cublas) run_cublas(x, y, ep, ws, stream);
    else if (pa == Path::Hmma) run_hmma(x, y, ep, ws, stream);
    else if (pa == Path::Stream) run_stream(x, y, ep, ws, stream);
    else run_q8(pa, x, y, ep, ws, stream);
  }

 private:
  static constexpr int64_t kScratchRows = 4096;
  // Chunks of the dequantize + cuBLAS path start on 128-row boundaries (dequant_chunk_rows).
  static constexpr int64_t kDequantChunkGranule = 128;
  // Measured on an H200 (docs/decisions/cuda-ggml-native.md): the GEMV up to 4 tokens (3 for
  // Q4_0 / Q4_1, whose decode is the cheapest, so a tensor-core kernel's fixed cost is repaid
  // sooner). Above it, 16-bit X: the few-token kernel up to 8 tokens (0.69-1.02x the staged
  // kernel's time at 5-8 tokens; Q4_0 at 4: 0.75-0.92x the GEMV's), then the staged
  // dequantizing tensor-core kernel (at 8 tokens 0.75-1.1x the
  // q8 one's time, at 64 0.35-0.9x) up to 128 tokens for the 4-bit types (0.6-1.0x dequantize +
  // cuBLAS's time there, 1.2-1.5x at 256), up to 96 for the others (at 128 1.0-1.3x cuBLAS's);
  // f32 X: the q8 tensor-core kernel up to 32. Dequantize + cuBLAS above.
  static int64_t default_gemv_rows(GType t) { return t == GType::Q4_0 || t == GType::Q4_1 ? 3 : 4; }
  static int64_t default_hmma_rows(GType t) {
    const GFormat f = ggml::gformat(t);
    return f.lb == 4 && f.hb == 0 ? 128 : 96;
  }
  static constexpr int64_t kMmaMaxRows = 32;

  enum class Path { Gemv, Mma, Stream, Hmma, Cublas };

  // x16: X is f16 / bf16 with 16-byte aligned rows (the dequantizing kernel's input); without it
  // the plan, or a forced dequantizing kernel, falls back to the q8 kernels and cuBLAS.
  Path path(int64_t M, bool x16) const {
    if (forced_) {
      if (*forced_ == Path::Gemv && M > ggml::kGemvMaxRows) return Path::Mma;
      if (*forced_ == Path::Stream) {
        if (x16 && M <= ggml::kStreamMaxRows) return Path::Stream;
      } else if (*forced_ != Path::Hmma || (x16 && hmma_fits(M))) {
        return *forced_;
      }
    }
    if (M <= gemv_max_) return Path::Gemv;
    if (x16 && M <= stream_max_) return Path::Stream;
    if (M <= (x16 ? mma_max_x16_ : mma_max_)) return Path::Mma;
    if (x16 && M <= hmma_max_ && hmma_fits(M)) return Path::Hmma;
    return M <= mma_max_ ? Path::Mma : Path::Cublas;  // (16-bit X, a tile the device cannot hold)
  }

  // whether the device gives a block the dequantizing kernel's shared memory at M tokens
  bool hmma_fits(int64_t M) const {
    return size_t(ggml::hmma_smem_bytes(type_, ggml::hmma_token_tile(M))) <= caps_.smem_per_block_optin;
  }

  size_t q8_bytes(int64_t M) const { return ggml::q8_bytes(M, K); }

  // The q8 paths: X quantized + its metadata (+ the tensor-core kernel's split partials). The
  // cuBLAS path: a chunk of dequantized rows (f32 at most) and, when y's type is neither X's nor
  // f32, an f32 staging of the output.
  size_t need(int64_t M, Path pa) const {
    M = std::max<int64_t>(M, 1);
    switch (pa) {
      case Path::Gemv: return q8_bytes(M);
      case Path::Mma: {
        const ggml::MmaSplit sp = ggml::mma_split(type_, int(M), N, K, caps_.sm_count);
        return q8_bytes(M) + (sp.splits > 1 ? size_t(sp.splits) * size_t(M * N) * 4 : 0);
      }
      case Path::Hmma: {
        const ggml::HmmaPlan hp = ggml::hmma_plan(type_, int(M), N, K, caps_.sm_count);
        return hp.splits > 1 ? size_t(hp.splits) * size_t(M * N) * 4 : 0;
      }
      case Path::Stream: {
        const ggml::StreamPlan sp = ggml::stream_plan(type_, N, K, caps_.sm_count);
        return sp.splits > 1 ? size_t(sp.splits) * size_t(M * N) * 4 : 0;
      }
      default: return align256(size_t(chunk_rows_ * K * 4)) + align256(size_t(M * N * 4));
    }
  }

  void run_q8(Path path, const TensorView& x, const TensorView& y, const Epilogue& ep, char* ws,
              cudaStream_t stream) const {
    const int M = int(x.shape[0]);
    ggml::GQ8 q;
    q.q = reinterpret_cast<int8_t*>(ws);
    q.meta = reinterpret_cast<float4*>(ws + ggml::q8_meta_offset(M, K));
    ggml::launch_quantize_x(x.data, float_type_code(x.dtype, "cuda ggml native"), x.ld(), M, K, q,
                            caps_.sm_count, caps_.cc_major >= 9, stream);
    ggml::MmaParams p;
    fill_output(p, M, y, ep);
    p.xq = q.q;
    p.xmeta = q.meta;
    p.pdl = caps_.cc_major >= 9;
    p.pairs = int8_t(opts.tuning.cuda_ggml_gemv_pairs);  // Toggle's values: -1 Auto, 0 Off, 1 On
    if (path == Path::Gemv) return ggml::launch_q8_gemv(type_, p, caps_.sm_count, stream);
    const ggml::MmaSplit sp = ggml::mma_split(type_, M, N, K, caps_.sm_count);
    p.splits = sp.splits;
    p.split_chunks = sp.split_chunks;
    if (sp.splits > 1) p.partial = reinterpret_cast<float*>(ws + q8_bytes(M));
    ggml::launch_q8_mma(type_, p, stream);
  }

  void run_hmma(const TensorView& x, const TensorView& y, const Epilogue& ep, char* ws,
                cudaStream_t stream) const {
    const ggml::HmmaPlan hp = ggml::hmma_plan(type_, int(x.shape[0]), N, K, caps_.sm_count);
    const ggml::HmmaParams p = dequantizing_params(x, y, ep, ws, hp.splits, hp.split_chunks);
    ggml::launch_hmma(type_, p, x.dtype == DType::F16 ? 0 : 1, stream);
  }

  void run_stream(const TensorView& x, const TensorView& y, const Epilogue& ep, char* ws,
                  cudaStream_t stream) const {
    const ggml::StreamPlan sp = ggml::stream_plan(type_, N, K, caps_.sm_count);
    ggml::HmmaParams p = dequantizing_params(x, y, ep, ws, sp.splits, sp.split_chunks);
    p.pdl = caps_.cc_major >= 9;  // the first weight loads before the wait on the previous kernel
    ggml::launch_stream(type_, p, x.dtype == DType::F16 ? 0 : 1, stream);
  }

  // The call of a dequantizing kernel (16-bit X as it is): output, X, the K split's partials in the
  // workspace, and for f16 X the weights' power-of-two scale (f16_weight_exponent).
  ggml::HmmaParams dequantizing_params(const TensorView& x, const TensorView& y, const Epilogue& ep,
                                       char* ws, int splits, int64_t split_chunks) const {
    ggml::HmmaParams p;
    fill_output(p, int(x.shape[0]), y, ep);
    p.x = x.data;
    p.ldx = x.ld();
    p.splits = splits;
    p.split_chunks = split_chunks;
    if (splits > 1) p.partial = reinterpret_cast<float*>(ws);
    if (x.dtype == DType::F16) {
      p.wscale = std::ldexp(1.f, f16_exp_);
      p.unscale = std::ldexp(1.f, -f16_exp_);
    }
    return p;
  }

  // The weight, the shape and the output fields every native kernel's parameters share.
  void fill_output(ggml::MmaParams& p, int M, const TensorView& y, const Epilogue& ep) const {
    p.w = planes_;
    p.N = N;
    p.K = K;
    p.M = M;
    p.y = y.data;
    p.ldy = y.ld();
    p.y_type = float_type_code(y.dtype, "cuda ggml native");
    p.bias = ep.bias.empty() ? nullptr : ep.bias.data;
    p.bias_type = ep.bias.empty() ? 2 : float_type_code(ep.bias.dtype, "cuda ggml native");
    p.clamp_lo = ep.clamp_lo;
    p.clamp_hi = ep.clamp_hi;
  }

  void run_cublas(const TensorView& x, const TensorView& y, const Epilogue& ep, char* ws,
                  cudaStream_t stream) const {
    const int64_t M = x.shape[0];
    const int xt = float_type_code(x.dtype, "cuda ggml native");
    const cudaDataType_t ab = cublas_type(x.dtype);
    char* chunk = ws;
    // cuBLAS writes C in X's type or f32; any other output type goes through f32 staging.
    const bool direct = y.dtype == x.dtype || y.dtype == DType::F32;
    void* c_ptr = direct ? y.data : ws + align256(size_t(chunk_rows_ * K * 4));
    const DType c_dtype = direct ? y.dtype : DType::F32;
    const int ct = float_type_code(c_dtype, "cuda ggml native");
    const cudaDataType_t c_type = cublas_type(c_dtype);
    const int64_t ldc = direct ? y.ld() : N;
    const int cb = ct == 2 ? 4 : 2;
    {
      std::lock_guard<std::mutex> lock(ctx_->cublas_mutex());  // the handle's stream is per call
      cublasHandle_t h = ctx_->cublas();
      MIXQ_CUBLAS_CHECK(cublasSetStream(h, stream));
      const float alpha = 1.f, beta = 0.f;
      for (int64_t n0 = 0; n0 < N; n0 += chunk_rows_) {
        const int64_t rows = std::min(chunk_rows_, N - n0);
        ggml::launch_dequant(type_, planes_, n0, rows, K, xt, chunk, K, caps_.sm_count, stream);
        MIXQ_CUBLAS_CHECK(cublasGemmEx(
            h, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), int(M), int(K), &alpha, chunk, ab, int(K),
            x.data, ab, int(x.ld()), &beta, static_cast<char*>(c_ptr) + n0 * cb, c_type, int(ldc),
            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
    }
    const bool clamp = std::isfinite(ep.clamp_lo) || std::isfinite(ep.clamp_hi);
    if (!ep.bias.empty() || clamp || !direct)
      launch_epilogue(c_ptr, ldc, ct, y.data, y.ld(), float_type_code(y.dtype, "cuda ggml native"),
                      M, N, ep.bias.empty() ? nullptr : ep.bias.data,
                      ep.bias.empty() ? 2 : float_type_code(ep.bias.dtype, "cuda ggml native"),
                      ep.clamp_lo, ep.clamp_hi, stream);
  }

  int device_ = 0;
  DeviceContext* ctx_ = nullptr;
  DeviceCaps caps_;
  GType type_ = GType::Q4_0;
  std::string type_name_;
  // the q8 tensor-core kernel's limit for f32 X, and for 16-bit X (0 unless set: the dequantizing
  // kernel takes over from the GEMV)
  int64_t gemv_max_ = 4, mma_max_ = kMmaMaxRows, mma_max_x16_ = 0, hmma_max_ = 128;
  int64_t stream_max_ = ggml::kStreamMaxRows;  // the few-token kernel's limit (16-bit X), 0: none
  std::optional<Path> forced_;
  int64_t chunk_rows_ = 1;
  int f16_exp_ = 0;  // f16_weight_exponent
  DeviceBuffer planes_buf_;
  ggml::GPlanes planes_;
  std::shared_ptr<DeviceBuffer> scratch_;
};

}  // namespace

bool use_ggml_native(const QuantizedWeight& w, const PrepareOptions& o) {
  GType t;
  if (!w.ggml || !gtype_of(w.ggml->type, t) || o.act != ActQuant::None ||
      o.tuning.cuda_ggml_native == Toggle::Off)
    return false;
  // A forced canonical kernel means the canonical form.
  return o.force_kernel.empty() || o.force_kernel.rfind("cuda_ggml", 0) == 0;
}

std::shared_ptr<const PreparedImpl> prepare_ggml_native(const QuantizedWeight& w,
                                                        const PrepareOptions& opts) {
  return std::make_shared<CudaGgmlNative>(w, opts);
}

}  // namespace mixq::cuda
