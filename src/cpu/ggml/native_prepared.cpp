// Native GGUF weights on the CPU: prepare (repack), activation staging, the per-task loop over
// panel chunks, epilogue. Kernels: native_kernels_*.cpp.
#include "cpu/ggml/native_prepared.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/ggml/block_decode.hpp"
#include "cpu/kernel_policy.hpp"
#include "cpu/thread_pool.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cpu::ggml {

namespace {

// K elements of one panel chunk: 16 rows x 512 codes (+ lane scales) of the integer form is
// ~18 KB, the f32 form 32 KB: both stay in L1 / the near L2 while every activation row of the
// task passes over them.
constexpr int64_t kChunkK = 512;
constexpr int64_t kRowsPerTask = 256;

int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }
size_t align64(size_t v) { return (v + 63) / 64 * 64; }

struct TraitsOf {
  int* bias;
  bool* has_min;
  template <GgmlType T> void operator()() const {
    *bias = GgmlTraits<T>::bias;
    *has_min = GgmlTraits<T>::has_min;
  }
};

// Grow-only, 64-byte aligned per-thread scratch (decoded panel chunks, tile accumulators).
template <typename T>
T* scratch(int slot, size_t n) {
  thread_local std::vector<unsigned char> buf[3];
  std::vector<unsigned char>& b = buf[slot];
  const size_t bytes = n * sizeof(T) + 64;
  if (b.size() < bytes) b.resize(bytes);
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(b.data()) + 63) / 64 * 64);
}

// One activation row as f32 (any input dtype), zero-padded to kp.
void read_row(const TensorView& x, int64_t m, int64_t K, int64_t kp, float* out) {
  const int64_t ld = x.ld();
  if (x.dtype == DType::F32) {
    std::memcpy(out, static_cast<const float*>(x.data) + m * ld, static_cast<size_t>(K) * 4);
  } else {
    const uint16_t* h = static_cast<const uint16_t*>(x.data) + m * ld;
    for (int64_t k = 0; k < K; ++k)
      out[k] = x.dtype == DType::F16 ? f16_to_f32(h[k]) : bf16_to_f32(h[k]);
  }
  std::fill(out + K, out + kp, 0.f);
}

// Per 32 along K, symmetric: dx = amax / 127, qx = round(x / dx) (ggml's quantize_row_q8_0
// arithmetic); per lane of 4: dx and -bias * sum(qx); per 16: the f32 sum of x.
void quantize_row(const float* x, int64_t kp, int bias, int8_t* q, float* dxl, int32_t* binit,
                  float* xs16) {
  for (int64_t b = 0; b < kp; b += 32) {
    float amax = 0.f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    const float d = amax / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    for (int i = 0; i < 32; ++i) {
      const float v = std::round(x[b + i] * id);
      q[b + i] = static_cast<int8_t>(std::min(127.f, std::max(-127.f, v)));
    }
    for (int l = 0; l < 8; ++l) {
      const int8_t* ql = q + b + 4 * l;
      dxl[b / 4 + l] = d;
      binit[b / 4 + l] = -bias * (int32_t(ql[0]) + ql[1] + ql[2] + ql[3]);
    }
    for (int h = 0; h < 2; ++h) {
      float s = 0.f;
      for (int i = 0; i < 16; ++i) s += x[b + 16 * h + i];
      xs16[b / 16 + h] = s;
    }
  }
}

float bias_at(const Epilogue& ep, int64_t n) {
  if (ep.bias.empty()) return 0.f;
  const int64_t i = n * ep.bias.stride[0];
  switch (ep.bias.dtype) {
    case DType::F16: return f16_to_f32(ep.bias.ptr<const uint16_t>()[i]);
    case DType::BF16: return bf16_to_f32(ep.bias.ptr<const uint16_t>()[i]);
    default: return ep.bias.ptr<const float>()[i];
  }
}

