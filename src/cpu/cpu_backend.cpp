// The optimized CPU backend: prepare (repack), linear driver, epilogue. See docs/cpu-backend.md.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/activation_staging.hpp"
#include "cpu/ggml/native_prepared.hpp"
#include "cpu/cpu_prepared.hpp"
#include "cpu/thread_pool.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq {

namespace cpu {

namespace {
size_t align64(size_t v) { return (v + 63) / 64 * 64; }

float bias_at(const Epilogue& ep, int64_t n) {
  if (ep.bias.empty()) return 0.f;
  const int64_t i = n * ep.bias.stride[0];
  switch (ep.bias.dtype) {
    case DType::F16: return f16_to_f32(ep.bias.ptr<const uint16_t>()[i]);
    case DType::BF16: return bf16_to_f32(ep.bias.ptr<const uint16_t>()[i]);
    default: return ep.bias.ptr<const float>()[i];
  }
}
}  // namespace

CpuPrepared::CpuPrepared(const QuantizedWeight& w, const ConvGeometry* g,
                         const PrepareOptions& o)
    : kt_(&select_kernels(o.cpu_isa)), direct_f32_(w.code_type == DType::F32 && !w.has_scales) {
  // The kernel set first: an unavailable one fails before the (long) repacking.
  pw_ = pack_weight(w);
  // Weight-only activations: the accuracy mode of Tuning::cpu_activations, and under auto the
  // kernel set's measured int8 threshold for this code width (kernel_policy.cpp).
  const bool integer = is_integer(w.code_type);
  const Tuning::CpuActivations mode = o.tuning.cpu_activations;
  small_rows_ = auto_int8_max_rows(kt_->isa, pw_.kind == CodeKind::Int4);
  small_path_ = choose_path(o.act, o.force_kernel, integer, 1, mode, small_rows_);
  path_ = small_rows_ == kAnyRows
              ? small_path_
              : choose_path(o.act, o.force_kernel, integer, small_rows_ + 1, mode, small_rows_);
  conv_path_ = choose_path(o.act, o.force_kernel, integer, kAnyRows, Tuning::CpuActivations::Exact);
  backend = BackendKind::CPU;
  opts = o;
  N = w.N;
  K = w.K;
  if (g) conv = *g;
  if (path_ == CpuPath::I8PerTensor) {
    // int32 accumulation of (x + 128) * q per row: |sum| <= 255 * 128 * K.
    MIXQ_CHECK(w.K <= 65536, ErrorCode::Unsupported, "cpu backend: int8-per-tensor with K (",
               w.K, ") > 65536 would overflow the int32 accumulator");
    qsum_total_.assign(static_cast<size_t>(w.N), 0);
    row_scale_.assign(static_cast<size_t>(w.N), 0.f);
    const int64_t ns = pw_.n_segs();
    for (int64_t n = 0; n < w.N; ++n) {
      for (int64_t s = 0; s < ns; ++s)
        qsum_total_[n] += pw_.qsum[static_cast<size_t>(((n / kLanes) * ns + s) * kLanes + n % kLanes)];
      row_scale_[n] = w.scale(n, 0);
    }
  }
  int64_t acc = 0;
  for (int64_t s = 0; s < pw_.n_segs(); ++s) {
    if (s == 0 || acc >= kGemmChunkK) {
      chunk_starts_.push_back(s);
      acc = 0;
    }
    acc += pw_.segs[s].len;
  }
  chunk_starts_.push_back(pw_.n_segs());
}

std::string CpuPrepared::kernel_name(int64_t M) const {
  return cpu_kernel_name(kt_->isa, path_for(M), M);
}

size_t CpuPrepared::staging_bytes(int64_t rows, CpuPath path) const {
  const size_t r = static_cast<size_t>(rows), kp = static_cast<size_t>(pw_.Kp),
               ns = static_cast<size_t>(pw_.n_segs());
  if (int_path(path)) return align64(r * kp) + align64(r * ns * sizeof(ActSegment));
  return align64(r * kp * sizeof(float)) + align64(r * ns * sizeof(float));
}

StagedRows CpuPrepared::carve_staging(void* mem, int64_t rows, CpuPath path) const {
  StagedRows st;
  char* p = static_cast<char*>(mem);
  const size_t r = static_cast<size_t>(rows), kp = static_cast<size_t>(pw_.Kp);
  if (int_path(path)) {
    st.xb = reinterpret_cast<uint8_t*>(p);
    st.xs = reinterpret_cast<ActSegment*>(p + align64(r * kp));
  } else {
    st.xf = reinterpret_cast<float*>(p);
    st.xsum = reinterpret_cast<float*>(p + align64(r * kp * sizeof(float)));
  }
  return st;
}

bool CpuPrepared::prepacks(int64_t M) const {
  return M > kGemvMaxRows && !int_path(path_for(M));
}

size_t CpuPrepared::workspace_size(int64_t M) const {
  // staging, the output accumulators, and (float GEMM) the activations packed per tile.
  const size_t pack = prepacks(M) ? align64(static_cast<size_t>(M * pw_.Kp) * 4) : 0;
  return staging_bytes(M, path_for(M)) + align64(static_cast<size_t>(M * n_cols()) * 4) + pack +
         64;
}

namespace {
// A per-thread, 64-byte aligned float scratch that only grows (GEMM activation and weight tiles).
float* thread_scratch(int slot, size_t floats) {
  thread_local std::vector<float> buf[2];
  std::vector<float>& b = buf[slot];
  if (b.size() < floats + 16) b.resize(floats + 16);
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(b.data()) + 63) / 64 * 64);
}
}  // namespace

