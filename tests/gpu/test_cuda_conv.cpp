// CUDA weight-only conv2d (the implicit GEMM, and the linear path of 1x1 NHWC convs) against the
// float64 reference conv (ref::conv2d_weight_only) on random data. Skipped (visibly) without a GPU.
//
// Tolerances (relative Frobenius error over the whole output, and the largest element error
// relative to the reference's RMS): the kernel rounds each dequantized weight once to the MMA
// operand type (f16: 2^-12, bf16: 2^-9 relative) and the output once to its type; f32
// activations run the three-product bf16 split (~2^-16). See docs/cuda-conv.md.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/device_checks.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/mnn.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"

using namespace mixq;

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

size_t esize(DType t) { return size_t(dtype_bits(t) / 8); }

// Host values rounded to dtype t, as raw bytes.
std::vector<uint8_t> to_bytes(const std::vector<float>& v, DType t) {
  std::vector<uint8_t> b(v.size() * esize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::F32) std::memcpy(b.data() + 4 * i, &v[i], 4);
    else {
      const uint16_t h = t == DType::F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
  }
  return b;
}

double value_at(const std::vector<uint8_t>& y, DType t, size_t i) {
  uint16_t h;
  switch (t) {
    case DType::F32: {
      float f;
      std::memcpy(&f, y.data() + 4 * i, 4);
      return f;
    }
    case DType::F16: std::memcpy(&h, y.data() + 2 * i, 2); return f16_to_f32(h);
    default: std::memcpy(&h, y.data() + 2 * i, 2); return bf16_to_f32(h);
  }
}

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
};

// A geometry with the same stride, padding and dilation along H and W (the sweeps' tables).
struct SquareConv {
  int64_t B, Ci, H, W, Co, Kh, Kw, s, pad, dil;
};

std::string describe(const ConvCase& c) {
  std::string s = "B" + std::to_string(c.B) + " Ci" + std::to_string(c.Ci) + " " +
                  std::to_string(c.H) + "x" + std::to_string(c.W) + " Co" + std::to_string(c.Co) +
                  " k" + std::to_string(c.Kh) + "x" + std::to_string(c.Kw) + " s" +
                  std::to_string(c.sh) + "," + std::to_string(c.sw) + " p" + std::to_string(c.ph) +
                  "," + std::to_string(c.pw) + " d" + std::to_string(c.dh) + "," +
                  std::to_string(c.dw);
  s += c.layout == Layout::NCHW ? " NCHW" : " NHWC";
  s += c.order == ConvKOrder::KhKwCi ? " KhKwCi " : " CiKhKw ";
  s += c.scheme + " cb" + std::to_string(c.cb) + (c.offset_x ? " x-offset" : "") + " x=" +
       dtype_name(c.xt) + " y=" +
       dtype_name(c.yt) + (c.bias ? " bias" : "") + " clamp[" + std::to_string(c.clamp.clamp_lo) +
       ", " + std::to_string(c.clamp.clamp_hi) + "]" + (c.force.empty() ? "" : " forced " + c.force);
  return s;
}

