// CUDA INT8 per-tensor conv2d (quantized CNN inference: int8 in, int8 or f32 out, requantized)
// against the float64 reference (ref::conv2d_int8_requant), byte for byte. Skipped (visibly)
// without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu/conv_test_support.hpp"

using namespace mixq;

namespace {

// A conv weight of Co x Kh Kw Ci random values (0.05 standard deviation), int8 symmetric per
// output channel.
ConvWeight int8_conv_weight(int64_t Co, int64_t Ci, int64_t Kh, int64_t Kw, ConvKOrder order,
                            uint32_t seed) {
  const int64_t K = Ci * Kh * Kw;
  std::vector<float> wf = randn(size_t(Co * K), seed, 0.05f);
  ConvWeight cw;
  cw.weight = quantize_weight_int8_per_channel(TensorView(wf.data(), DType::F32, {Co, K}));
  cw.Ci = Ci;
  cw.Kh = Kh;
  cw.Kw = Kw;
  cw.order = order;
  return cw;
}

// One INT8 per-tensor conv (case i of a sweep picks Z_I, Z_O, bias and clamp) on the CUDA
// backend, i8 and f32 outputs poisoned first, against the float64 reference: the bytes must be
// equal. `force`: PrepareOptions::force_kernel; `x_offset`: bytes x starts past a 256-byte aligned
// allocation (16-byte misalignment takes the direct kernel). Returns the prepared weight's kernel
// name for the call.
// `workspace`: none (the reserved scratch), the call's conv2d_workspace_size, or 16 bytes (too
// small for an NCHW call's copies: the direct kernel).
enum class Ws { None, Sized, Tiny };
std::string expect_int8_conv_exact(const ConvCase& c, uint32_t seed, int i, const std::string& force = "",
                                   size_t x_offset = 0, Ws workspace = Ws::None) {
  const int64_t K = c.Ci * c.Kh * c.Kw;
  const ConvWeight cw = int8_conv_weight(c.Co, c.Ci, c.Kh, c.Kw, c.order, seed);
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
    const TensorView xv = act_view(x_dev, DType::I8, c, c.Ci, c.H, c.W, Device::CUDA);
    const size_t ws_bytes = workspace == Ws::Sized ? conv2d_workspace_size(pw, xv, p) : 16;
    DeviceBuffer ws(std::max<size_t>(ws_bytes, 16));
    ExecContext ctx;
    if (workspace != Ws::None) {
      ctx.workspace = ws.data();
      ctx.workspace_bytes = ws_bytes;
    }
    conv2d(xv, pw, act_view(dy.data(), yt, c, c.Co, Ho, Wo, Device::CUDA), p, ep, ctx);
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

// Few input channels (Ci 1-4, an RGB stem): the 16-bit stem kernel on an f16 copy of x less Z_I
// with the INT8 epilogue, its f32 sums exact: the reference's bytes for a 7x7/2 stem (ResNet), a
// 3x3/2 one (YOLO), 5x5 stride 1, 3x3 stride 3 and padding wider than the kernel's half, 1 to 4
// channels, both layouts and K orders, Z_I 0 / -7 / 19, widths whose rows are not 16-byte
// multiples (the loader form), several images, Co past one 64-channel block (80: the second
// block's 16 channels through the TMA form's staged int8 stores); the copy in the caller's
// workspace, in the reserved scratch a few images at a time (a 1100 x 1104 image's copy fills most
// of it: three rounds), and with a workspace too small (the direct kernel). The loader form forced,
// and (sm_90) the TMA form; a dilation along W, which the stem does not take, runs the direct
// kernel unless the stem is forced (an error naming it). conv2d_workspace_size counts the copy.
TEST(CudaConv, Int8StemMatchesTheReferenceExactly) {
  SKIP_WITHOUT_GPU();
  const SquareConv geoms[] = {{2, 3, 37, 40, 64, 7, 7, 2, 3, 1}, {1, 3, 33, 32, 32, 3, 3, 2, 1, 1},
                              {3, 1, 19, 21, 17, 5, 5, 1, 2, 1}, {2, 4, 16, 24, 72, 3, 3, 1, 4, 1},
                              {7, 2, 9, 13, 9, 3, 3, 3, 1, 1},   {2, 3, 24, 32, 80, 3, 3, 2, 1, 1}};
  const std::string loader = "sm80_conv_stem_i8", tma = "sm90_conv_stem_tma_i8";
  uint32_t seed = 4100;
  int i = 0;
  for (const SquareConv& g : geoms)
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      for (Ws ws : {Ws::None, Ws::Sized, Ws::Tiny}) {
        const ConvCase c = int8_case(g, layout, i % 2 ? ConvKOrder::CiKhKw : ConvKOrder::KhKwCi);
        const std::string name = expect_int8_conv_exact(c, seed++, i++, "", 0, ws);
        EXPECT_EQ(name, test::hopper() ? tma : loader) << describe(c);
      }
      const ConvCase c = int8_case(g, layout, ConvKOrder::KhKwCi);
      EXPECT_EQ(expect_int8_conv_exact(c, seed++, i++, loader), loader);
      if (test::hopper() && (g.W * g.Ci * 2) % 16 == 0)
        EXPECT_EQ(expect_int8_conv_exact(c, seed++, i++, tma, 0, Ws::Sized), tma);
    }
  for (Layout layout : {Layout::NHWC, Layout::NCHW})
    expect_int8_conv_exact(
        int8_case({3, 4, 1100, 1104, 8, 3, 3, 2, 1, 1}, layout, ConvKOrder::KhKwCi), seed++, i++);
  // dilation along W: the direct kernel, or (forced stem) a clear error
  const ConvCase dil =
      int8_case({2, 3, 15, 16, 8, 3, 3, 1, 2, 2}, Layout::NHWC, ConvKOrder::KhKwCi);
  expect_int8_conv_exact(dil, seed++, i++);
  expect_error([&] { expect_int8_conv_exact(dil, seed, 0, loader); }, ErrorCode::InvalidArgument,
               "cannot run this call");
  // the workspace query: the f16 copy of every image, in either layout (rounded up to 256 bytes)
  PrepareOptions o = cuda_opts();
  o.act = ActQuant::Int8PerTensor;
  {
    const PreparedWeight pw = prepare(int8_conv_weight(64, 3, 7, 7, ConvKOrder::KhKwCi, 7), o);
    Conv2dParams p;
    p.stride_h = p.stride_w = 2;
    p.pad_h = p.pad_w = 3;
    const size_t copy = size_t((5 * 37 * 41 * 3 * 2 + 255) / 256 * 256);
    p.layout = Layout::NCHW;
    EXPECT_EQ(conv2d_workspace_size(
                  pw, TensorView(nullptr, DType::I8, {5, 3, 37, 41}, Device::CUDA, 0), p),
              copy);
    p.layout = Layout::NHWC;
    EXPECT_EQ(conv2d_workspace_size(
                  pw, TensorView(nullptr, DType::I8, {5, 37, 41, 3}, Device::CUDA, 0), p),
              copy);
  }
  // a weight the stem does not take, forced
  o.force_kernel = loader;
  expect_error([&] { prepare(int8_conv_weight(8, 5, 3, 3, ConvKOrder::KhKwCi, 6), o); },
               ErrorCode::InvalidArgument, "Ci <= 4");
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
        // unforced, Hopper chooses its wgmma kernel where Ci is a multiple of 128
        const bool gemm_form = name.rfind("im2col sm80_i8_", 0) == 0 || name.rfind("im2col sm90_i8_128x", 0) == 0;
        EXPECT_TRUE(gemm_form) << describe(c) << ": " << name;
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
    const ConvWeight cw = int8_conv_weight(8, 3, 3, 3, ConvKOrder::KhKwCi, 5);
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
// forced (both tiles; 128 x 64 with K split over clusters of 2, 4 and 8, a 1x1's single K block
// split no further), and chosen from 1.5e9 multiply-adds: the reference's bytes for odd sizes,
// stride 2 / 3, dilation 2, padding wider than the kernel's half (pixels whose taps are all
// padding), several images (a tile crossing from one image to the next, pixels past the last), Z_I
// 0 and not, odd Co, 5x5 taps. A stride the map cannot take (9) falls back to the sm_80 kernels.
// Skipped off compute capability 9.0.
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
    for (const char* force : {"", "sm90_i8_128x128", "sm90_i8_128x64", "sm90_i8_128x64_k2",
                              "sm90_i8_128x64_k4", "sm90_i8_128x64_k8"}) {
      const ConvCase c = int8_case(g, Layout::NHWC,
                                   i % 2 ? ConvKOrder::CiKhKw : ConvKOrder::KhKwCi);
      const std::string name = expect_int8_conv_exact(c, seed++, i++, force);
      // chosen wherever it can run: every one of these layers
      if (*force) EXPECT_EQ(name, std::string("im2col ") + force) << describe(c);
      else EXPECT_EQ(name.rfind("im2col sm90_i8_128x", 0), 0u) << describe(c) << ": " << name;
    }
  // the tile rule at ResNet-50's 3x3 256->256 @14 (M x Co x K = 196 B x 256 x 2304)
  {
    const ConvWeight cw = int8_conv_weight(256, 256, 3, 3, ConvKOrder::KhKwCi, 77);
    PrepareOptions o = cuda_opts();
    o.act = ActQuant::Int8PerTensor;
    const PreparedWeight pw = prepare(cw, o);
    // batch 32: 98 tiles of 128 x 128 fill one round of the 132 SMs, 196 of 128 x 64 would take
    // two; batch 8, 5 and 1: 52, 32 and 8 tiles of 128 x 64, each split over 2, 2 and 8 CTAs (as
    // many as fit in 7/8 of the SMs: 104, 64 and 64 CTAs)
    int sms = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    EXPECT_EQ(pw.kernel_name(196 * 32), "im2col sm90_i8_128x128");
    if (sms == 132) {
      EXPECT_EQ(pw.kernel_name(196 * 8), "im2col sm90_i8_128x64_k2");
      EXPECT_EQ(pw.kernel_name(196 * 5), "im2col sm90_i8_128x64_k2");
    }
    EXPECT_EQ(pw.kernel_name(196), "im2col sm90_i8_128x64_k8");
  }
  // a stride past the im2col map's range: the sm_80 kernels, the same bytes
  expect_int8_conv_exact(int8_case({2, 128, 40, 40, 33, 3, 3, 9, 1, 1}, Layout::NHWC, ConvKOrder::KhKwCi),
                         seed++, 1, "sm90_i8_128x128");
  expect_int8_conv_exact(int8_case({2, 128, 40, 40, 33, 3, 3, 9, 1, 1}, Layout::NHWC, ConvKOrder::KhKwCi),
                         seed++, 1, "sm90_i8_128x64");
}

// Hopper, Ci not a multiple of 128 (32 channels on, multiples of 16): the wgmma s8 kernel on the
// weight's taps padded to the next multiple of 128 columns, which the im2col map reads as zeros
// past Ci: the reference's bytes forced (both tiles) and chosen, Z_I 0 and not (the border
// correction's per-tap sums are the real taps'), one and two K blocks a tap, 5x5 taps, a 1x1,
// stride 2 / 3, dilation 2, NCHW through the copies. Chosen where the sm_80 rule would take its
// 64 x 64 tile; fewer pixels keep the 16 x 32 tile.
TEST(CudaConv, Int8RequantizedHopperPaddedTaps) {
  SKIP_WITHOUT_GPU();
  SKIP_WITHOUT_HOPPER();
  const SquareConv geoms[] = {
      {1, 64, 13, 11, 17, 3, 3, 1, 1, 1},  {3, 96, 9, 7, 129, 3, 3, 2, 2, 1},
      {2, 80, 15, 15, 64, 3, 3, 1, 4, 2},  {1, 192, 12, 10, 40, 5, 5, 3, 3, 1},
      {2, 64, 12, 12, 136, 1, 1, 1, 0, 1}, {4, 64, 20, 20, 64, 3, 3, 1, 1, 1},
      {2, 32, 21, 21, 64, 3, 3, 2, 1, 1},  {1, 48, 10, 10, 24, 3, 3, 1, 1, 1}};
  uint32_t seed = 3300;
  int i = 0;
  for (const SquareConv& g : geoms)
    for (const char* force : {"sm90_i8_128x128", "sm90_i8_128x64", "sm90_i8_128x64_k4", ""}) {
      const ConvCase c =
          int8_case(g, Layout::NHWC, i % 2 ? ConvKOrder::CiKhKw : ConvKOrder::KhKwCi);
      const std::string name = expect_int8_conv_exact(c, seed++, i++, force);
      if (*force) EXPECT_EQ(name, std::string("im2col ") + force) << describe(c);
    }
  for (Ws ws : {Ws::None, Ws::Sized}) {
    const ConvCase c =
        int8_case({8, 64, 28, 28, 64, 3, 3, 1, 1, 1}, Layout::NCHW, ConvKOrder::KhKwCi);
    // 49 tiles of 128 x 64 on 132 SMs: each split over 2 CTAs, through the NHWC copies
    EXPECT_EQ(expect_int8_conv_exact(c, seed++, i++, "", 0, ws), "im2col sm90_i8_128x64_k2");
  }
  // the rule at ResNet-50's 3x3 64->64 @56 (M = 3136 B): 49 tiles of 64 x 64 at batch 1
  const ConvWeight cw = int8_conv_weight(64, 64, 3, 3, ConvKOrder::KhKwCi, 78);
  PrepareOptions o = cuda_opts();
  o.act = ActQuant::Int8PerTensor;
  const PreparedWeight pw = prepare(cw, o);
  EXPECT_EQ(pw.kernel_name(3136), "im2col sm80_i8_16x32");
  EXPECT_EQ(pw.kernel_name(3136 * 8).rfind("im2col sm90_i8_128x", 0), 0u)
      << pw.kernel_name(3136 * 8);
  EXPECT_EQ(pw.kernel_name(3136 * 32).rfind("im2col sm90_i8_128x", 0), 0u)
      << pw.kernel_name(3136 * 32);
  // Ci = 32 (three quarters of each tap padding): from four rounds of 128-pixel tiles on; the
  // detection backbone's 3x3/2 32->64 @320 at batch 1 (25,600 pixels) keeps the 64 x 64 tile
  const PreparedWeight p32 = prepare(int8_conv_weight(64, 32, 3, 3, ConvKOrder::KhKwCi, 79), o);
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  EXPECT_EQ(p32.kernel_name(25600),
            25600 / 128 >= 4 * sms ? "im2col sm90_i8_128x64" : "im2col sm80_i8_64x64_s3");
  EXPECT_EQ(p32.kernel_name(25600 * 8).rfind("im2col sm90_i8_128x", 0), 0u)
      << p32.kernel_name(25600 * 8);
}

// Hopper, NCHW: a call the wgmma kernel would take in NHWC runs it on NHWC copies of x and y
// (1-byte and 4-byte transposes around it): the reference's bytes through the reserved scratch,
// through a workspace of conv2d_workspace_size, and with a workspace too small for the copies
// (the direct kernel); odd spatial sizes (rows of 49 and 35 pixels), stride 2, padding wider than
// the kernel's half with dilation, several images, both tiles forced and chosen, both K orders.
// conv2d_workspace_size counts the copies for such NCHW calls only.
TEST(CudaConv, Int8NchwRunsTheHopperKernelOnCopies) {
  SKIP_WITHOUT_GPU();
  SKIP_WITHOUT_HOPPER();
  const SquareConv geoms[] = {{1, 128, 7, 7, 33, 3, 3, 1, 1, 1},  {3, 256, 9, 7, 129, 3, 3, 2, 2, 1},
                              {2, 128, 15, 15, 64, 3, 3, 1, 4, 2}, {4, 128, 12, 12, 136, 1, 1, 1, 0, 1},
                              {5, 384, 7, 5, 72, 3, 3, 1, 1, 1}};
  uint32_t seed = 2900;
  int i = 0;
  for (const SquareConv& g : geoms)
    for (const char* force : {"", "sm90_i8_128x128", "sm90_i8_128x64"})
      for (Ws ws : {Ws::None, Ws::Sized, Ws::Tiny}) {
        const ConvCase c = int8_case(g, Layout::NCHW, i % 2 ? ConvKOrder::CiKhKw : ConvKOrder::KhKwCi);
        expect_int8_conv_exact(c, seed++, i++, force, 0, ws);
      }
  // the workspace query: the copies (x's bytes, then y's at 4 bytes an element, each rounded up to
  // 256) for NCHW, nothing for NHWC
  const ConvWeight cw = int8_conv_weight(64, 128, 3, 3, ConvKOrder::KhKwCi, 91);
  PrepareOptions o = cuda_opts();
  o.act = ActQuant::Int8PerTensor;
  o.input_quant = {0.05f, 0};
  o.output_quant = {0.5f, 0};
  const PreparedWeight pw = prepare(cw, o);
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  p.layout = Layout::NCHW;
  const TensorView x_nchw(nullptr, DType::I8, {2, 128, 7, 7}, Device::CUDA, 0);
  const auto round256 = [](size_t b) { return (b + 255) / 256 * 256; };
  EXPECT_EQ(conv2d_workspace_size(pw, x_nchw, p), round256(2 * 128 * 49) + round256(2 * 49 * 64 * 4));
  p.layout = Layout::NHWC;
  const TensorView x_nhwc(nullptr, DType::I8, {2, 7, 7, 128}, Device::CUDA, 0);
  EXPECT_EQ(conv2d_workspace_size(pw, x_nhwc, p), 0u);
}

}  // namespace