namespace {
// Register tiles of near-equal height <= kGemmMaxRows (16 rows: 8 + 8, not 12 + 4): starts.
std::vector<int64_t> gemm_tiles(int64_t rows) {
  const int64_t n_tiles = (rows + kGemmMaxRows - 1) / kGemmMaxRows;
  std::vector<int64_t> tile0(static_cast<size_t>(n_tiles + 1), 0);
  for (int64_t t = 0; t < n_tiles; ++t)
    tile0[t + 1] = tile0[t] + rows / n_tiles + (t < rows % n_tiles ? 1 : 0);
  return tile0;
}
}  // namespace

void CpuPrepared::pack_gemm_chunk(const float* x, int64_t rows, size_t ci, float* ap) const {
  const std::vector<int64_t> tile0 = gemm_tiles(rows);
  const int64_t kp0 = pw_.segs[chunk_starts_[ci]].kp0;
  const Segment& last = pw_.segs[chunk_starts_[ci + 1] - 1];
  const int64_t kc = last.kp0 + last.len - kp0;
  for (size_t t = 0; t + 1 < tile0.size(); ++t) {
    const int64_t r0 = tile0[t], tr = tile0[t + 1] - r0;
    float* dst = ap + r0 * kc;
    for (int64_t m = 0; m < tr; ++m) {
      const float* src = x + (r0 + m) * pw_.Kp + kp0;
      for (int64_t k = 0; k < kc; ++k) dst[k * tr + m] = src[k];
    }
  }
}