ConvWeight make_conv_weight(const ConvCase& c, uint32_t seed) {
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

Conv2dParams params_of(const ConvCase& c) {
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

PrepareOptions cuda_opts() {
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
ConvRun run_conv(const ConvCase& c, const ConvWeight& cw, uint32_t seed) {
  ConvRun r;
  const Conv2dParams p = params_of(c);
  int64_t Ho = 0, Wo = 0;
  conv2d_output_size(c.H, c.W, c.Kh, c.Kw, p, &Ho, &Wo);
  PrepareOptions o = cuda_opts();
  o.force_kernel = c.force;
  const PreparedWeight pw = prepare(cw, o);
  const std::vector<uint8_t> xb = to_bytes(randn(size_t(c.B * c.Ci * c.H * c.W), seed + 1), c.xt);
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
  conv2d(act_view(xdev, c.xt, c, c.Ci, c.H, c.W, Device::CUDA), pw,
         act_view(dy.data(), c.yt, c, c.Co, Ho, Wo, Device::CUDA), p, ep);
  MIXQ_CHECK(cudaDeviceSynchronize() == cudaSuccess, ErrorCode::Cuda, "sync");
  r.y.resize(dy.size());
  dy.copy_to_host(r.y.data(), r.y.size());
  std::vector<double> ref(ny);
  ref::conv2d_weight_only(act_view(const_cast<uint8_t*>(xb.data()), c.xt, c, c.Ci, c.H, c.W, Device::CPU),
                          cw, act_view(ref.data(), DType::F64, c, c.Co, Ho, Wo, Device::CPU), p, rep);
  double num = 0, den = 0, worst = 0;
  for (size_t i = 0; i < ny; ++i) {
    const double a = value_at(r.y, c.yt, i), b = ref[i];
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

double tolerance(DType x, DType y) {
  if (x == DType::BF16 || y == DType::BF16) return 8e-3;
  if (x == DType::F16 || y == DType::F16) return 1.5e-3;
  return 1e-4;  // f32 in and out: the bf16 split
}

void expect_conv_ok(const ConvCase& c, uint32_t seed) {
  const ConvWeight cw = make_conv_weight(c, seed);
  const ConvRun r = run_conv(c, cw, seed);
  const double tol = tolerance(c.xt, c.yt);
  EXPECT_LE(r.rel_err, tol) << describe(c);
  // one element may be off by a few output roundings, never by a missing tap or channel
  EXPECT_LE(r.max_err, 12 * tol) << describe(c);
}

}  // namespace

// Odd channel counts, odd spatial sizes, strides 2 and 3, dilation 2, padding larger than the
// kernel's half, batch 1 and 7, both layouts and both K orders; f32 in and out (tight tolerance).
TEST(CudaConv, GeometrySweep) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 100;
  struct G {
    int64_t B, Ci, H, W, Co, Kh, Kw, sh, sw, ph, pw, dh, dw;
  };
  const G geoms[] = {
      {1, 3, 11, 13, 17, 3, 3, 1, 1, 1, 1, 1, 1},      // RGB-like stem, odd Co
      {7, 17, 9, 7, 129, 3, 3, 2, 2, 1, 1, 1, 1},      // batch 7, stride 2, Co past two tiles
      {1, 129, 7, 7, 33, 3, 3, 1, 1, 1, 1, 1, 1},      // Ci with a 1-channel tail past 4 K steps
      {2, 32, 10, 9, 64, 3, 3, 3, 3, 0, 0, 1, 1},      // stride 3, no padding
      {1, 24, 12, 11, 40, 3, 3, 1, 1, 2, 2, 2, 2},     // dilation 2
      {1, 8, 5, 6, 24, 3, 3, 1, 1, 3, 4, 1, 1},        // padding larger than the kernel's half
      {2, 5, 15, 17, 9, 7, 7, 2, 2, 3, 3, 1, 1},       // 7x7 stride-2 stem
      {1, 16, 8, 8, 20, 1, 1, 2, 2, 0, 0, 1, 1},       // 1x1 stride 2 (implicit GEMM)
      {3, 40, 6, 7, 72, 1, 1, 1, 1, 1, 1, 1, 1},       // 1x1 padded (implicit GEMM)
      {1, 12, 9, 14, 16, 3, 5, 2, 1, 2, 1, 1, 3},      // rectangular kernel, mixed stride/dilation
      {1, 4, 1, 1, 8, 1, 1, 1, 1, 0, 0, 1, 1},         // single pixel
      {1, 6, 3, 3, 10, 3, 3, 1, 1, 0, 0, 1, 1},        // one output pixel, no padding
      {7, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1},     // M = 1372: many pixel tiles
  };
  for (const G& g : geoms)
    for (Layout layout : {Layout::NCHW, Layout::NHWC})
      for (ConvKOrder order : {ConvKOrder::KhKwCi, ConvKOrder::CiKhKw}) {
        ConvCase c;
        c.B = g.B; c.Ci = g.Ci; c.H = g.H; c.W = g.W; c.Co = g.Co; c.Kh = g.Kh; c.Kw = g.Kw;
        c.sh = g.sh; c.sw = g.sw; c.ph = g.ph; c.pw = g.pw; c.dh = g.dh; c.dw = g.dw;
        c.layout = layout;
        c.order = order;
        c.scheme = "w4g32asym";
        c.cb = 0;
        c.bias = true;
        expect_conv_ok(c, seed++);
      }
}

// Few input channels (Ci <= 16, more than one tap): the sm_80 kernel walks K = taps * Ci as one
// run of columns, each finding its own tap (packed taps), instead of padding every tap to 32
// channels. Ci 1, 3, 8, 16 (8 and 16 with 16-bit NHWC x: the 16-byte gather, whose runs of 8
// columns stay inside a tap), 7x7 stride 2 (the RGB stem), 3x3 dilated, 5x3; per-channel scales
// and blocks of 8 channels; both layouts and K orders; a K split (few pixel tiles) on the packed
// steps. Ci = 17 and 32 keep the per-tap walk.
TEST(CudaConv, PackedTapsForFewInputChannels) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 1900;
  const SquareConv geoms[] = {
      {2, 3, 23, 21, 64, 7, 7, 2, 3, 1},  // the stem, odd image
      {1, 1, 9, 10, 24, 3, 3, 1, 1, 2},   // one channel, dilation 2
      {3, 8, 11, 7, 40, 5, 3, 1, 2, 1},   // 5x3: a tap is 8 columns
      {1, 16, 13, 13, 72, 3, 3, 2, 1, 1}, // two taps per step
  };
  for (const SquareConv& g : geoms)
    for (Layout layout : {Layout::NCHW, Layout::NHWC})
      for (ConvKOrder order : {ConvKOrder::KhKwCi, ConvKOrder::CiKhKw})
        for (DType t : {DType::F32, DType::F16}) {
          ConvCase c;
          c.B = g.B; c.Ci = g.Ci; c.H = g.H; c.W = g.W; c.Co = g.Co; c.Kh = g.Kh; c.Kw = g.Kw;
          c.sh = c.sw = g.s; c.ph = c.pw = g.pad; c.dh = c.dw = g.dil;
          c.layout = layout;
          c.order = order;
          c.xt = c.yt = t;
          c.scheme = t == DType::F16 ? "w8g32zp" : "w4g32asym";
          c.cb = g.Ci % 8 == 0 && g.Ci > 8 ? 8 : 0;
          c.bias = true;
          c.clamp = Epilogue::relu6();
          c.force = "sm80_conv_igemm";
          const ConvWeight cw = make_conv_weight(c, seed);
          PrepareOptions o = cuda_opts();
          o.force_kernel = c.force;
          const std::string name = prepare(cw, o).kernel_name(1);
          EXPECT_NE(name.find("_packed"), std::string::npos) << describe(c) << ": " << name;
          expect_conv_ok(c, seed++);
        }
  // batch 1, 4 pixel tiles, 25 packed steps: split along K
  ConvCase c;
  c.B = 1; c.Ci = 16; c.H = c.W = 16; c.Co = 64; c.Kh = c.Kw = 7; c.ph = c.pw = 3;
  c.xt = c.yt = DType::F16;
  c.scheme = "w4g32";
  c.cb = 8;
  c.force = "sm80_conv_igemm";
  PrepareOptions o = cuda_opts();
  o.force_kernel = c.force;
  const std::string split_name = prepare(make_conv_weight(c, seed), o).kernel_name(256);
  EXPECT_NE(split_name.find("_packed_splitk"), std::string::npos) << split_name;
  expect_conv_ok(c, seed++);
  // past half a step of channels: the per-tap walk
  for (int64_t ci : {int64_t(17), int64_t(32)}) {
    ConvCase d;
    d.Ci = ci;
    d.force = "sm80_conv_igemm";
    const std::string name = prepare(make_conv_weight(d, seed), o).kernel_name(81);
    EXPECT_EQ(name.find("_packed"), std::string::npos) << "Ci " << ci << ": " << name;
    expect_conv_ok(d, seed++);
  }
}

// Every code type, zero form and block along Ci (32, 64, 128, per channel), in both K orders.
TEST(CudaConv, SchemesAndBlocks) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 300;
  for (const char* scheme : {"w4g32", "w4g32asym", "w4g32zp", "w8g32", "w8g32asym", "w8g32zp"})
    for (int64_t cb : {int64_t(32), int64_t(64), int64_t(128), int64_t(0)})
      for (ConvKOrder order : {ConvKOrder::KhKwCi, ConvKOrder::CiKhKw}) {
        ConvCase c;
        c.B = 2; c.Ci = 256; c.H = 7; c.W = 9; c.Co = 70;
        c.order = order;
        c.layout = seed % 2 ? Layout::NCHW : Layout::NHWC;
        c.scheme = scheme;
        c.cb = cb;
        expect_conv_ok(c, seed++);
      }
  // blocks of fewer channels than a K step (16 of 48; CiKhKw: 3 channels x 9 taps)
  for (ConvKOrder order : {ConvKOrder::KhKwCi, ConvKOrder::CiKhKw}) {
    ConvCase c;
    c.Ci = 48; c.Co = 24;
    c.order = order;
    c.scheme = "w4g32zp";
    c.cb = order == ConvKOrder::KhKwCi ? 16 : 3;
    expect_conv_ok(c, seed++);
  }
}

// Activation and output types, bias and clamps (ReLU, ReLU6, any [lo, hi]).
TEST(CudaConv, DtypesBiasAndClamp) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 500;
  Epilogue band;
  band.clamp_lo = -0.3f;
  band.clamp_hi = 0.2f;
  const Epilogue clamps[] = {Epilogue::none(), Epilogue::relu(), Epilogue::relu6(), band};
  int i = 0;
  for (DType xt : {DType::F32, DType::F16, DType::BF16})
    for (DType yt : {DType::F32, DType::F16, DType::BF16})
      for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
        ConvCase c;
        c.B = 2; c.Ci = 67; c.H = 10; c.W = 11; c.Co = 90;
        c.sh = 2; c.sw = 1;
        c.layout = layout;
        c.order = i % 2 ? ConvKOrder::CiKhKw : ConvKOrder::KhKwCi;
        c.scheme = i % 3 ? "w4g32asym" : "w8g32zp";
        c.cb = 0;
        c.xt = xt;
        c.yt = yt;
        c.bias = i % 2 == 0;
        c.clamp = clamps[i % 4];
        ++i;
        expect_conv_ok(c, seed++);
      }
  // NHWC 16-bit activations with Ci % 8 == 0 take the 16-byte gather: channel runs past Ci (24 of
  // a 32-channel step), padding, stride, dilation, and an x that is not 16-byte aligned (the
  // element-wise gather instead)
  for (DType xt : {DType::F16, DType::BF16})
    for (int64_t ci : {int64_t(24), int64_t(40), int64_t(136)}) {
      ConvCase c;
      c.B = 3; c.Ci = ci; c.H = 13; c.W = 9; c.Co = 72;
      c.sh = 2; c.sw = 1; c.ph = 2; c.pw = 3; c.dh = 2; c.dw = 1;
      c.layout = Layout::NHWC;
      c.order = ci == 40 ? ConvKOrder::CiKhKw : ConvKOrder::KhKwCi;
      c.scheme = "w4g32zp";
      c.cb = ci == 136 ? 8 : 0;
      c.xt = c.yt = xt;
      c.bias = true;
      expect_conv_ok(c, seed++);
      c.offset_x = true;
      expect_conv_ok(c, seed++);
    }
}

