// conv2d as an implicit GEMM: output pixels are the GEMM rows. Each task gathers the im2col rows
// of a small tile of pixels into its own buffer (never the whole im2col matrix), stages them like
// linear activations, runs the same panel kernels and scatters the outputs (NCHW or NHWC).
#include <algorithm>
#include <vector>

#include "cpu/activation_staging.hpp"
#include "cpu/cpu_prepared.hpp"
#include "cpu/thread_pool.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cpu {

namespace {

struct ConvDims {
  int64_t B, Ci, H, W, Ho, Wo, Kh, Kw;
  bool nchw;
};

// (ci, kh, kw) of canonical column k.
struct KTap {
  int32_t ci, kh, kw;
};

std::vector<KTap> k_taps(const ConvGeometry& g) {
  std::vector<KTap> t(static_cast<size_t>(g.Ci * g.Kh * g.Kw));
  for (int64_t ci = 0; ci < g.Ci; ++ci)
    for (int64_t kh = 0; kh < g.Kh; ++kh)
      for (int64_t kw = 0; kw < g.Kw; ++kw) {
        const int64_t k = g.order == ConvKOrder::KhKwCi ? (kh * g.Kw + kw) * g.Ci + ci
                                                         : (ci * g.Kh + kh) * g.Kw + kw;
        t[k] = {int32_t(ci), int32_t(kh), int32_t(kw)};
      }
  return t;
}

// Canonical columns k0 .. k0 + len - 1 that read channels ci0 .. ci0 + len - 1 of one tap: the
// gather copies a run with one bounds test and one dtype dispatch. KhKwCi weights give Kh * Kw
// runs of Ci columns (contiguous in an NHWC image); CiKhKw weights runs of one column.
struct KRun {
  int64_t k0, len;
  int32_t ci0, kh, kw;
};

std::vector<KRun> k_runs(const std::vector<KTap>& taps) {
  std::vector<KRun> runs;
  for (size_t k = 0; k < taps.size(); ++k) {
    const KTap& t = taps[k];
    if (!runs.empty()) {
      KRun& r = runs.back();
      if (t.kh == r.kh && t.kw == r.kw && t.ci == r.ci0 + r.len) {
        ++r.len;
        continue;
      }
    }
    runs.push_back({int64_t(k), 1, t.ci, t.kh, t.kw});
  }
  return runs;
}

// dst[i] = float(src[i * step]) for i < n (the exact conversion of each input dtype).
void gather_floats(float* dst, const TensorView& x, int64_t xi, int64_t step, int64_t n) {
  switch (x.dtype) {
    case DType::F16: {
      const uint16_t* s = x.ptr<const uint16_t>() + xi;
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i * step]);
      break;
    }
    case DType::BF16: {
      const uint16_t* s = x.ptr<const uint16_t>() + xi;
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i * step]);
      break;
    }
    default: {
      const float* s = x.ptr<const float>() + xi;
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i * step];
      break;
    }
  }
}

}  // namespace

