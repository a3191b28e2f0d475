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
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/conv_test_support.hpp"
#include "gpu/device_vectors.hpp"
#include "mixq/formats/mnn.hpp"

using namespace mixq;

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

// Relative Frobenius difference of two outputs of type t.
static double rel_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, DType t) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() / esize(t); ++i) {
    const double x = test::value(a, t, i), y = test::value(b, t, i);
    num += (x - y) * (x - y);
    den += y * y;
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// Ci <= 4 with 16-bit activations: the patch kernel (sm80_conv_stem, conv_stem.hpp). The ResNet
// stem at batch 1 (64-pixel tiles) and 2 (128-pixel tiles), odd images, Ci 1-4, odd stride_w * Ci
// (the shifted patch copy), Co 17 / 130 (partial channel tiles), rectangular and strided filters,
// dilation along H, output rows of several tiles, padding larger than the filter's half; both
// layouts and K orders, f16 and bf16 x, per-channel scales and one-channel blocks; against the
// float64 reference and against the general kernel forced on the same call.
TEST(CudaConv, StemKernelForFewInputChannels) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 5100;
  struct G {
    int64_t B, Ci, H, W, Co, Kh, Kw, sh, sw, ph, pw, dh;
  };
  const G geoms[] = {
      {1, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3, 1},  // the ResNet stem, 64-pixel tiles
      {2, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3, 1},  // 128-pixel tiles, persistent blocks
      {2, 3, 23, 21, 64, 7, 7, 2, 2, 3, 3, 1},    // odd image
      {3, 3, 17, 19, 17, 3, 3, 1, 1, 1, 1, 1},    // stride 1: odd runs (shifted copy), Co 17
      {1, 1, 9, 300, 24, 3, 3, 1, 1, 2, 4, 1},    // Ci 1, three tiles a row, padding > half
      {1, 2, 15, 33, 130, 5, 3, 2, 1, 1, 1, 1},   // Ci 2, 5x3, three channel tiles
      {2, 4, 32, 32, 96, 4, 4, 4, 4, 0, 0, 1},    // Ci 4 patchify, stride 4
      {1, 3, 13, 150, 32, 3, 3, 3, 3, 1, 1, 2},   // stride 3, dilation 2 along H
      // NHWC rows of 16-byte multiples (the TMA form on sm_90 where stride_w * Ci is even; the
      // ResNet stem above: odd pad_w * Ci, the shifted K order):
      {3, 3, 40, 40, 64, 5, 5, 1, 1, 2, 2, 1},    // odd runs: the loader form's shifted copy
      {4, 2, 400, 136, 8, 3, 3, 1, 1, 1, 1, 1},   // ~6 tiles a block: both stages, many phases
      {4, 1, 400, 272, 8, 3, 3, 2, 2, 1, 1, 1},   // the same, odd pad_w * Ci (shifted K order)
      {2, 1, 64, 264, 24, 3, 3, 2, 2, 2, 3, 1},   // Ci 1, last tile of a row 6 pixels wide
      {1, 3, 520, 520, 96, 4, 4, 4, 4, 0, 0, 1},  // 128-pixel box too wide: 64-pixel tiles
      {2, 3, 32, 32, 17, 3, 3, 2, 2, 1, 1, 1},    // odd Co: the generic stores
  };
  // the TMA form where the device has it (sm_90) and the call admits it (NHWC, aligned x, rows
  // of 16-byte multiples, dilation 1, even runs): bit for bit the loader form's output where
  // pad_w * Ci is even (the same products in the same k16 steps, the same conversions); in the
  // shifted K order, within the tolerance of it
  const bool tma = test::hopper();
  for (const G& g : geoms)
    for (Layout layout : {Layout::NHWC, Layout::NCHW})
      for (ConvKOrder order : {ConvKOrder::KhKwCi, ConvKOrder::CiKhKw})
        for (DType t : {DType::F16, DType::BF16}) {
          ConvCase c;
          c.B = g.B; c.Ci = g.Ci; c.H = g.H; c.W = g.W; c.Co = g.Co; c.Kh = g.Kh; c.Kw = g.Kw;
          c.sh = g.sh; c.sw = g.sw; c.ph = g.ph; c.pw = g.pw; c.dh = g.dh; c.dw = 1;
          c.layout = layout;
          c.order = order;
          c.xt = t;
          c.yt = order == ConvKOrder::KhKwCi ? t : DType::F32;
          c.scheme = t == DType::F16 ? "w4g32asym" : "w8g32zp";
          c.cb = (g.Co + g.Kh) % 2;  // 0: per output channel, 1: one pair per (tap, channel)
          c.f32_scales = true;       // (a one-element block's scale can underflow f16)
          c.bias = true;
          c.clamp = layout == Layout::NCHW ? Epilogue::relu6() : Epilogue{};
          const ConvWeight cw = make_conv_weight(c, seed);
          EXPECT_EQ(prepare(cw, cuda_opts()).kernel_name(1, t),
                    std::string(tma ? "sm90_conv_stem_tma_" : "sm80_conv_stem_") +
                        (t == DType::F16 ? "f16" : "bf16"));
          const ConvRun r = run_conv(c, cw, seed);
          const double tol = tolerance(c.xt, c.yt);
          // (and a 16-pixel warp's box, 7 + 15 runs + a filter row, within the 256-element limit)
          const int64_t sigma = (g.pw * g.Ci) % 2, lp = (g.Kw * g.Ci + sigma + 1) / 2 * 2;
          const bool tma_call = tma && layout == Layout::NHWC && g.dh == 1 && (g.W * g.Ci) % 8 == 0 &&
                                (g.sw * g.Ci) % 2 == 0 && 7 + 15 * g.sw * g.Ci + lp <= 256;
          if (tma_call) {
            ConvCase f = c;
            f.force = "sm90_conv_stem_tma";
            EXPECT_EQ(run_conv(f, cw, seed).y, r.y) << describe(c) << ": forced TMA form";
            f.force = "sm80_conv_stem";
            const ConvRun rl = run_conv(f, cw, seed);
            if ((g.pw * g.Ci) % 2 == 0) {
              EXPECT_EQ(rl.y, r.y) << describe(c) << ": against the loader form";
            } else {  // the shifted K order groups the products into other k16 steps
              EXPECT_LE(rl.rel_err, tol) << describe(f);
              EXPECT_LE(rel_diff(r.y, rl.y, c.yt), tol) << describe(c) << ": against the loader form";
            }
            f.force.clear();
            f.offset_x = true;  // x 2 bytes off a 16-byte boundary: the loader form
            const ConvRun ro = run_conv(f, cw, seed);
            EXPECT_LE(ro.rel_err, tol) << describe(f);
          }
          EXPECT_LE(r.rel_err, tol) << describe(c);
          EXPECT_LE(r.max_err, 12 * tol) << describe(c);
          // the general kernel on the same call: the same rounded products, summed in another order
          ConvCase d = c;
          d.force = "sm80_conv_igemm";
          const ConvRun rd = run_conv(d, cw, seed);
          EXPECT_LE(rel_diff(r.y, rd.y, c.yt), tol) << describe(c) << ": against the general kernel";
          ++seed;
        }
  // f32 activations and dilation along W take the general kernel; forcing the stem kernel there
  // is a clear error
  ConvCase c;
  c.B = 1; c.Ci = 3; c.H = c.W = 12; c.Co = 8; c.Kh = c.Kw = 3;
  c.xt = DType::F32;
  const ConvWeight cw = make_conv_weight(c, seed);
  EXPECT_EQ(prepare(cw, cuda_opts()).kernel_name(1, DType::F32).find("sm80_conv_stem"), std::string::npos);
  expect_conv_ok(c, seed++);
  c.xt = c.yt = DType::F16;
  c.dw = 2;
  expect_conv_ok(c, seed++);  // the general kernel
  c.force = "sm80_conv_stem";
  expect_error([&] { run_conv(c, cw, seed); }, ErrorCode::InvalidArgument, "dilation_w 2");
  if (tma) {  // the TMA form forced on a call it cannot take
    ConvCase n;
    n.B = 1; n.Ci = 3; n.H = n.W = 32; n.Co = 16; n.Kh = n.Kw = 3; n.sh = n.sw = 2;
    n.xt = n.yt = DType::F16;
    n.force = "sm90_conv_stem_tma";
    const ConvWeight nw = make_conv_weight(n, seed);
    expect_conv_ok(n, seed);
    n.layout = Layout::NCHW;
    expect_error([&] { run_conv(n, nw, seed); }, ErrorCode::InvalidArgument, "NCHW");
    n.layout = Layout::NHWC;
    n.W = 33;  // rows of 99 elements
    expect_error([&] { run_conv(n, nw, seed); }, ErrorCode::InvalidArgument, "W * Ci a multiple of 8");
    n.W = 32;
    n.sh = n.sw = 1;  // runs 3 elements apart: odd starts every other pixel
    expect_error([&] { run_conv(n, nw, seed); }, ErrorCode::InvalidArgument, "stride_w * Ci even");
  }
  ConvCase wide;
  wide.Ci = 5;
  PrepareOptions o = cuda_opts();
  o.force_kernel = "sm80_conv_stem";
  expect_error([&] { prepare(make_conv_weight(wide, seed), o); }, ErrorCode::InvalidArgument,
               "Ci <= 4");
}