// The ResNet-50 layer shapes the benchmark times (batch 1, W4 g128 along Ci, f16).
TEST(CudaConv, ResNetLayers) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 700;
  struct L {
    int64_t Ci, H, Co, K, s, p;
  };
  for (const L& l : {L{64, 56, 64, 3, 1, 1}, L{128, 28, 128, 3, 1, 1}, L{256, 14, 256, 3, 1, 1},
                     L{512, 7, 512, 3, 1, 1}, L{3, 224, 64, 7, 2, 3}})
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      ConvCase c;
      c.Ci = l.Ci; c.H = c.W = l.H; c.Co = l.Co; c.Kh = c.Kw = l.K;
      c.sh = c.sw = l.s; c.ph = c.pw = l.p;
      c.layout = layout;
      c.scheme = "w4g32";
      c.cb = l.Ci % 128 == 0 ? 128 : 0;
      c.xt = c.yt = DType::F16;
      expect_conv_ok(c, seed++);
    }
}

// A 1x1 stride-1 unpadded NHWC conv is the linear product on [B*H*W][Ci]: bit-identical to
// linear() on the same weight and data (it runs the linear kernels). The same weight in NCHW or
// with stride 2 runs the implicit GEMM, checked against the reference.
TEST(CudaConv, OneByOneIsTheLinearKernel) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 900;
  for (const char* scheme : {"w4g128", "w8g128", "w4g32asym"})
    for (DType t : {DType::F16, DType::BF16, DType::F32}) {
      ConvCase c;
      c.B = 3; c.Ci = 256; c.H = 7; c.W = 9; c.Co = 136; c.Kh = c.Kw = 1;
      c.ph = c.pw = 0;
      c.scheme = scheme;
      c.cb = std::string(scheme).find("g32") != std::string::npos ? 32 : 128;
      c.xt = c.yt = t;
      c.bias = true;
      c.clamp = Epilogue::relu();
      const ConvWeight cw = make_conv_weight(c, seed);
      const ConvRun r = run_conv(c, cw, seed);
      EXPECT_LE(r.rel_err, tolerance(t, t)) << describe(c);
      // the linear call on the same bytes
      const int64_t M = c.B * c.H * c.W;
      const PreparedWeight pl = prepare(cw.weight, cuda_opts());
      const std::vector<uint8_t> xb = to_bytes(randn(size_t(M * c.Ci), seed + 1), t);
      DeviceBuffer dx(xb.size()), dy(size_t(M * c.Co) * esize(t));
      dx.copy_from_host(xb.data(), xb.size());
      ASSERT_EQ(cudaMemset(dy.data(), 0xFF, dy.size()), cudaSuccess);
      std::vector<float> bias_h = randn(size_t(c.Co), seed + 2, 0.5f);
      DeviceBuffer dbias(bias_h.size() * 4);
      dbias.copy_from_host(bias_h.data(), bias_h.size() * 4);
      Epilogue ep = Epilogue::relu();
      ep.bias = dbias.view(DType::F32, {c.Co});
      linear(dx.view(t, {M, c.Ci}), pl, dy.view(t, {M, c.Co}), ep);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint8_t> yl(dy.size());
      dy.copy_to_host(yl.data(), yl.size());
      EXPECT_EQ(r.y, yl) << "1x1 conv differs from linear: " << describe(c);
      // the same weight off the linear path
      for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
        ConvCase d = c;
        d.layout = layout;
        d.sh = layout == Layout::NCHW ? 1 : 2;
        expect_conv_ok(d, seed + 5);
      }
      ++seed;
    }
}

