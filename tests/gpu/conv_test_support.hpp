// Shared by the CUDA conv2d tests (test_cuda_conv.cpp: weight-only; test_cuda_conv_int8.cpp: the
// INT8 per-tensor conv): random data, the ConvCase description of one call, its geometry and views,
// the weight-only run against the float64 reference, and the clear-error check.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gpu/device_checks.hpp"
#include "gpu/host_data.hpp"
#include "gpu/test_tuning.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"

namespace mixq {
namespace {

using test::randn;  // the same generator as every other test (test_random.hpp)

size_t esize(DType t) { return size_t(dtype_bits(t) / 8); }

struct ConvCase {
  int64_t B = 1, Ci = 16, H = 9, W = 9, Co = 16, Kh = 3, Kw = 3;
  int64_t sh = 1, sw = 1, ph = 1, pw = 1, dh = 1, dw = 1;
  Layout layout = Layout::NHWC;
  ConvKOrder order = ConvKOrder::KhKwCi;
  std::string scheme = "w4g32";  // code type and zero form (parse_scheme)
  // channels per scale block along Ci (both orders: block_k = cb (KhKwCi) or cb * Kh * Kw
  // (CiKhKw)); 0: per output channel (block_k = K)
  int64_t cb = 0;
  DType xt = DType::F32, yt = DType::F32;
  bool f32_scales = false;  // else the scheme's (f16)
  bool offset_x = false;    // x one element past a 16-byte boundary
  bool bias = false;
  Epilogue clamp = {};
  std::string force;  // PrepareOptions::force_kernel (sm80_conv_igemm: the sm_80 implicit GEMM)
  std::string tuning;  // the kernels' knobs ("key=value,...", test_tuning.hpp) over the default
};

// A geometry with the same stride, padding and dilation along H and W (the sweeps' tables).
struct SquareConv {
  int64_t B, Ci, H, W, Co, Kh, Kw, s, pad, dil;
};

inline std::string describe(const ConvCase& c) {
  std::string s = "B" + std::to_string(c.B) + " Ci" + std::to_string(c.Ci) + " " +
                  std::to_string(c.H) + "x" + std::to_string(c.W) + " Co" + std::to_string(c.Co) +
                  " k" + std::to_string(c.Kh) + "x" + std::to_string(c.Kw) + " s" +
                  std::to_string(c.sh) + "," + std::to_string(c.sw) + " p" + std::to_string(c.ph) +
                  "," + std::to_string(c.pw) + " d" + std::to_string(c.dh) + "," +
                  std::to_string(c.dw);
  s += c.layout == Layout::NCHW ? " NCHW" : " NHWC";
  s += c.order == ConvKOrder::KhKwCi ? " KhKwCi " : " CiKhKw ";
  s += c.scheme + " cb" + std::to_string(c.cb) + (c.offset_x ? " x-offset" : "") +
       " x=" + dtype_name(c.xt) + " y=" + dtype_name(c.yt) + (c.bias ? " bias" : "") + " clamp[" +
       std::to_string(c.clamp.clamp_lo) + ", " + std::to_string(c.clamp.clamp_hi) + "]" +
       (c.force.empty() ? "" : " forced " + c.force) +
       (c.tuning.empty() ? "" : " tuning " + c.tuning);
  return s;
}

inline ConvWeight make_conv_weight(const ConvCase& c, uint32_t seed) {
  const int64_t K = c.Ci * c.Kh * c.Kw;
  std::vector<float> w = randn(size_t(c.Co * K), seed, 0.05f);
  QuantScheme s = parse_scheme(c.scheme);
  s.block_k = c.cb == 0 ? K : c.order == ConvKOrder::KhKwCi ? c.cb : c.cb * c.Kh * c.Kw;
  if (c.f32_scales) s.scale_type = DType::F32;
  ConvWeight cw;
  cw.weight = quantize_weight(TensorView(w.data(), DType::F32, {c.Co, K}), s);
  cw.Ci = c.Ci;
  cw.Kh = c.Kh;
  cw.Kw = c.Kw;
  cw.order = c.order;
  return cw;
}

inline Conv2dParams params_of(const ConvCase& c) {
  Conv2dParams p;
  p.stride_h = c.sh;
  p.stride_w = c.sw;
  p.pad_h = c.ph;
  p.pad_w = c.pw;
  p.dilation_h = c.dh;
  p.dilation_w = c.dw;
  p.layout = c.layout;
  return p;
}

TensorView act_view(void* data, DType t, const ConvCase& c, int64_t C, int64_t H, int64_t W,
                    Device dev) {
  return c.layout == Layout::NCHW ? TensorView(data, t, {c.B, C, H, W}, dev)
                                  : TensorView(data, t, {c.B, H, W, C}, dev);
}

inline PrepareOptions cuda_opts() {
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  return o;
}

struct ConvRun {
  std::vector<uint8_t> y;   // the GPU output bytes
  double rel_err = 1.0;     // relative Frobenius error vs the float64 reference
  double max_err = 1.0;     // largest |error| / RMS of the reference
};

// Runs c once on the GPU (output poisoned with NaN bytes first) and compares with the reference.
// x_values: x in c's layout (default: randn(seed + 1)); workspace_bytes: a caller workspace of
// that many bytes (default: none, the reserved scratch).
inline ConvRun run_conv(const ConvCase& c, const ConvWeight& cw, uint32_t seed,
                        const std::vector<float>* x_values = nullptr,
                        std::optional<size_t> workspace_bytes = std::nullopt) {
  ConvRun r;
  const Conv2dParams p = params_of(c);
  int64_t Ho = 0, Wo = 0;
  conv2d_output_size(c.H, c.W, c.Kh, c.Kw, p, &Ho, &Wo);
  PrepareOptions o = test::with_tuning(cuda_opts(), c.tuning);
  o.force_kernel = c.force;
  const PreparedWeight pw = prepare(cw, o);
  const std::vector<uint8_t> xb = test::to_bytes(
      x_values ? *x_values : randn(size_t(c.B * c.Ci * c.H * c.W), seed + 1), c.xt);
  const size_t ny = size_t(c.B * c.Co * Ho * Wo);
  const size_t xoff = c.offset_x ? esize(c.xt) : 0;
  DeviceBuffer dx(xb.size() + 16), dy(ny * esize(c.yt));
  dx.copy_from_host(xb.data(), xb.size(), xoff);
  void* xdev = static_cast<char*>(dx.data()) + xoff;
  // 0xFF bytes are NaN in every float type: every element must be overwritten.
  MIXQ_CHECK(cudaMemset(dy.data(), 0xFF, dy.size()) == cudaSuccess, ErrorCode::Cuda, "memset");
  Epilogue ep = c.clamp, rep = c.clamp;
  std::vector<float> bias_h;
  DeviceBuffer dbias;
  if (c.bias) {
    bias_h = randn(size_t(c.Co), seed + 2, 0.5f);
    dbias = DeviceBuffer(bias_h.size() * 4);
    dbias.copy_from_host(bias_h.data(), bias_h.size() * 4);
    ep.bias = dbias.view(DType::F32, {c.Co});
    rep.bias = TensorView(bias_h.data(), DType::F32, {c.Co});
  }
  DeviceBuffer ws;
  ExecContext ctx;
  if (workspace_bytes) {
    ws = DeviceBuffer(std::max<size_t>(*workspace_bytes, 16));
    ctx.workspace = ws.data();
    ctx.workspace_bytes = *workspace_bytes;
  }
  conv2d(act_view(xdev, c.xt, c, c.Ci, c.H, c.W, Device::CUDA), pw,
         act_view(dy.data(), c.yt, c, c.Co, Ho, Wo, Device::CUDA), p, ep, ctx);
  MIXQ_CHECK(cudaDeviceSynchronize() == cudaSuccess, ErrorCode::Cuda, "sync");
  r.y.resize(dy.size());
  dy.copy_to_host(r.y.data(), r.y.size());
  std::vector<double> ref(ny);
  ref::conv2d_weight_only(act_view(const_cast<uint8_t*>(xb.data()), c.xt, c, c.Ci, c.H, c.W, Device::CPU),
                          cw, act_view(ref.data(), DType::F64, c, c.Co, Ho, Wo, Device::CPU), p, rep);
  double num = 0, den = 0, worst = 0;
  for (size_t i = 0; i < ny; ++i) {
    const double a = test::value(r.y, c.yt, i), b = ref[i];
    if (!std::isfinite(a)) {
      ADD_FAILURE() << describe(c) << ": output element " << i << " not written or not finite: " << a;
      return r;
    }
    num += (a - b) * (a - b);
    den += b * b;
    worst = std::max(worst, std::fabs(a - b));
  }
  const double rms = std::sqrt(den / double(ny));
  r.rel_err = std::sqrt(num / std::max(den, 1e-300));
  r.max_err = worst / std::max(rms, 1e-300);
  return r;
}

inline double tolerance(DType x, DType y) {
  if (x == DType::BF16 || y == DType::BF16) return 8e-3;
  if (x == DType::F16 || y == DType::F16) return 1.5e-3;
  return 1e-4;  // f32 in and out: the bf16 split
}

inline void expect_conv_ok(const ConvCase& c, uint32_t seed) {
  const ConvWeight cw = make_conv_weight(c, seed);
  const ConvRun r = run_conv(c, cw, seed);
  const double tol = tolerance(c.xt, c.yt);
  EXPECT_LE(r.rel_err, tol) << describe(c);
  // one element may be off by a few output roundings, never by a missing tap or channel
  EXPECT_LE(r.max_err, 12 * tol) << describe(c);
}

// Runs f, which must throw mixq::Error of `code` whose message contains `needle`.
template <typename F>
void expect_error(F&& f, ErrorCode code, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixq
