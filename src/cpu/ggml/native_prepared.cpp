// Native GGUF weights on the CPU: prepare (repack), activation staging, the per-task loop over
// panels, epilogue. Kernels: native_kernels_*.cpp.
#include "cpu/ggml/native_prepared.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/kernel_policy.hpp"
#include "cpu/thread_pool.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cpu::ggml {

namespace {

// Integer path: with more than one register tile of activation rows, K is cut into chunks so
// the panel's records of a chunk (Q4_K: 4 x 2.3 KB) and the tile's activation codes stay in L1
// while every tile passes over them. Exact path: chunks of 512 decoded f32 x 16 rows (32 KB).
constexpr int64_t kI8ChunkK = 1024;
constexpr int64_t kF32ChunkK = 512;
constexpr int64_t kI8TileRows = 4;  // rows of one integer register tile (the kernels' MR)

// Integer path: a task's activation codes (rows x K bytes) are read once per panel, so they
// must stay in the core's L2 (2 MB on Sapphire Rapids): at K = 14336, 256 rows (3.7 MB) streamed
// them from L3 for every panel. Rows per task: all of M up to 64, else as many as fit
// kI8TaskActBytes (multiples of the 8-row register tile, 32 to 256); more row tasks re-read the
// weights, which is cheap next to the 8 x 16 x K dot products per register tile. The row tasks
// are then evened out (M = 512 at K = 14336: 8 x 64 rows, not 7 x 72 + 8, which left one of
// two threads idle for a task).
constexpr int64_t kI8TaskActBytes = int64_t{1} << 20;
int64_t i8_rows_per_task(int64_t M, int64_t K) {
  if (M <= 64) return M;
  const int64_t cap =
      std::clamp<int64_t>(kI8TaskActBytes / std::max<int64_t>(K, 1) / 8 * 8, 32, kRowsPerTask);
  const int64_t n = (M + cap - 1) / cap;
  return ((M + n - 1) / n + 7) / 8 * 8;
}

size_t align64(size_t v) { return (v + 63) / 64 * 64; }

template <typename T>
T* scratch(int slot, size_t n) {
  thread_local std::vector<unsigned char> buf[3];
  std::vector<unsigned char>& b = buf[slot];
  const size_t bytes = n * sizeof(T) + 64;
  if (b.size() < bytes) b.resize(bytes);
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(b.data()) + 63) / 64 * 64);
}