// MNN's [Co][Ci][Kh][Kw] int4 nibble layout through the importer (CiKhKw order, symmetric and
// asymmetric, blocks of B*Kh*Kw).
TEST(CudaConv, MnnInt4Weights) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 1100;
  for (bool asym : {false, true})
    for (int64_t cb : {int64_t(32), int64_t(0)}) {
      ConvCase c;
      c.B = 2; c.Ci = 64; c.H = 9; c.W = 8; c.Co = 48;
      c.order = ConvKOrder::CiKhKw;
      c.scheme = asym ? "w4g32asym" : "w4g32";
      c.cb = cb;
      c.xt = c.yt = DType::F16;
      c.f32_scales = true;  // MNN stores f32 alpha
      const ConvWeight src = make_conv_weight(c, seed);
      const ConvWeight imported = formats::mnn_int4_to_conv_weight(formats::mnn_int4_pack(src));
      ASSERT_EQ(imported.order, ConvKOrder::CiKhKw);
      const ConvRun r = run_conv(c, imported, seed);
      EXPECT_LE(r.rel_err, tolerance(c.xt, c.yt)) << describe(c) << " (mnn)";
      EXPECT_LE(r.max_err, 12 * tolerance(c.xt, c.yt)) << describe(c) << " (mnn)";
      ++seed;
    }
}