// Register tiles of near-equal height <= kGemmMaxRows: their first rows (plus the end).
std::vector<int64_t> gemm_tiles(int64_t rows) {
  const int64_t n = (rows + kGemmMaxRows - 1) / kGemmMaxRows;
  std::vector<int64_t> t0(static_cast<size_t>(n + 1), 0);
  for (int64_t t = 0; t < n; ++t) t0[t + 1] = t0[t] + rows / n + (t < rows % n ? 1 : 0);
  return t0;
}

// Staged activations of one call (pointers into the workspace).
struct Staged {
  int64_t kp = 0;
  // integer path
  int8_t* q = nullptr;
  float* dxl = nullptr;
  int32_t* binit = nullptr;
  float* xs16 = nullptr;
  int64_t ldq = 0;  // q row stride; dxl / binit: ldq / 4; xs16: ldq / 16 (+ 16 slack)
  // float path
  float* xf = nullptr;
  float* xpack = nullptr;  // GEMM: per row block, per chunk, [tile][kc][tile rows]
};

size_t staging_bytes(int64_t M, int64_t kp, NativePath path, bool gemm) {
  const size_t m = static_cast<size_t>(M), k = static_cast<size_t>(kp);
  if (path == NativePath::I8)
    return align64(m * k) + 2 * align64(m * k) + align64(m * (k / 16 + 16) * 4) + 64;
  return align64(m * k * 4) * (gemm ? 2 : 1) + 64;
}

}  // namespace

bool use_native(const QuantizedWeight& w, const ConvGeometry* conv, const PrepareOptions& o) {
  return w.ggml && native_type_supported(w.ggml->type) && conv == nullptr &&
         o.act == ActQuant::None && o.tuning.cpu_ggml_native != Toggle::Off;
}

NativePrepared::NativePrepared(const QuantizedWeight& w, const PrepareOptions& o)
    : nw_(repack_native(w, 0)),
      nk_(&select_native_kernels(o.cpu_isa)),
      kt_(&select_kernels(nk_->isa)),
      force_(o.force_kernel) {
  // Validates force_kernel now (unknown names throw InvalidArgument naming it).
  (void)choose_path(ActQuant::None, force_, true, 1);
  backend = BackendKind::CPU;
  opts = o;
  N = w.N;
  K = w.K;
  dispatch_type(nw_.type, TraitsOf{&bias_, &has_min_});
}

NativePath NativePrepared::path_for(int64_t M) const {
  if (!force_.empty())
    return choose_path(ActQuant::None, force_, true, M) == CpuPath::I8Dot ? NativePath::I8
                                                                           : NativePath::F32;
  return M <= kNativeI8MaxRows ? NativePath::I8 : NativePath::F32;
}

std::string NativePrepared::kernel_name(int64_t M) const {
  const char* kind = path_for(M) == NativePath::I8 ? "i8dot"
                     : M <= kGemvMaxRows           ? "f32gemv"
                                                   : "f32gemm";
  return std::string("cpu_") + nk_->isa + "_" + kind + "<" +
         formats::ggml_type_name(static_cast<uint32_t>(nw_.type)) + ">";
}

size_t NativePrepared::workspace_size(int64_t M) const {
  const NativePath path = path_for(M);
  return staging_bytes(M, round_up(K, kPad), path, path == NativePath::F32 && M > kGemvMaxRows);
}