void CpuPrepared::compute_gemm(const float* x, const float* xpack, int64_t rows, int64_t p0,
                               int64_t p1, float* c, int64_t ldc) const {
  const std::vector<int64_t> tile0 = gemm_tiles(rows);
  const size_t n_tiles = tile0.size() - 1;
  for (size_t ci = 0; ci + 1 < chunk_starts_.size(); ++ci) {
    const int64_t s0 = chunk_starts_[ci], s1 = chunk_starts_[ci + 1];
    const int64_t kp0 = pw_.segs[s0].kp0;
    const int64_t kc = pw_.segs[s1 - 1].kp0 + pw_.segs[s1 - 1].len - kp0;
    // Activations of this K chunk as [tile][k][tile rows]: packed once per call by linear(), or
    // here (conv2d tiles).
    const float* ap = xpack ? xpack + rows * kp0 : nullptr;
    if (!ap) {
      float* buf = thread_scratch(0, static_cast<size_t>(rows * kc));
      pack_gemm_chunk(x, rows, ci, buf);
      ap = buf;
    }
    // Weights of the chunk, dequantized to f32 once per call (dense f32 ones are used in place).
    float* wb = direct_f32_ ? nullptr : thread_scratch(1, static_cast<size_t>(2 * kc * kLanes));
    for (int64_t p = p0; p < p1; p += 2) {
      const bool two = p + 1 < p1;
      const float* w[2] = {nullptr, nullptr};
      for (int i = 0; i < (two ? 2 : 1); ++i) {
        if (direct_f32_) {
          w[i] = reinterpret_cast<const float*>(pw_.panel_codes(p + i)) + kp0 * kLanes;
        } else {
          kt_->decode_panel(pw_, p + i, s0, s1, wb + i * kc * kLanes);
          w[i] = wb + i * kc * kLanes;
        }
      }
      for (size_t t = 0; t < n_tiles; ++t) {
        const int64_t r0 = tile0[t];
        kt_->gemm_tile(GemmTileArgs{ap + r0 * kc, static_cast<int>(tile0[t + 1] - r0), w[0], w[1],
                                    kc, c + r0 * ldc + (p - p0) * kLanes, ldc, ci > 0});
      }
    }
  }
}

void CpuPrepared::compute(const StagedRows& st, int64_t rows, int64_t p0, int64_t p1,
                          bool chunked, CpuPath path, void* c, int64_t ldc) const {
  if (chunked && !int_path(path))
    return compute_gemm(st.xf, st.xpack, rows, p0, p1, static_cast<float*>(c), ldc);
  const int64_t ns = pw_.n_segs();
  const std::vector<int64_t> whole = {0, ns};
  const std::vector<int64_t>& chunks = chunked ? chunk_starts_ : whole;
  const bool int_mode = path == CpuPath::I8PerTensor;
  for (size_t ci = 0; ci + 1 < chunks.size(); ++ci) {
    for (int64_t p = p0; p < p1; ++p) {
      for (int64_t r0 = 0; r0 < rows; r0 += kMaxTileRows) {
        const int tr = static_cast<int>(std::min<int64_t>(kMaxTileRows, rows - r0));
        const int64_t col = (p - p0) * kLanes;
        if (int_path(path)) {
          IntTileArgs a{&pw_, p, chunks[ci], chunks[ci + 1], st.xb + r0 * pw_.Kp, pw_.Kp,
                        st.xs ? st.xs + r0 * ns : nullptr, ns, tr, int_mode,
                        static_cast<char*>(c) + (r0 * ldc + col) * 4, ldc, ci > 0};
          kt_->int_tile(a);
        } else {
          FloatTileArgs a{&pw_, p, chunks[ci], chunks[ci + 1], st.xf + r0 * pw_.Kp, pw_.Kp,
                          st.xsum + r0 * ns, ns, tr,
                          static_cast<float*>(c) + r0 * ldc + col, ldc, ci > 0};
          kt_->float_tile(a);
        }
      }
    }
  }
}

void CpuPrepared::finish(const void* c, int64_t ldc, int64_t rows, int64_t p0, int64_t p1,
                         const Epilogue& ep, const OutMap& out) const {
  const int64_t n0 = p0 * kLanes, n1 = std::min(N, p1 * kLanes);
  for (int64_t m = 0; m < rows; ++m) {
    const int64_t ro = out.row_off[m];
    for (int64_t n = n0; n < n1; ++n) {
      const int64_t oi = ro + n * out.col_stride;
      if (path_ == CpuPath::I8PerTensor) {
        // Exactly ref::linear_int8_requant: exact integer sum, scaling and rounding in double.
        const int64_t acc = static_cast<int64_t>(static_cast<const int32_t*>(c)[m * ldc + n - n0]) -
                            int64_t(opts.input_quant.zero) * qsum_total_[n];
        double real = double(opts.input_quant.scale) * double(row_scale_[n]) * double(acc);
        real += ep.bias.empty() ? 0.0 : double(bias_at(ep, n));
        if (real < ep.clamp_lo) real = ep.clamp_lo;
        if (real > ep.clamp_hi) real = ep.clamp_hi;
        if (out.dtype == DType::I8) {
          double q = std::nearbyint(real / double(opts.output_quant.scale)) + opts.output_quant.zero;
          q = std::min(127.0, std::max(-128.0, q));
          static_cast<int8_t*>(out.base)[oi] = static_cast<int8_t>(q);
        } else {
          static_cast<float*>(out.base)[oi] = static_cast<float>(real);
        }
        continue;
      }
      float v = static_cast<const float*>(c)[m * ldc + n - n0] + bias_at(ep, n);
      if (v < ep.clamp_lo) v = ep.clamp_lo;
      if (v > ep.clamp_hi) v = ep.clamp_hi;
      switch (out.dtype) {
        case DType::F16: static_cast<uint16_t*>(out.base)[oi] = f32_to_f16(v); break;
        case DType::BF16: static_cast<uint16_t*>(out.base)[oi] = f32_to_bf16(v); break;
        default: static_cast<float*>(out.base)[oi] = v; break;
      }
    }
  }
}