// One eager call, then a captured graph of three calls replayed: every replay gives the eager
// bits (no allocation or host synchronisation inside the call).
TEST(CudaConv, GraphCaptureReplaysEagerBits) {
  SKIP_WITHOUT_GPU();
  for (int64_t kh : {int64_t(3), int64_t(1)}) {  // the implicit GEMM and the 1x1 linear path
    ConvCase c;
    c.B = 2; c.Ci = 64; c.H = 14; c.W = 14; c.Co = 96; c.Kh = c.Kw = kh;
    c.ph = c.pw = kh / 2;
    c.scheme = "w4g32";
    c.cb = 32;
    c.xt = c.yt = DType::F16;
    const ConvWeight cw = make_conv_weight(c, 41);
    const PreparedWeight pw = prepare(cw, cuda_opts());
    const Conv2dParams p = params_of(c);
    int64_t Ho, Wo;
    conv2d_output_size(c.H, c.W, c.Kh, c.Kw, p, &Ho, &Wo);
    const std::vector<uint8_t> xb = to_bytes(randn(size_t(c.B * c.Ci * c.H * c.W), 42), c.xt);
    const size_t yb = size_t(c.B * c.Co * Ho * Wo) * 2;
    DeviceBuffer dx(xb.size()), dy1(yb), dy2(yb);
    dx.copy_from_host(xb.data(), xb.size());
    const size_t ws_bytes = std::max<size_t>(conv2d_workspace_size(pw, act_view(nullptr, c.xt, c, c.Ci, c.H, c.W, Device::CUDA), p), 16);
    DeviceBuffer ws(ws_bytes);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    ExecContext ctx;
    ctx.stream = s;
    ctx.workspace = ws.data();
    ctx.workspace_bytes = ws.size();
    const TensorView xv = act_view(dx.data(), c.xt, c, c.Ci, c.H, c.W, Device::CUDA);
    conv2d(xv, pw, act_view(dy1.data(), c.yt, c, c.Co, Ho, Wo, Device::CUDA), p, {}, ctx);
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    for (int i = 0; i < 3; ++i)
      conv2d(xv, pw, act_view(dy2.data(), c.yt, c, c.Co, Ho, Wo, Device::CUDA), p, {}, ctx);
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int rep = 0; rep < 3; ++rep) {
      ASSERT_EQ(cudaMemsetAsync(dy2.data(), 0xFF, yb, s), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      std::vector<uint8_t> a(yb), b(yb);
      dy1.copy_to_host(a.data(), yb);
      dy2.copy_to_host(b.data(), yb);
      ASSERT_EQ(a, b) << "graph replay " << rep << " differs from the eager call (k " << kh << ")";
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
  }
}

// Two convs (two prepared weights, one shared) enqueued on two streams at once give the bits of
// the same calls run one after the other.
TEST(CudaConv, TwoStreamsAtOnce) {
  SKIP_WITHOUT_GPU();
  ConvCase c;
  c.B = 4; c.Ci = 128; c.H = 14; c.W = 14; c.Co = 128;
  c.scheme = "w4g32";
  c.cb = 128;
  c.xt = c.yt = DType::F16;
  const ConvWeight cw = make_conv_weight(c, 51);
  const PreparedWeight pw = prepare(cw, cuda_opts());
  const Conv2dParams p = params_of(c);
  int64_t Ho, Wo;
  conv2d_output_size(c.H, c.W, c.Kh, c.Kw, p, &Ho, &Wo);
  const size_t yb = size_t(c.B * c.Co * Ho * Wo) * 2;
  std::vector<DeviceBuffer> xs, ys_seq, ys_par;
  for (int i = 0; i < 2; ++i) {
    const std::vector<uint8_t> xb = to_bytes(randn(size_t(c.B * c.Ci * c.H * c.W), 52 + i), c.xt);
    xs.emplace_back(xb.size());
    xs.back().copy_from_host(xb.data(), xb.size());
    ys_seq.emplace_back(yb);
    ys_par.emplace_back(yb);
  }
  auto xv = [&](int i) { return act_view(xs[i].data(), c.xt, c, c.Ci, c.H, c.W, Device::CUDA); };
  auto yv = [&](DeviceBuffer& b) { return act_view(b.data(), c.yt, c, c.Co, Ho, Wo, Device::CUDA); };
  for (int i = 0; i < 2; ++i) conv2d(xv(i), pw, yv(ys_seq[i]), p, Epilogue::relu(), {});
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // concurrent calls on one weight bring their own workspaces (this shape takes the K split)
  const size_t ws_bytes = conv2d_workspace_size(pw, xv(0), p);
  EXPECT_GT(ws_bytes, 0u) << pw.kernel_name(c.B * Ho * Wo);
  std::vector<DeviceBuffer> ws;
  for (int i = 0; i < 2; ++i) ws.emplace_back(std::max<size_t>(ws_bytes, 16));
  cudaStream_t s[2];
  for (auto& st : s) ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  for (int rep = 0; rep < 4; ++rep) {
    for (int i = 0; i < 2; ++i) ASSERT_EQ(cudaMemsetAsync(ys_par[i].data(), 0xFF, yb, s[i]), cudaSuccess);
    for (int i = 0; i < 2; ++i) {
      ExecContext ctx;
      ctx.stream = s[i];
      ctx.workspace = ws[i].data();
      ctx.workspace_bytes = ws[i].size();
      conv2d(xv(i), pw, yv(ys_par[i]), p, Epilogue::relu(), ctx);
    }
    for (auto& st : s) ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    for (int i = 0; i < 2; ++i) {
      std::vector<uint8_t> a(yb), b(yb);
      ys_seq[i].copy_to_host(a.data(), yb);
      ys_par[i].copy_to_host(b.data(), yb);
      ASSERT_EQ(a, b) << "stream " << i << ", repetition " << rep;
    }
  }
  for (auto& st : s) cudaStreamDestroy(st);
}

namespace {

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

TEST(CudaConv, BadInputIsAClearError) {
  SKIP_WITHOUT_GPU();
  ConvCase c;
  c.B = 1; c.Ci = 8; c.H = 6; c.W = 6; c.Co = 16;
  c.scheme = "w4g32";
  c.cb = 0;
  c.xt = c.yt = DType::F16;
  // CiKhKw blocks must hold whole channels (a multiple of Kh*Kw = 9 columns): 12 crosses a tap run
  {
    ConvWeight cw = make_conv_weight(c, 61);
    QuantScheme s = parse_scheme("w4g32");
    s.block_k = 12;
    std::vector<float> w = randn(size_t(c.Co * c.Ci * 9), 61, 0.05f);
    cw.weight = quantize_weight(TensorView(w.data(), DType::F32, {c.Co, c.Ci * 9}), s);
    cw.order = ConvKOrder::CiKhKw;
    expect_error([&] { prepare(cw, cuda_opts()); }, ErrorCode::InvalidArgument, "block_k (12)");
  }
  const ConvWeight cw = make_conv_weight(c, 62);
  const PreparedWeight pw = prepare(cw, cuda_opts());
  DeviceBuffer dx(4096), dy(8192);
  Conv2dParams p = params_of(c);
  // output size < 1: a 3x3 kernel on a 1x1 input without padding
  p.pad_h = p.pad_w = 0;
  expect_error([&] {
    conv2d(TensorView(dx.data(), DType::F16, {1, 1, 1, c.Ci}, Device::CUDA), pw,
           TensorView(dy.data(), DType::F16, {1, 1, 1, c.Co}, Device::CUDA), p);
  }, ErrorCode::InvalidArgument, "smaller than the dilated kernel");
  p = params_of(c);
  const TensorView good_x(dx.data(), DType::F16, {1, 6, 6, c.Ci}, Device::CUDA);
  const TensorView good_y(dy.data(), DType::F16, {1, 6, 6, c.Co}, Device::CUDA);
  // misaligned pointers (an f16 tensor at an odd byte address)
  expect_error([&] {
    conv2d(TensorView(static_cast<char*>(dx.data()) + 1, DType::F16, {1, 6, 6, c.Ci}, Device::CUDA),
           pw, good_y, p);
  }, ErrorCode::InvalidArgument, "x (at");
  expect_error([&] {
    conv2d(good_x, pw,
           TensorView(static_cast<char*>(dy.data()) + 1, DType::F16, {1, 6, 6, c.Co}, Device::CUDA), p);
  }, ErrorCode::InvalidArgument, "y (at");
  // layout mismatch: NHWC tensors passed as NCHW (channels read from dim 1)
  Conv2dParams nchw = p;
  nchw.layout = Layout::NCHW;
  expect_error([&] { conv2d(good_x, pw, good_y, nchw); }, ErrorCode::InvalidArgument,
               "input channels");
  // the output shape of the other layout
  expect_error([&] {
    conv2d(good_x, pw, TensorView(dy.data(), DType::F16, {1, c.Co, 6, 6}, Device::CUDA), p);
  }, ErrorCode::InvalidArgument, "conv2d: y is");
  // a host tensor
  std::vector<uint16_t> hx(6 * 6 * 8);
  expect_error([&] {
    conv2d(TensorView(hx.data(), DType::F16, {1, 6, 6, c.Ci}), pw, good_y, p);
  }, ErrorCode::InvalidArgument, "x");
  // conv on a linear weight and linear on a conv weight
  expect_error([&] {
    conv2d(good_x, prepare(cw.weight, cuda_opts()), good_y, p);
  }, ErrorCode::InvalidArgument, "linear weight");
  // int8-block activations have no conv on the cuda backend
  {
    ConvCase d = c;
    d.Ci = 32;
    d.scheme = "w8g32";
    d.cb = 32;
    PrepareOptions o = cuda_opts();
    o.act = ActQuant::Int8Block;
    expect_error([&] { prepare(make_conv_weight(d, 64), o); }, ErrorCode::Unsupported, "int8-block");
  }
}

// One INT8 per-tensor conv (case i of a sweep picks Z_I, Z_O, bias and clamp) on the CUDA
// backend, i8 and f32 outputs poisoned first, against the float64 reference: the bytes must be
// equal. `force`: PrepareOptions::force_kernel; `x_offset`: bytes x starts past a 256-byte aligned
// allocation (16-byte misalignment takes the direct kernel). Returns the prepared weight's kernel
// name for the call.
std::string expect_int8_conv_exact(const ConvCase& c, uint32_t seed, int i, const std::string& force = "",
                                   size_t x_offset = 0) {
  const int64_t K = c.Ci * c.Kh * c.Kw;
  std::vector<float> wf = randn(size_t(c.Co * K), seed, 0.05f);
  ConvWeight cw;
  cw.weight = quantize_weight_int8_per_channel(TensorView(wf.data(), DType::F32, {c.Co, K}));
  cw.Ci = c.Ci; cw.Kh = c.Kh; cw.Kw = c.Kw; cw.order = c.order;
  PrepareOptions o = cuda_opts();
  o.act = ActQuant::Int8PerTensor;
  o.force_kernel = force;
  o.input_quant = {0.05f, int32_t(i % 3 == 0 ? 0 : i % 3 == 1 ? -7 : 19)};
  // about 20 output codes per standard deviation: most in range, some saturate
  o.output_quant = {float(0.01 * std::sqrt(double(K))), int32_t(i % 2 ? 4 : -3)};
  const PreparedWeight pw = prepare(cw, o);
  const Conv2dParams p = params_of(c);
  int64_t Ho, Wo;
  conv2d_output_size(c.H, c.W, c.Kh, c.Kw, p, &Ho, &Wo);
  std::vector<int8_t> xh(size_t(c.B * c.Ci * c.H * c.W));
  std::mt19937 rng(seed + 1);
  for (auto& v : xh) v = int8_t(int(rng() % 256) - 128);
  DeviceBuffer dx(std::max<size_t>(xh.size() + x_offset, 16));
  char* x_dev = static_cast<char*>(dx.data()) + x_offset;
  EXPECT_EQ(cudaMemcpy(x_dev, xh.data(), xh.size(), cudaMemcpyHostToDevice), cudaSuccess);
  Epilogue ep, rep;
  std::vector<float> bias_h = randn(size_t(c.Co), seed + 2, 1.f);
  DeviceBuffer dbias(bias_h.size() * 4);
  dbias.copy_from_host(bias_h.data(), bias_h.size() * 4);
  if (i % 2 == 0) {
    ep.bias = dbias.view(DType::F32, {c.Co});
    rep.bias = TensorView(bias_h.data(), DType::F32, {c.Co});
  }
  if (i % 4 == 1) ep.clamp_lo = rep.clamp_lo = 0.f;
  if (i % 4 == 3) {
    ep.clamp_lo = rep.clamp_lo = -0.5f;
    ep.clamp_hi = rep.clamp_hi = 0.75f;
  }
  const int64_t M = c.B * Ho * Wo;
  const std::string name = pw.kernel_name(M);
  for (DType yt : {DType::I8, DType::F32}) {
    const size_t ny = size_t(c.B * c.Co * Ho * Wo);
    DeviceBuffer dy(ny * esize(yt));
    EXPECT_EQ(cudaMemset(dy.data(), yt == DType::I8 ? 0x5A : 0xFF, dy.size()), cudaSuccess);
    conv2d(act_view(x_dev, DType::I8, c, c.Ci, c.H, c.W, Device::CUDA), pw,
           act_view(dy.data(), yt, c, c.Co, Ho, Wo, Device::CUDA), p, ep);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> y(dy.size()), yr(dy.size());
    dy.copy_to_host(y.data(), y.size());
    ref::conv2d_int8_requant(act_view(xh.data(), DType::I8, c, c.Ci, c.H, c.W, Device::CPU), cw,
                             o.input_quant, o.output_quant,
                             act_view(yr.data(), yt, c, c.Co, Ho, Wo, Device::CPU), p, rep);
    size_t diff = 0, first = 0;
    for (size_t k = 0; k < y.size(); ++k)
      if (y[k] != yr[k] && diff++ == 0) first = k;
    EXPECT_EQ(diff, 0u) << describe(c) << " " << name << " y=" << dtype_name(yt) << ": " << diff
                        << " bytes differ, first at byte " << first;
    if (yt == DType::I8) {
      // the poison byte 0x5A (90) is a valid code: make sure the outputs are not all it
      size_t poison = 0;
      for (uint8_t b : y) poison += b == 0x5A;
      EXPECT_LT(poison, y.size() / 2 + 1) << describe(c);
    }
  }
  return name;
}

ConvCase int8_case(const SquareConv& g, Layout layout, ConvKOrder order) {
  ConvCase c;
  c.B = g.B; c.Ci = g.Ci; c.H = g.H; c.W = g.W; c.Co = g.Co; c.Kh = g.Kh; c.Kw = g.Kw;
  c.sh = c.sw = g.s; c.ph = c.pw = g.pad; c.dh = c.dw = g.dil;
  c.layout = layout;
  c.order = order;
  return c;
}

// INT8 per-tensor conv with requantized INT8 (or f32) output: the codes equal the float64
// reference's exactly (the epilogue evaluates the reference's expression in double, in its order,
// so no tie can round differently), for both layouts, both K orders, padding (Z_I), odd shapes,
// bias and clamps.
TEST(CudaConv, Int8RequantizedMatchesTheReferenceExactly) {
  SKIP_WITHOUT_GPU();
  const SquareConv geoms[] = {{1, 3, 11, 13, 17, 3, 3, 1, 1, 1},  {7, 17, 9, 7, 129, 3, 3, 2, 2, 1},
                     {1, 129, 7, 7, 33, 3, 3, 1, 1, 1},  {2, 32, 10, 9, 64, 3, 3, 3, 0, 1},
                     {1, 24, 12, 11, 40, 3, 3, 1, 3, 2}, {2, 64, 8, 8, 72, 1, 1, 1, 0, 1},
                     {1, 5, 15, 17, 9, 7, 7, 2, 3, 1}};
  uint32_t seed = 1300;
  int i = 0;
  for (const SquareConv& g : geoms)
    for (Layout layout : {Layout::NCHW, Layout::NHWC})
      for (ConvKOrder order : {ConvKOrder::KhKwCi, ConvKOrder::CiKhKw}) {
        expect_int8_conv_exact(int8_case(g, layout, order),
                               seed++, i++);
      }
}

// NHWC inputs with Ci a multiple of 16 run the INT8 GEMM's pipelined kernels with A gathered from
// the image: every CTA tile (forced and chosen), channels that are a multiple of 16 but not of 32
// (the GEMM's own code buffer), K blocks that hold several taps and taps split over K blocks,
// padding wider than the kernel's half with dilation (Z_I in the padding), odd output channels,
// more pixels than one tile row; the same bytes as the reference. A misaligned x takes the direct
// kernel, as does the forced sm80_conv_igemm_64x64_i8.
TEST(CudaConv, Int8RequantizedGemmFormMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  const SquareConv geoms[] = {{1, 16, 13, 11, 17, 3, 3, 1, 1, 1},  {7, 48, 9, 7, 129, 3, 3, 2, 2, 1},
                     {2, 64, 15, 15, 64, 3, 3, 1, 4, 2},  {3, 128, 7, 9, 200, 3, 3, 1, 1, 1},
                     {1, 96, 6, 5, 40, 5, 5, 3, 3, 1},    {4, 32, 12, 12, 136, 1, 1, 1, 0, 1},
                     {2, 256, 5, 5, 72, 3, 3, 1, 1, 1}};
  const char* forces[] = {"", "sm80_i8_16x32", "sm80_i8_64x64", "sm80_i8_128x128", "sm80_i8_64x64_s3"};
  uint32_t seed = 1700;
  int i = 0;
  for (const SquareConv& g : geoms)
    for (ConvKOrder order : {ConvKOrder::KhKwCi, ConvKOrder::CiKhKw})
      for (const char* force : forces) {
        const ConvCase c = int8_case(g, Layout::NHWC, order);
        const std::string name = expect_int8_conv_exact(c, seed++, i++, force);
        EXPECT_EQ(name.rfind("im2col sm80_i8_", 0), 0u) << describe(c) << ": " << name;
        if (*force) EXPECT_EQ(name, std::string("im2col ") + force) << describe(c);
      }
  // x not 16-byte aligned, and the direct kernel forced: the same bytes
  const ConvCase c = int8_case({2, 48, 9, 7, 33, 3, 3, 1, 1, 1}, Layout::NHWC, ConvKOrder::KhKwCi);
  expect_int8_conv_exact(c, seed++, 1, "", 8);
  EXPECT_EQ(expect_int8_conv_exact(c, seed++, 2, "sm80_conv_igemm_64x64_i8"), "sm80_conv_igemm_64x64_i8");
  // the rule: many pixels take the 3-stage 64 x 64 tile, few the 16 x 32 one
  const ConvCase big = int8_case({4, 16, 64, 64, 17, 3, 3, 1, 1, 1}, Layout::NHWC, ConvKOrder::KhKwCi);
  EXPECT_EQ(expect_int8_conv_exact(big, seed++, 3), "im2col sm80_i8_64x64_s3");
  const ConvCase small = int8_case({1, 16, 7, 7, 17, 3, 3, 1, 1, 1}, Layout::NHWC, ConvKOrder::KhKwCi);
  EXPECT_EQ(expect_int8_conv_exact(small, seed++, 4), "im2col sm80_i8_16x32");
  // a tile name on a weight whose Ci is not a multiple of 16, and an unknown name
  {
    std::vector<float> wf = randn(size_t(8 * 27), 5, 0.05f);
    ConvWeight cw;
    cw.weight = quantize_weight_int8_per_channel(TensorView(wf.data(), DType::F32, {8, 27}));
    cw.Ci = 3; cw.Kh = 3; cw.Kw = 3;
    PrepareOptions o = cuda_opts();
    o.act = ActQuant::Int8PerTensor;
    o.force_kernel = "sm80_i8_64x64";
    expect_error([&] { prepare(cw, o); }, ErrorCode::InvalidArgument, "multiple of 16");
    o.force_kernel = "sm80_i8_32x32";
    expect_error([&] { prepare(cw, o); }, ErrorCode::InvalidArgument, "sm80_i8_32x32");
  }
}

// Hopper: Ci a multiple of 128 runs the wgmma s8 kernel with an im2col TMA map (one tap's 128
// channels per stage; the padding zero-filled and Z_I corrected per border pixel in the epilogue),
// forced and chosen (>= 129 pixels): the reference's bytes for odd sizes, stride 2 / 3, dilation 2,
// padding wider than the kernel's half (pixels whose taps are all padding), several images (a tile
// crossing from one image to the next, pixels past the last), Z_I 0 and not, odd Co, 5x5 taps. A
// stride the map cannot take (9) falls back to the sm_80 kernels. Skipped off compute capability 9.0.
TEST(CudaConv, Int8RequantizedHopperIm2col) {
  SKIP_WITHOUT_GPU();
  SKIP_WITHOUT_HOPPER();
  const SquareConv geoms[] = {{1, 128, 13, 11, 17, 3, 3, 1, 1, 1},  {3, 256, 9, 7, 129, 3, 3, 2, 2, 1},
                     {2, 128, 15, 15, 64, 3, 3, 1, 4, 2},  {3, 128, 7, 9, 200, 3, 3, 1, 1, 1},
                     {1, 256, 12, 10, 40, 5, 5, 3, 3, 1},  {4, 128, 12, 12, 136, 1, 1, 1, 0, 1},
                     {5, 384, 7, 7, 72, 3, 3, 1, 1, 1}};
  uint32_t seed = 2100;
  int i = 0;
  for (const SquareConv& g : geoms)
    for (const char* force : {"", "sm90_i8_128x128"}) {
      const ConvCase c = int8_case(g, Layout::NHWC,
                                   i % 2 ? ConvKOrder::CiKhKw : ConvKOrder::KhKwCi);
      const int64_t Ho = (g.H + 2 * g.pad - g.dil * (g.Kh - 1) - 1) / g.s + 1;
      const int64_t Wo = (g.W + 2 * g.pad - g.dil * (g.Kw - 1) - 1) / g.s + 1;
      const std::string name = expect_int8_conv_exact(c, seed++, i++, force);
      if (*force || g.B * Ho * Wo >= 129) EXPECT_EQ(name, "im2col sm90_i8_128x128") << describe(c);
    }
  // a stride past the im2col map's range: the sm_80 kernels, the same bytes
  expect_int8_conv_exact(int8_case({2, 128, 40, 40, 33, 3, 3, 9, 1, 1}, Layout::NHWC, ConvKOrder::KhKwCi),
                         seed++, 1, "sm90_i8_128x128");
}

// The K split (few output tiles) and the single pass give the same values within rounding, and a
// caller workspace smaller than conv2d_workspace_size is an error naming both sizes.
TEST(CudaConv, KSplitAndWorkspace) {
  SKIP_WITHOUT_GPU();
  ConvCase c;
  c.B = 1; c.Ci = 512; c.H = 7; c.W = 7; c.Co = 512;  // 1 x 8 tiles: split
  c.scheme = "w4g32";
  c.cb = 128;
  c.xt = c.yt = DType::F16;
  c.bias = true;
  c.clamp = Epilogue::relu6();
  c.force = "sm80_conv_igemm";  // the sm_80 kernel's split (on Hopper the wgmma one runs these)
  const ConvWeight cw = make_conv_weight(c, 71);
  PrepareOptions forced = cuda_opts();
  forced.force_kernel = c.force;
  const PreparedWeight pw = prepare(cw, forced);
  EXPECT_NE(pw.kernel_name(49).find("splitk"), std::string::npos) << pw.kernel_name(49);
  expect_conv_ok(c, 71);
  for (Layout layout : {Layout::NCHW, Layout::NHWC})
    for (DType t : {DType::F32, DType::BF16}) {
      ConvCase d = c;
      d.layout = layout;
      d.xt = d.yt = t;
      expect_conv_ok(d, 72);
    }
  const Conv2dParams p = params_of(c);
  DeviceBuffer dx(size_t(c.Ci * 49 * 2)), dy(size_t(c.Co * 49 * 2));
  const TensorView xv = act_view(dx.data(), c.xt, c, c.Ci, 7, 7, Device::CUDA);
  const TensorView yv = act_view(dy.data(), c.yt, c, c.Co, 7, 7, Device::CUDA);
  const size_t need = conv2d_workspace_size(pw, xv, p);
  ASSERT_GT(need, 0u);
  DeviceBuffer ws(need);
  ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = need - 4;
  expect_error([&] { conv2d(xv, pw, yv, p, {}, ctx); }, ErrorCode::InvalidArgument,
               "conv2d_workspace_size");
  // many output tiles: no split, no workspace
  ConvCase big = c;
  big.B = 2; big.H = big.W = 56; big.Ci = 64; big.Co = 128;  // 98 x 2 tiles
  big.cb = 64;
  const PreparedWeight pb = prepare(make_conv_weight(big, 73), forced);
  EXPECT_EQ(pb.kernel_name(2 * 56 * 56).find("splitk"), std::string::npos) << pb.kernel_name(2 * 56 * 56);
  EXPECT_EQ(conv2d_workspace_size(pb, act_view(nullptr, DType::F16, big, 64, 56, 56, Device::CUDA), params_of(big)), 0u);
  expect_conv_ok(big, 74);
}

// On Hopper, NHWC 16-bit convs with Ci a multiple of 64 run as the weight-only wgmma kernel's
// implicit GEMM (activations through a TMA im2col map, tap by tap): the ResNet shapes, strides,
// padding past the kernel's half, dilation, rectangular kernels, strided 1x1, batch > 1 with
// tiles crossing images, odd Co, every zero form and block size, f32 / 16-bit outputs, bias and
// clamp; each against the float64 reference and against the sm_80 kernel forced on the same case.
TEST(CudaConv, WgmmaImplicitGemm) {
  SKIP_WITHOUT_HOPPER();
  struct G {
    int64_t B, Ci, H, W, Co, Kh, Kw, sh, sw, ph, pw, dh, dw, cb;
    const char* scheme;
  };
  const G geoms[] = {
      {1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 64, "w4g32"},       // ResNet 3x3 @56
      {2, 128, 28, 28, 128, 3, 3, 2, 2, 1, 1, 1, 1, 128, "w4g32"},    // stride 2, batch 2
      {3, 64, 13, 9, 72, 3, 3, 2, 1, 2, 3, 2, 1, 32, "w4g32zp"},      // mixed stride / dilation, odd sizes
      {1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, 1, 128, "w8g32zp"},  // int8 codes
      {7, 64, 7, 7, 200, 1, 1, 2, 2, 0, 0, 1, 1, 0, "w4g32asym"},      // strided 1x1, per-channel scales
      {2, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 128, "w4g32"},      // M = 98: tiles cross images
      {1, 64, 17, 15, 64, 5, 3, 1, 1, 3, 2, 1, 2, 16, "w4g32asym"},    // rectangular 5x3, blocks of 16
      {5, 192, 9, 11, 100, 3, 3, 3, 2, 1, 1, 1, 1, 64, "w8g32"},      // stride 3 / 2, Co past 128
  };
  uint32_t seed = 900;
  int i = 0;
  for (const G& g : geoms)
    for (DType xt : {DType::F16, DType::BF16}) {
      ConvCase c;
      c.B = g.B; c.Ci = g.Ci; c.H = g.H; c.W = g.W; c.Co = g.Co; c.Kh = g.Kh; c.Kw = g.Kw;
      c.sh = g.sh; c.sw = g.sw; c.ph = g.ph; c.pw = g.pw; c.dh = g.dh; c.dw = g.dw;
      c.cb = g.cb;
      c.scheme = g.scheme;
      c.layout = Layout::NHWC;
      c.xt = xt;
      c.yt = i % 3 == 0 ? DType::F32 : xt;
      c.bias = i % 2 == 0;
      c.clamp = i % 4 == 1 ? Epilogue::relu6() : Epilogue::none();
      ++i;
      const ConvWeight cw = make_conv_weight(c, seed);
      const PreparedWeight pw = prepare(cw, cuda_opts());
      int64_t Ho = 0, Wo = 0;
      conv2d_output_size(c.H, c.W, c.Kh, c.Kw, params_of(c), &Ho, &Wo);
      if (c.Kh * c.Kw > 1)  // (1x1 weights name the linear kernel of their stride-1 unpadded calls)
        EXPECT_EQ(pw.kernel_name(c.B * Ho * Wo).rfind("im2col sm90_wo_ws", 0), 0u) << describe(c) << ": "
                                                                                   << pw.kernel_name(c.B * Ho * Wo);
      const double tol = tolerance(c.xt, c.yt);
      const ConvRun wg = run_conv(c, cw, seed);
      EXPECT_LE(wg.rel_err, tol) << describe(c);
      EXPECT_LE(wg.max_err, 12 * tol) << describe(c);
      ConvCase old = c;
      old.force = "sm80_conv_igemm";
      const ConvRun sm80 = run_conv(old, cw, seed);
      EXPECT_LE(sm80.rel_err, tol) << describe(old);
      ++seed;
    }
}