// One activation row as f32 (any input dtype).
void read_row(const TensorView& x, int64_t m, int64_t K, float* out) {
  const int64_t ld = x.ld();
  if (x.dtype == DType::F32) {
    std::memcpy(out, static_cast<const float*>(x.data) + m * ld, static_cast<size_t>(K) * 4);
  } else {
    const uint16_t* h = static_cast<const uint16_t*>(x.data) + m * ld;
    for (int64_t k = 0; k < K; ++k)
      out[k] = x.dtype == DType::F16 ? f16_to_f32(h[k]) : bf16_to_f32(h[k]);
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

struct Layout {  // the workspace of one call
  size_t q = 0, dxs = 0, corr = 0, xs = 0, xpack = 0, total = 0;
};

Layout workspace_layout(int64_t M, int64_t K, int sub, NativePath path) {
  // Integer path: room for the packed form's whole groups of kPackRows rows.
  const int64_t Mr = path == NativePath::I8 ? (M + kPackRows - 1) / kPackRows * kPackRows : M;
  const size_t m = static_cast<size_t>(Mr), k = static_cast<size_t>(K);
  const size_t nj = k / static_cast<size_t>(sub);
  Layout l;
  if (path == NativePath::I8) {
    l.dxs = align64(m * k);
    l.corr = l.dxs + align64(m * nj * 4);
    l.xs = l.corr + align64(m * nj * 4);
    l.total = l.xs + align64(m * nj * 4) + 64;
  } else {
    l.total = align64(m * k * 4) + 64;
  }
  return l;
}

// The epilogue of one panel's outputs: per-column bias gathered once, the dtype switch hoisted
// out of the loops (at M = 512 the per-element form cost ~10 % of the call).
void write_outputs(const TensorView& y, const Epilogue& ep, const float* c, int64_t ldc,
                   int64_t m0, int64_t rows, int64_t n0, int64_t n1) {
  const int64_t w = n1 - n0;
  float bias[kPanelRows * 2];
  for (int64_t n = 0; n < w; ++n) bias[n] = bias_at(ep, n0 + n);
  const float lo = ep.clamp_lo, hi = ep.clamp_hi;
  const size_t row_bytes = static_cast<size_t>(y.ld()) * dtype_bytes(y.dtype, 1);
  for (int64_t r = 0; r < rows; ++r) {
    char* yrow = static_cast<char*>(y.data) + static_cast<size_t>(m0 + r) * row_bytes;
    const float* cr = c + r * ldc;
    float v[kPanelRows * 2];
    for (int64_t n = 0; n < w; ++n) v[n] = std::min(std::max(cr[n] + bias[n], lo), hi);
    switch (y.dtype) {
      case DType::F16:
        for (int64_t n = 0; n < w; ++n) reinterpret_cast<uint16_t*>(yrow)[n0 + n] = f32_to_f16(v[n]);
        break;
      case DType::BF16:
        for (int64_t n = 0; n < w; ++n) reinterpret_cast<uint16_t*>(yrow)[n0 + n] = f32_to_bf16(v[n]);
        break;
      default: std::memcpy(reinterpret_cast<float*>(yrow) + n0, v, static_cast<size_t>(w) * 4); break;
    }
  }
}

// The prefill path's activation staging: rows quantized one by one (quantize_row), then spread
// into the packed form of native_kernels.hpp (groups of kPackRows rows, 4-byte groups of codes
// and the per-sub-block arrays interleaved by row), so a register tile reads every row's
// operand at a fixed offset from one pointer.
void stage_packed_rows(const NativeKernels& nk, const Format& f, const TensorView& x, int64_t M,
                       int64_t K, int8_t* q, float* dxs, int32_t* corr, float* xs, int threads) {
  const int64_t nj = K / f.sub, groups = (M + kPackRows - 1) / kPackRows;
  parallel_for(threads, groups, [&](int64_t g) {
    float* tmp = x.dtype == DType::F32 ? nullptr : scratch<float>(0, static_cast<size_t>(K));
    int8_t* qr = scratch<int8_t>(1, static_cast<size_t>(K + 3 * nj * 4));
    float* dr = reinterpret_cast<float*>(qr + K);
    int32_t* cr = reinterpret_cast<int32_t*>(dr + nj);
    float* xr = reinterpret_cast<float*>(cr + nj);
    int8_t* qg = q + g * K * kPackRows;
    const int64_t jg = g * nj * kPackRows;
    for (int64_t lane = 0; lane < kPackRows && g * kPackRows + lane < M; ++lane) {
      const int64_t r = g * kPackRows + lane;
      const float* row = static_cast<const float*>(x.data) + r * x.ld();
      if (tmp) {
        read_row(x, r, K, tmp);
        row = tmp;
      }
      nk.quantize_row(row, K, f.sub, f.bias, qr, dr, cr, xr);
      for (int64_t k4 = 0; k4 < K / 4; ++k4)
        std::memcpy(qg + (k4 * kPackRows + lane) * 4, qr + 4 * k4, 4);
      for (int64_t j = 0; j < nj; ++j) {
        dxs[jg + j * kPackRows + lane] = dr[j];
        corr[jg + j * kPackRows + lane] = cr[j];
        xs[jg + j * kPackRows + lane] = xr[j];
      }
    }
  });
}

}  // namespace

int64_t native_i8_max_rows(const std::string& isa, GgmlType type) {
  // avx512: the integer tile beat both the exact path and the canonical kernels at every
  // measured M (1 .. 512) for every type (bench/results/cpu_ggml_native.md).
  // avx2: with the prefill path (decoded chunk, vpmaddubsw pairs), the forced integer path ran
  // 1.6-2.4x faster than the exact path for Q4_K, Q5_K, Q6_K, Q8_0 and IQ4_XS at M = 16, 64 and
  // 512 (4096 x 4096, 1 thread), and up to M = 4 it already was (the canonical thresholds).
  // avx2vnni: the same kernels with one vpdpbusd where avx2 spends two to five instructions
  // (1.05-1.46x faster than avx2 on an Intel Xeon, bench/results/cpu_ggml_avx2vnni.md). The scalar set follows the canonical
  // backend's measured thresholds for its code width (docs/decisions/cpu-isa-dispatch.md).
  if (isa == "avx512" || isa == "avx2" || isa == "avx2vnni") return kAnyRows;
  const Format f = format_of(type);
  return auto_int8_max_rows(isa, f.lb == 4 && f.hb == 0);
}

bool use_native(const QuantizedWeight& w, const ConvGeometry* conv, const PrepareOptions& o) {
  return w.ggml && native_type_supported(w.ggml->type) && conv == nullptr &&
         o.act == ActQuant::None && o.tuning.cpu_ggml_native != Toggle::Off;
}

NativePrepared::NativePrepared(const QuantizedWeight& w, const PrepareOptions& o)
    : nw_(repack_native(w, 0)),
      nk_(&select_native_kernels(o.cpu_isa)),
      kt_(&select_kernels(o.cpu_isa)),
      force_(o.force_kernel),
      mode_(o.tuning.cpu_activations) {
  // Validates force_kernel now (unknown names throw InvalidArgument naming it).
  (void)choose_path(ActQuant::None, force_, true, 1, mode_);
  backend = BackendKind::CPU;
  opts = o;
  N = w.N;
  K = w.K;
  i8_max_rows_ = native_i8_max_rows(nk_->isa, nw_.type);
  // Where the prefill path's chunk decoding starts (docs/decisions/ggml-native-weights.md): the
  // register tiles (4 rows each, unpacking their own codes) were faster up to 32 rows on the
  // avx512 set of a non-Intel core (AMD EPYC, 1 and 2 threads: 1.6-2.2x at M = 8, 1.2-2x at 16,
  // ~1.1x at 32, even at 64) and, since its four-row tiles, up to 16 on the avx2 set (AVX2-only
  // AMD EPYC: 1.27x / 1.16x / 1.07x / 1.03x at M = 5 / 8 / 12 / 16 with one thread, 1.22x / 1.07x
  // at 8 / 16 with two; 0.97x at 24) and the avx2vnni set (Intel Xeon, one thread, six types x
  // two layers: 1.45x / 1.37x / 1.10x at M = 5 / 8 / 16, geomeans). Intel's avx512 set decodes
  // from 5 rows.
  const std::string isa(nk_->isa);
  decode_min_rows_ = o.tuning.cpu_ggml_decode_min_rows > 0 ? o.tuning.cpu_ggml_decode_min_rows
                     : isa == "avx512" && !cpu_features().intel ? 33
                     : isa == "avx2" || isa == "avx2vnni"       ? 17
                                                                : kI8TileRows + 1;
  // Auto: on Intel cores always; elsewhere (measured on an AMD EPYC) only for the 32-element
  // block types, whose light decode leaves the core waiting on the stream: the super-block types'
  // longer decode per byte ran 1.1-2x slower with the L1 prefetch than without.
  prefetch_l1_ = o.tuning.cpu_l1_prefetch == Toggle::Auto
                     ? cpu_features().intel || format_of(nw_.type).qk == 32
                     : o.tuning.cpu_l1_prefetch == Toggle::On;
  // One activation row on the avx512 set: on an AMD EPYC the avx2 set's single-row tile ran Q4_0
  // 1.12-1.32x and Q4_K 1.05-1.11x faster than the avx512 tile (1 thread, medians of 5
  // alternating runs; the avx512 tile itself ran faster at M = 2-4, and four dpbusd chains per
  // row changed nothing, so the cause is on the memory side). Q8_0 was even. Q6_K was 10% slower
  // until both sets spread their L2 prefetch over a record's spans; since then 1.13-1.18x faster
  // (medians of 8 alternating rounds; Q5_K 1.01-1.06x, left on avx512).
  nk_one_row_ = nk_;
  const Toggle one_row = o.tuning.cpu_avx2_single_row;
  const bool avx2_row = one_row == Toggle::On ||
                        (one_row == Toggle::Auto && !cpu_features().intel &&
                         (nw_.type == GgmlType::Q4_0 || nw_.type == GgmlType::Q4_K ||
                          nw_.type == GgmlType::Q6_K));
  if (avx2_row && std::string(nk_->isa) == "avx512" && native_avx2_kernels()) nk_one_row_ = native_avx2_kernels();
}

NativePath NativePrepared::path_for(int64_t M) const {
  return choose_path(ActQuant::None, force_, true, M, mode_, i8_max_rows_) == CpuPath::I8Dot
             ? NativePath::I8
             : NativePath::F32;
}

std::string NativePrepared::kernel_name(int64_t M) const {
  const char* kind = path_for(M) == NativePath::I8 ? "i8dot"
                     : M <= kGemvMaxRows           ? "f32gemv"
                                                   : "f32gemm";
  const NativeKernels* set = M == 1 && path_for(M) == NativePath::I8 ? nk_one_row_ : nk_;
  return std::string("cpu_") + set->isa + "_" + kind + "<" +
         formats::ggml_type_name(static_cast<uint32_t>(nw_.type)) + ">";
}

size_t NativePrepared::workspace_size(int64_t M) const {
  return workspace_layout(M, K, nw_.fmt.sub, path_for(M)).total;
}

void NativePrepared::linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
                            const ExecContext& ctx) const {
  const int64_t M = x.shape[0];
  const NativePath path = path_for(M);
  const int threads = resolve_num_threads(ctx.num_threads);
  const Format& f = nw_.fmt;
  const int64_t nj = K / f.sub;

  // Workspace: the caller's, or one allocated for this call.
  const Layout lay = workspace_layout(M, K, f.sub, path);
  std::vector<unsigned char> own;
  unsigned char* ws = static_cast<unsigned char*>(ctx.workspace);
  if (!ws || ctx.workspace_bytes < lay.total) {
    MIXQ_CHECK_ARG(ws == nullptr, "linear: workspace_bytes (", ctx.workspace_bytes,
                   ") is smaller than linear_workspace_size (", lay.total, ")");
    own.resize(lay.total);
    ws = own.data();
  }
  ws = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(ws) + 63) / 64 * 64);

  const int64_t rows_per_task =
      path == NativePath::I8 ? i8_rows_per_task(M, K) : (M <= kGemvMaxRows ? M : kRowsPerTask);
  const int64_t m_tasks = (M + rows_per_task - 1) / rows_per_task;

  if (path == NativePath::I8) {
    int8_t* q = reinterpret_cast<int8_t*>(ws + lay.q);
    float* dxs = reinterpret_cast<float*>(ws + lay.dxs);
    int32_t* corr = reinterpret_cast<int32_t*>(ws + lay.corr);
    float* xs = reinterpret_cast<float*>(ws + lay.xs);
    // Beyond one register tile the kernel set's prefill path runs (when it has one): each K
    // chunk of a panel decoded once per task, the activations packed by groups of kPackRows.
    const bool decoded = M >= decode_min_rows_ && nk_->decode_i8 != nullptr;
    // the set of the undecoded (register-tile) path: quantizes the rows and runs the tile
    const NativeKernels& ks = M == 1 ? *nk_one_row_ : *nk_;
    if (decoded) {
      stage_packed_rows(*nk_, f, x, M, K, q, dxs, corr, xs, threads);
    }
    // Else: quantize the activation rows once per call, in parallel row blocks.
    const int64_t stage_rows = std::max<int64_t>(1, std::min<int64_t>(16, (M + threads - 1) / threads));
    if (!decoded) parallel_for(threads, (M + stage_rows - 1) / stage_rows, [&](int64_t t) {
      const float* row = nullptr;
      float* tmp = x.dtype == DType::F32 ? nullptr : scratch<float>(0, static_cast<size_t>(K));
      for (int64_t r = t * stage_rows; r < std::min(M, (t + 1) * stage_rows); ++r) {
        if (tmp) {
          read_row(x, r, K, tmp);
          row = tmp;
        } else {
          row = static_cast<const float*>(x.data) + r * x.ld();
        }
        ks.quantize_row(row, K, f.sub, f.bias, q + r * K, dxs + r * nj, corr + r * nj, xs + r * nj);
      }
    });
    // Tasks: row blocks x panel groups, ~4 per thread.
    const int64_t want = 4 * static_cast<int64_t>(threads);
    const int64_t groups = std::clamp<int64_t>((want + m_tasks - 1) / m_tasks, 1, nw_.n_panels);
    const int64_t per_task = (nw_.n_panels + groups - 1) / groups;
    const int64_t p_tasks = (nw_.n_panels + per_task - 1) / per_task;
    parallel_for(threads, m_tasks * p_tasks, [&](int64_t t) {
      const int64_t mt = t / p_tasks, pt = t % p_tasks;
      const int64_t m0 = mt * rows_per_task, rows = std::min(M, m0 + rows_per_task) - m0;
      const int64_t p0 = pt * per_task, p1 = std::min(nw_.n_panels, p0 + per_task);
      // Prefill path: panels in pairs (the 2-panel register tile shares each activation
      // broadcast between two code registers), outputs of a pair side by side in c.
      const int64_t np_step = decoded ? 2 : 1, ldc = np_step * kPanelRows;
      float* c = scratch<float>(1, static_cast<size_t>(rows * ldc));
      // One register tile: the whole K in one pass (the weights stream once); more: K chunks,
      // each decoded once into the prefill form where the kernel set has one, so the per-code
      // unpacking is paid once per chunk instead of once per register tile.
      const bool one_tile = !decoded && rows <= kI8TileRows;
      const int64_t chunk_blocks = one_tile ? nw_.n_blocks : std::max<int64_t>(1, kI8ChunkK / f.qk);
      DecodedChunk dc[2] = {};
      uint8_t* dcodes[2] = {};
      float *ds[2] = {}, *dout[2] = {};
      if (decoded) {
        const int64_t kc = chunk_blocks * f.qk, nsub = kc / f.sub;
        const int64_t bytes = kc * kPanelRows + 2 * nsub * kPanelRows * 4;
        uint8_t* buf = scratch<uint8_t>(2, static_cast<size_t>(2 * bytes));
        for (int i = 0; i < 2; ++i) {
          dcodes[i] = buf + i * bytes;
          ds[i] = reinterpret_cast<float*>(dcodes[i] + kc * kPanelRows);
          dout[i] = ds[i] + nsub * kPanelRows;
          dc[i] = DecodedChunk{dcodes[i], ds[i], f.has_min() ? dout[i] : nullptr};
        }
      }
      for (int64_t p = p0; p < p1; p += np_step) {
        const int np = static_cast<int>(std::min<int64_t>(np_step, p1 - p));
        for (int64_t kb = 0; kb < nw_.n_blocks; kb += chunk_blocks) {
          // Row-major staging: row m0's arrays; packed: group m0 / kPackRows (m0 is a multiple).
          I8TileArgs a{&nw_, p, kb, std::min(nw_.n_blocks, kb + chunk_blocks),
                       q + m0 * K, decoded ? K * kPackRows : K, dxs + m0 * nj, corr + m0 * nj,
                       xs + m0 * nj, decoded ? nj * kPackRows : nj,
                       static_cast<int>(rows), c, ldc, kb > 0, prefetch_l1_};
          if (decoded) {
            for (int i = 0; i < np; ++i) nk_->decode_i8(nw_, p + i, a.kb0, a.kb1, dcodes[i], ds[i], dout[i]);
            nk_->i8_tile_decoded(a, dc, np);
          } else {
            ks.i8_tile(a);
          }
        }
        write_outputs(y, ep, c, ldc, m0, rows, p * kPanelRows, std::min(N, (p + np) * kPanelRows));
      }
    });
    return;
  }

  // Exact path. Activations packed once per row block and K chunk as the GEMM tile reads them
  // ([tile][kc][tile rows]); every panel-pair task of the block reads them.
  float* xpack = reinterpret_cast<float*>(ws);
  const int64_t blocks_per_chunk = kF32ChunkK / f.qk;
  const int64_t n_chunks = (nw_.n_blocks + blocks_per_chunk - 1) / blocks_per_chunk;
  parallel_for(threads, m_tasks * n_chunks, [&](int64_t t) {
    const int64_t mt = t / n_chunks, ci = t % n_chunks;
    const int64_t m0 = mt * rows_per_task, m1 = std::min(M, m0 + rows_per_task);
    const int64_t k0 = ci * kF32ChunkK, kc = std::min(kF32ChunkK, K - k0);
    const std::vector<int64_t> t0 = gemm_tiles(m1 - m0);
    float* base = xpack + m0 * K + (m1 - m0) * k0;
    float* row = scratch<float>(0, static_cast<size_t>(K));
    for (size_t ti = 0; ti + 1 < t0.size(); ++ti) {
      const int64_t r0 = t0[ti], tr = t0[ti + 1] - r0;
      float* dst = base + r0 * kc;
      for (int64_t mm = 0; mm < tr; ++mm) {
        read_row(x, m0 + r0 + mm, K, row);
        for (int64_t kk = 0; kk < kc; ++kk) dst[kk * tr + mm] = row[k0 + kk];
      }
    }
  });

  // Tasks: row blocks x groups of panel pairs, ~4 per thread.
  const int64_t n_units = (nw_.n_panels + 1) / 2;
  const int64_t want = 4 * static_cast<int64_t>(threads);
  const int64_t groups = std::clamp<int64_t>((want + m_tasks - 1) / m_tasks, 1, n_units);
  const int64_t units_per_task = (n_units + groups - 1) / groups;
  const int64_t p_tasks = (n_units + units_per_task - 1) / units_per_task;
  parallel_for(threads, m_tasks * p_tasks, [&](int64_t t) {
    const int64_t mt = t / p_tasks, pt = t % p_tasks;
    const int64_t m0 = mt * rows_per_task, m1 = std::min(M, m0 + rows_per_task), rows = m1 - m0;
    const int64_t pu0 = pt * units_per_task * 2,
                  pu1 = std::min(nw_.n_panels, (pt + 1) * units_per_task * 2);
    const int64_t ldc = 2 * kPanelRows;
    float* c = scratch<float>(1, static_cast<size_t>(rows * ldc + 2 * kF32ChunkK * kPanelRows + 16));
    float* wb = c + ((rows * ldc + 15) / 16) * 16;
    const std::vector<int64_t> t0 = gemm_tiles(rows);
    for (int64_t p = pu0; p < pu1; p += 2) {
      const int np = static_cast<int>(std::min<int64_t>(2, pu1 - p));
      for (int64_t ci = 0; ci < n_chunks; ++ci) {
        const int64_t kb0 = ci * blocks_per_chunk;
        const int64_t nb = std::min(blocks_per_chunk, nw_.n_blocks - kb0);
        const int64_t k0 = kb0 * f.qk, kc = nb * f.qk;
        for (int i = 0; i < np; ++i) nk_->decode_f32_t(nw_, p + i, kb0, nb, wb + i * kc * kPanelRows);
        const float* ap = xpack + m0 * K + rows * k0;
        for (size_t ti = 0; ti + 1 < t0.size(); ++ti) {
          const int64_t r0 = t0[ti];
          kt_->gemm_tile(GemmTileArgs{ap + r0 * kc, static_cast<int>(t0[ti + 1] - r0), wb,
                                      np == 2 ? wb + kc * kPanelRows : nullptr, kc,
                                      c + r0 * ldc, ldc, ci > 0});
        }
      }
      write_outputs(y, ep, c, ldc, m0, rows, p * kPanelRows, std::min(N, (p + np) * kPanelRows));
    }
  });
}

}  // namespace mixq::cpu::ggml