// The stem kernel's TMA form alone (sm_90; a subset small enough for compute-sanitizer): many
// tiles a block (both stages, many barrier phases), the shifted K order, a last tile of a row 6
// pixels wide, padding larger than the filter's half; against the float64 reference.
TEST(CudaConv, StemTmaFormStagesAndEdges) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 5300;
  struct G {
    int64_t B, Ci, H, W, Co, Kh, Kw, s, ph, pw;
  };
  for (const G& g : {G{4, 2, 200, 136, 8, 3, 3, 1, 1, 1}, G{4, 1, 200, 272, 8, 3, 3, 2, 1, 1},
                     G{2, 1, 24, 264, 72, 3, 3, 2, 2, 3}, G{1, 3, 64, 64, 64, 7, 7, 2, 3, 3}}) {
    ConvCase c;
    c.B = g.B; c.Ci = g.Ci; c.H = g.H; c.W = g.W; c.Co = g.Co; c.Kh = g.Kh; c.Kw = g.Kw;
    c.sh = c.sw = g.s; c.ph = g.ph; c.pw = g.pw;
    c.xt = c.yt = DType::F16;
    c.scheme = "w4g32asym";
    c.bias = true;
    c.clamp = Epilogue::relu6();
    c.force = "sm90_conv_stem_tma";
    expect_conv_ok(c, seed++);
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
      const std::vector<uint8_t> xb = test::to_bytes(randn(size_t(M * c.Ci), seed + 1), t);
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
  // the implicit GEMM, the 1x1 linear path, the stem kernel (persistent blocks)
  for (int64_t kh : {int64_t(3), int64_t(1), int64_t(7)}) {
    ConvCase c;
    c.B = 2; c.Ci = 64; c.H = 14; c.W = 14; c.Co = 96; c.Kh = c.Kw = kh;
    c.ph = c.pw = kh / 2;
    c.scheme = "w4g32";
    c.cb = 32;
    if (kh == 7) {
      c.Ci = 3; c.H = c.W = 224; c.Co = 64; c.sh = c.sw = 2;
      c.cb = 0;
    }
    c.xt = c.yt = DType::F16;
    const ConvWeight cw = make_conv_weight(c, 41);
    const PreparedWeight pw = prepare(cw, cuda_opts());
    const Conv2dParams p = params_of(c);
    int64_t Ho, Wo;
    conv2d_output_size(c.H, c.W, c.Kh, c.Kw, p, &Ho, &Wo);
    const std::vector<uint8_t> xb = test::to_bytes(randn(size_t(c.B * c.Ci * c.H * c.W), 42), c.xt);
    const size_t yb = size_t(c.B * c.Co * Ho * Wo) * 2;
    DeviceBuffer dx(xb.size()), dy1(yb), dy2(yb);
    dx.copy_from_host(xb.data(), xb.size());
    const size_t ws_bytes = std::max<size_t>(conv2d_workspace_size(pw, act_view(nullptr, c.xt, c, c.Ci, c.H, c.W, Device::CUDA), p), 16);
    DeviceBuffer ws(ws_bytes);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    ExecContext ctx = test::on_stream(s, ws);
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
    const std::vector<uint8_t> xb = test::to_bytes(randn(size_t(c.B * c.Ci * c.H * c.W), 52 + i), c.xt);
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