void CpuPrepared::conv2d(const TensorView& x, const TensorView& y, const Conv2dParams& p,
                         const Epilogue& ep, const ExecContext& ctx) const {
  MIXQ_CHECK(conv_path_ == CpuPath::F32 || conv_path_ == CpuPath::I8PerTensor, ErrorCode::Unsupported,
             "cpu backend: conv2d supports weight-only (f32 path) and int8-per-tensor, not ",
             act_quant_name(opts.act), " / ", kernel_name(1));
  ConvDims d{};
  d.nchw = p.layout == Layout::NCHW;
  d.B = x.shape[0];
  d.Ci = d.nchw ? x.shape[1] : x.shape[3];
  d.H = d.nchw ? x.shape[2] : x.shape[1];
  d.W = d.nchw ? x.shape[3] : x.shape[2];
  d.Kh = conv->Kh;
  d.Kw = conv->Kw;
  conv2d_output_size(d.H, d.W, d.Kh, d.Kw, p, &d.Ho, &d.Wo);
  const int64_t pixels = d.B * d.Ho * d.Wo;
  const std::vector<KRun> runs = k_runs(k_taps(*conv));
  const int64_t c_step = d.nchw ? d.H * d.W : 1;  // from channel ci to ci + 1 in x
  const bool int_mode = conv_path_ == CpuPath::I8PerTensor;
  const int threads = resolve_num_threads(ctx.num_threads);

  // Tile of pixels per task: enough rows for the 8-row register tiles, staging kept ~<= 1 MB.
  const int64_t per_row = pw_.Kp * (int_mode ? 1 : 4) + K * (int_mode ? 1 : 4);
  int64_t tile = std::clamp<int64_t>((1 << 20) / std::max<int64_t>(per_row, 1), 8, 64);
  tile = std::min(tile, std::max<int64_t>(1, (pixels + threads - 1) / threads));
  const int64_t m_tasks = (pixels + tile - 1) / tile;
  const int64_t groups = std::clamp<int64_t>((2 * threads + m_tasks - 1) / m_tasks, 1, pw_.n_panels);
  const int64_t ppt = (pw_.n_panels + groups - 1) / groups;
  const int64_t p_tasks = (pw_.n_panels + ppt - 1) / ppt;

  parallel_for(threads, m_tasks * p_tasks, [&](int64_t t) {
    const int64_t mt = t / p_tasks, pt = t % p_tasks;
    const int64_t q0 = mt * tile, q1 = std::min(pixels, q0 + tile), rows = q1 - q0;
    const int64_t p0 = pt * ppt, p1 = std::min(pw_.n_panels, p0 + ppt);
    std::vector<uint8_t> mem(staging_bytes(rows, conv_path_) + 64 +
                             static_cast<size_t>(rows * (p1 - p0) * kLanes * 4));
    char* base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(mem.data()) + 63) / 64 * 64);
    const StagedRows st = carve_staging(base, rows, conv_path_);
    void* c = base + staging_bytes(rows, conv_path_);
    std::vector<int64_t> row_off(static_cast<size_t>(rows));
    std::vector<float> gf;
    std::vector<int8_t> gi;
    if (int_mode) gi.resize(static_cast<size_t>(rows * K));
    else gf.resize(static_cast<size_t>(rows * K));
    const int8_t zero_code = static_cast<int8_t>(opts.input_quant.zero);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t q = q0 + r, b = q / (d.Ho * d.Wo), oh = (q / d.Wo) % d.Ho, ow = q % d.Wo;
      row_off[r] = d.nchw ? b * N * d.Ho * d.Wo + oh * d.Wo + ow : ((b * d.Ho + oh) * d.Wo + ow) * N;
      for (const KRun& run : runs) {
        const int64_t ih = oh * p.stride_h - p.pad_h + run.kh * p.dilation_h;
        const int64_t iw = ow * p.stride_w - p.pad_w + run.kw * p.dilation_w;
        const bool inside = ih >= 0 && ih < d.H && iw >= 0 && iw < d.W;
        const int64_t xi = d.nchw ? ((b * d.Ci + run.ci0) * d.H + ih) * d.W + iw
                                  : ((b * d.H + ih) * d.W + iw) * d.Ci + run.ci0;
        if (int_mode) {
          int8_t* g = gi.data() + r * K + run.k0;
          if (!inside) {
            // A padding position holds the real value 0, i.e. the code Z_I.
            std::fill(g, g + run.len, zero_code);
          } else {
            const int8_t* src = x.ptr<const int8_t>() + xi;
            for (int64_t i = 0; i < run.len; ++i) g[i] = src[i * c_step];
          }
        } else {
          float* g = gf.data() + r * K + run.k0;
          if (!inside) std::fill(g, g + run.len, 0.f);
          else gather_floats(g, x, xi, c_step, run.len);
        }
      }
    }
    if (int_mode)
      stage_int8_tensor_gathered(gi.data(), rows, pw_, const_cast<uint8_t*>(st.xb));
    else
      stage_float_gathered(gf.data(), rows, pw_, const_cast<float*>(st.xf),
                           const_cast<float*>(st.xsum));
    const int64_t ldc = (p1 - p0) * kLanes;
    compute(st, rows, p0, p1, rows > kGemvMaxRows, conv_path_, c, ldc);
    finish(c, ldc, rows, p0, p1, ep, OutMap{y.data, y.dtype, row_off.data(), d.nchw ? d.Ho * d.Wo : 1});
  });
}

}  // namespace mixq::cpu