void CpuPrepared::linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
                         const ExecContext& ctx) const {
  // Stage the activations once (k_perm gather, conversion, quantization), in row blocks.
  const RowReader rr{x.data, x.dtype, x.ld()};
  run_linear(x.shape[0], y, ep, ctx, [&](CpuPath path, const StagedRows& st, int64_t m0,
                                         int64_t m1) {
    switch (path) {
      case CpuPath::F32:
        stage_float_rows(rr, pw_, m0, m1, const_cast<float*>(st.xf) + m0 * pw_.Kp,
                         const_cast<float*>(st.xsum) + m0 * pw_.n_segs());
        break;
      case CpuPath::Fp8:
        stage_fp8_rows(rr, pw_, m0, m1, const_cast<float*>(st.xf) + m0 * pw_.Kp,
                       const_cast<float*>(st.xsum) + m0 * pw_.n_segs());
        break;
      case CpuPath::W8A8:
      case CpuPath::I8Dot:
        stage_int8_block_rows(rr, pw_, path == CpuPath::W8A8 ? opts.act_block : 0, m0, m1,
                              const_cast<uint8_t*>(st.xb) + m0 * pw_.Kp,
                              const_cast<ActSegment*>(st.xs) + m0 * pw_.n_segs(), kt_->quantize_i8);
        break;
      case CpuPath::I8PerTensor:
        stage_int8_tensor_rows(x.ptr<const int8_t>(), x.ld(), pw_, m0, m1,
                               const_cast<uint8_t*>(st.xb) + m0 * pw_.Kp);
        break;
    }
  });
}

void CpuPrepared::linear_quantized(const QuantizedActivations& xq, const TensorView& y,
                                   const Epilogue& ep, const ExecContext& ctx) const {
  // The caller's codes and meta (validated CPU views), staged straight from where they are.
  const int64_t M = xq.q.shape[0];
  if (opts.act == ActQuant::Fp8Block) {
    run_linear(M, y, ep, ctx, [&](CpuPath, const StagedRows& st, int64_t m0, int64_t m1) {
      stage_fp8_quantized_rows(xq, pw_, m0, m1, const_cast<float*>(st.xf) + m0 * pw_.Kp,
                               const_cast<float*>(st.xsum) + m0 * pw_.n_segs());
    });
    return;
  }
  if (opts.act != ActQuant::Int8Block) return PreparedImpl::linear_quantized(xq, y, ep, ctx);
  run_linear(M, y, ep, ctx, [&](CpuPath, const StagedRows& st, int64_t m0, int64_t m1) {
    stage_int8_block_quantized_rows(xq, pw_, m0, m1, const_cast<uint8_t*>(st.xb) + m0 * pw_.Kp,
                                    const_cast<ActSegment*>(st.xs) + m0 * pw_.n_segs());
  });
}