void NativePrepared::linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
                            const ExecContext& ctx) const {
  const int64_t M = x.shape[0];
  const NativePath path = path_for(M);
  const bool gemm = path == NativePath::F32 && M > kGemvMaxRows;
  const int threads = resolve_num_threads(ctx.num_threads);
  const int64_t kp = round_up(K, kPad);

  // Workspace: the caller's, or one allocated for this call.
  const size_t need = staging_bytes(M, kp, path, gemm);
  std::vector<unsigned char> own;
  unsigned char* ws = static_cast<unsigned char*>(ctx.workspace);
  if (!ws || ctx.workspace_bytes < need) {
    MIXQ_CHECK_ARG(ws == nullptr, "linear: workspace_bytes (", ctx.workspace_bytes,
                   ") is smaller than linear_workspace_size (", need, ")");
    own.resize(need);
    ws = own.data();
  }
  ws = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(ws) + 63) / 64 * 64);
  Staged st;
  st.kp = kp;
  const size_t m = static_cast<size_t>(M), k = static_cast<size_t>(kp);
  if (path == NativePath::I8) {
    st.ldq = kp;
    st.q = reinterpret_cast<int8_t*>(ws);
    st.dxl = reinterpret_cast<float*>(ws + align64(m * k));
    st.binit = reinterpret_cast<int32_t*>(ws + 2 * align64(m * k));
    st.xs16 = reinterpret_cast<float*>(ws + 3 * align64(m * k));
  } else {
    st.xf = reinterpret_cast<float*>(ws);
    if (gemm) st.xpack = reinterpret_cast<float*>(ws + align64(m * k * 4));
  }

  // Stage the activation rows once per call, in parallel row blocks.
  const int64_t stage_rows = std::max<int64_t>(1, std::min<int64_t>(16, (M + threads - 1) / threads));
  parallel_for(threads, (M + stage_rows - 1) / stage_rows, [&](int64_t t) {
    float* row = scratch<float>(0, static_cast<size_t>(kp));
    for (int64_t r = t * stage_rows; r < std::min(M, (t + 1) * stage_rows); ++r) {
      if (path == NativePath::I8) {
        read_row(x, r, K, kp, row);
        quantize_row(row, kp, bias_, st.q + r * kp, st.dxl + r * (kp / 4), st.binit + r * (kp / 4),
                     st.xs16 + r * (kp / 16 + 16));
      } else {
        read_row(x, r, K, kp, st.xf + r * kp);
      }
    }
  });

  const int64_t qk = nw_.qk;
  const int64_t blocks_per_chunk = kChunkK / qk;
  const int64_t n_chunks = (nw_.n_blocks + blocks_per_chunk - 1) / blocks_per_chunk;
  const int64_t rows_per_task = M <= kGemvMaxRows ? M : std::min<int64_t>(M, kRowsPerTask);
  const int64_t m_tasks = (M + rows_per_task - 1) / rows_per_task;

  if (gemm) {
    // Pack each row block's activations per K chunk and register tile once ([tile][kc][rows]),
    // since every panel-pair task of the block reads them.
    parallel_for(threads, m_tasks * n_chunks, [&](int64_t t) {
      const int64_t mt = t / n_chunks, ci = t % n_chunks;
      const int64_t m0 = mt * rows_per_task, m1 = std::min(M, m0 + rows_per_task);
      const int64_t k0 = ci * kChunkK, kc = std::min(kChunkK, K - k0);
      const std::vector<int64_t> t0 = gemm_tiles(m1 - m0);
      float* base = st.xpack + m0 * kp + (m1 - m0) * k0;
      for (size_t ti = 0; ti + 1 < t0.size(); ++ti) {
        const int64_t r0 = t0[ti], tr = t0[ti + 1] - r0;
        float* dst = base + r0 * kc;
        for (int64_t mm = 0; mm < tr; ++mm) {
          const float* src = st.xf + (m0 + r0 + mm) * kp + k0;
          for (int64_t kk = 0; kk < kc; ++kk) dst[kk * tr + mm] = src[kk];
        }
      }
    });
  }

  // Tasks: row blocks x panel groups (panel pairs for the GEMM tile), ~4 per thread.
  const int64_t unit = gemm ? 2 : 1;
  const int64_t n_units = (nw_.n_panels + unit - 1) / unit;
  const int64_t want = 4 * static_cast<int64_t>(threads);
  const int64_t groups = std::clamp<int64_t>((want + m_tasks - 1) / m_tasks, 1, n_units);
  const int64_t units_per_task = (n_units + groups - 1) / groups;
  const int64_t p_tasks = (n_units + units_per_task - 1) / units_per_task;

  parallel_for(threads, m_tasks * p_tasks, [&](int64_t t) {
    const int64_t mt = t / p_tasks, pt = t % p_tasks;
    const int64_t m0 = mt * rows_per_task, m1 = std::min(M, m0 + rows_per_task), rows = m1 - m0;
    const int64_t pu0 = pt * units_per_task * unit,
                  pu1 = std::min(nw_.n_panels, (pt + 1) * units_per_task * unit);
    const int64_t ldc = unit * kPanelRows;
    float* c = scratch<float>(1, static_cast<size_t>(rows * ldc));
    const std::vector<int64_t> t0 = gemm ? gemm_tiles(rows) : std::vector<int64_t>();
    for (int64_t p = pu0; p < pu1; p += unit) {
      const int np = static_cast<int>(std::min<int64_t>(unit, pu1 - p));
      std::fill(c, c + rows * ldc, 0.f);
      for (int64_t ci = 0; ci < n_chunks; ++ci) {
        const int64_t kb0 = ci * blocks_per_chunk;
        const int64_t nb = std::min(blocks_per_chunk, nw_.n_blocks - kb0);
        const int64_t k0 = kb0 * qk, kc = nb * qk, kcp = round_up(kc, kPad);
        if (gemm) {
          float* wb = scratch<float>(2, static_cast<size_t>(2 * kc * kPanelRows));
          for (int i = 0; i < np; ++i) nk_->decode_f32_t(nw_, p + i, kb0, nb, wb + i * kc * kPanelRows);
          const float* ap = st.xpack + m0 * kp + rows * k0;
          for (size_t ti = 0; ti + 1 < t0.size(); ++ti) {
            const int64_t r0 = t0[ti];
            kt_->gemm_tile(GemmTileArgs{ap + r0 * kc, static_cast<int>(t0[ti + 1] - r0), wb,
                                        np == 2 ? wb + kc * kPanelRows : nullptr, kc,
                                        c + r0 * ldc, ldc, ci > 0});
          }
        } else if (path == NativePath::I8) {
          const int64_t ldu = kcp;
          uint8_t* u = scratch<uint8_t>(2, static_cast<size_t>(kPanelRows * ldu +
                                                               2 * kPanelRows * (ldu / 16) * 4 + 64));
          float* s16 = reinterpret_cast<float*>(u + kPanelRows * ldu);
          float* o16 = s16 + kPanelRows * (ldu / 16);
          nk_->decode_i8(nw_, p, kb0, nb, u, s16, o16, ldu);
          I8DotArgs a{u, s16, o16, ldu, nw_.rows_in_panel(p),
                      st.q + m0 * kp + k0, st.dxl + m0 * (kp / 4) + k0 / 4,
                      st.binit + m0 * (kp / 4) + k0 / 4, st.xs16 + m0 * (kp / 16 + 16) + k0 / 16,
                      kp, static_cast<int>(rows), kcp, has_min_, bias_, c, ldc};
          nk_->dot_i8(a);
        } else {
          float* wb = scratch<float>(2, static_cast<size_t>(kPanelRows * kcp));
          nk_->decode_f32(nw_, p, kb0, nb, wb, kcp);
          nk_->dot_f32(F32DotArgs{wb, kcp, nw_.rows_in_panel(p), st.xf + m0 * kp + k0, kp,
                                  static_cast<int>(rows), kcp, c, ldc});
        }
      }
      // Epilogue: bias, clamp, output dtype.
      const int64_t n0 = p * kPanelRows, n1 = std::min(N, (p + np) * kPanelRows);
      for (int64_t r = 0; r < rows; ++r) {
        char* yrow = static_cast<char*>(y.data) + (m0 + r) * y.ld() * dtype_bytes(y.dtype, 1);
        for (int64_t n = n0; n < n1; ++n) {
          float v = c[r * ldc + (n - n0)] + bias_at(ep, n);
          if (v < ep.clamp_lo) v = ep.clamp_lo;
          if (v > ep.clamp_hi) v = ep.clamp_hi;
          switch (y.dtype) {
            case DType::F16: reinterpret_cast<uint16_t*>(yrow)[n] = f32_to_f16(v); break;
            case DType::BF16: reinterpret_cast<uint16_t*>(yrow)[n] = f32_to_bf16(v); break;
            default: reinterpret_cast<float*>(yrow)[n] = v; break;
          }
        }
      }
    }
  });
}

}  // namespace mixq::cpu::ggml