void CpuPrepared::run_linear(int64_t M, const TensorView& y, const Epilogue& ep,
                             const ExecContext& ctx, const StageFn& stage) const {
  const int threads = resolve_num_threads(ctx.num_threads);
  const WorkSplit split = plan_work(M, pw_.n_panels, threads);

  // Workspace: the caller's when given (it must be large enough), else a call-local buffer.
  const size_t need = workspace_size(M);
  std::vector<uint8_t> own;
  char* ws;
  if (ctx.workspace) {
    MIXQ_CHECK_ARG(ctx.workspace_bytes >= need, "ExecContext: workspace_bytes (",
                   ctx.workspace_bytes, ") < linear_workspace_size (", need, ") for M = ", M);
    ws = static_cast<char*>(ctx.workspace);
  } else {
    own.resize(need);
    ws = reinterpret_cast<char*>(own.data());
  }
  ws = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(ws) + 63) / 64 * 64);
  const CpuPath path = path_for(M);
  StagedRows st = carve_staging(ws, M, path);
  void* cbuf = ws + staging_bytes(M, path);
  const int64_t ldc = n_cols();
  float* xpack = prepacks(M) ? reinterpret_cast<float*>(static_cast<char*>(cbuf) +
                                                        align64(static_cast<size_t>(M * ldc) * 4))
                             : nullptr;

  const int64_t stage_rows = std::max<int64_t>(1, std::min<int64_t>(16, (M + threads - 1) / threads));
  parallel_for(threads, (M + stage_rows - 1) / stage_rows, [&](int64_t t) {
    const int64_t m0 = t * stage_rows;
    stage(path, st, m0, std::min(M, m0 + stage_rows));
  });

  const int64_t m_tasks = (M + split.rows_per_task - 1) / split.rows_per_task;
  const int64_t p_tasks = (pw_.n_panels + split.panels_per_task - 1) / split.panels_per_task;
  if (xpack) {
    // Pack the staged rows per GEMM register tile once (every panel-group task reads them), as
    // [row block][chunk][tile][k][tile rows].
    const int64_t n_chunks = static_cast<int64_t>(chunk_starts_.size()) - 1;
    parallel_for(threads, m_tasks * n_chunks, [&](int64_t t) {
      const int64_t mt = t / n_chunks, ci = t % n_chunks;
      const int64_t m0 = mt * split.rows_per_task, m1 = std::min(M, m0 + split.rows_per_task);
      pack_gemm_chunk(st.xf + m0 * pw_.Kp, m1 - m0, static_cast<size_t>(ci),
                      xpack + m0 * pw_.Kp + (m1 - m0) * pw_.segs[chunk_starts_[ci]].kp0);
    });
  }
  parallel_for(threads, m_tasks * p_tasks, [&](int64_t t) {
    const int64_t mt = t / p_tasks, pt = t % p_tasks;
    const int64_t m0 = mt * split.rows_per_task, m1 = std::min(M, m0 + split.rows_per_task);
    const int64_t p0 = pt * split.panels_per_task,
                  p1 = std::min(pw_.n_panels, p0 + split.panels_per_task);
    StagedRows s = st;
    if (s.xf) { s.xf += m0 * pw_.Kp; s.xsum += m0 * pw_.n_segs(); }
    if (xpack) s.xpack = xpack + m0 * pw_.Kp;
    if (s.xb) s.xb += m0 * pw_.Kp;
    if (s.xs) s.xs += m0 * pw_.n_segs();
    char* c = static_cast<char*>(cbuf) + (m0 * ldc + p0 * kLanes) * 4;
    compute(s, m1 - m0, p0, p1, split.chunk_k > 0, path, c, ldc);
    std::vector<int64_t> row_off(static_cast<size_t>(m1 - m0));
    for (int64_t m = m0; m < m1; ++m) row_off[m - m0] = m * y.ld();
    finish(c, ldc, m1 - m0, p0, p1, ep, OutMap{y.data, y.dtype, row_off.data(), 1});
  });
}

}  // namespace cpu

std::shared_ptr<const PreparedImpl> prepare_cpu(const QuantizedWeight& w, const ConvGeometry* conv,
                                                const PrepareOptions& opts) {
  // GGUF block weights run at their own width (src/cpu/ggml/) unless the options rule it out.
  if (cpu::ggml::use_native(w, conv, opts)) return std::make_shared<cpu::ggml::NativePrepared>(w, opts);
  return std::make_shared<cpu::CpuPrepared>(w, conv, opts);
}

}  // namespace mixq
