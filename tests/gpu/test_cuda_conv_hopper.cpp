// CUDA weight-only conv2d on the Hopper paths against the float64 reference conv: the linear
// wgmma kernel as an implicit GEMM over a TMA im2col map (Ci a multiple of 64, and other Ci with
// padded taps), NCHW calls through NHWC copies, and the NCHW <-> NHWC transpose they use. The
// other kernels' tests and the tolerances: test_cuda_conv.cpp. Skipped (visibly) without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/launch/conv_kernels.hpp"
#include "gpu/conv_test_support.hpp"
#include "gpu/device_vectors.hpp"

using namespace mixq;

namespace {

// A geometry of the wgmma implicit-GEMM sweeps below: stride / padding / dilation per dimension,
// channels per scale block (0: per output channel), the scheme's code type and zero form.
struct WgmmaGeom {
  int64_t B, Ci, H, W, Co, Kh, Kw, sh, sw, ph, pw, dh, dw, cb;
  const char* scheme;
  Layout layout = Layout::NHWC;
};

// Case i of a sweep: x of type xt; y f32 every third case, else xt; bias every second; ReLU6 on
// every fourth from the second.
ConvCase wgmma_case(const WgmmaGeom& g, DType xt, int i) {
  ConvCase c;
  c.B = g.B, c.Ci = g.Ci, c.H = g.H, c.W = g.W, c.Co = g.Co, c.Kh = g.Kh, c.Kw = g.Kw;
  c.sh = g.sh, c.sw = g.sw, c.ph = g.ph, c.pw = g.pw, c.dh = g.dh, c.dw = g.dw;
  c.cb = g.cb;
  c.scheme = g.scheme;
  c.layout = g.layout;
  c.xt = xt;
  c.yt = i % 3 == 0 ? DType::F32 : xt;
  c.bias = i % 2 == 0;
  c.clamp = i % 4 == 1 ? Epilogue::relu6() : Epilogue::none();
  return c;
}

// Runs c against float64 (its types' tolerance); a weight of more than one tap must name the
// wgmma implicit GEMM (1x1 weights name the linear kernel of their stride-1 unpadded calls).
void expect_wgmma_conv_ok(const ConvCase& c, const ConvWeight& cw, uint32_t seed) {
  const PreparedWeight pw = prepare(cw, cuda_opts());
  int64_t Ho = 0, Wo = 0;
  conv2d_output_size(c.H, c.W, c.Kh, c.Kw, params_of(c), &Ho, &Wo);
  const std::string name = pw.kernel_name(c.B * Ho * Wo);
  if (c.Kh * c.Kw > 1)
    EXPECT_EQ(name.rfind("im2col sm90_wo_ws", 0), 0u) << describe(c) << ": " << name;
  const double tol = tolerance(c.xt, c.yt);
  const ConvRun wg = run_conv(c, cw, seed);
  EXPECT_LE(wg.rel_err, tol) << describe(c);
  EXPECT_LE(wg.max_err, 12 * tol) << describe(c);
}

}  // namespace

// On Hopper, NHWC 16-bit convs with Ci a multiple of 64 run as the weight-only wgmma kernel's
// implicit GEMM (activations through a TMA im2col map, tap by tap): the ResNet shapes, strides,
// padding past the kernel's half, dilation, rectangular kernels, strided 1x1, batch > 1 with
// tiles crossing images, odd Co, every zero form and block size, f32 / 16-bit outputs, bias and
// clamp; each against the float64 reference and against the sm_80 kernel forced on the same case.
TEST(CudaConv, WgmmaImplicitGemm) {
  SKIP_WITHOUT_HOPPER();
  const WgmmaGeom geoms[] = {
      // ResNet 3x3 @56; stride 2, batch 2; mixed stride / dilation with odd sizes; int8 codes
      {1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 64, "w4g32"},
      {2, 128, 28, 28, 128, 3, 3, 2, 2, 1, 1, 1, 1, 128, "w4g32"},
      {3, 64, 13, 9, 72, 3, 3, 2, 1, 2, 3, 2, 1, 32, "w4g32zp"},
      {1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, 1, 128, "w8g32zp"},
      // strided 1x1 with per-channel scales; M = 98 (tiles cross images); rectangular 5x3 with
      // blocks of 16; stride 3 / 2 with Co past 128
      {7, 64, 7, 7, 200, 1, 1, 2, 2, 0, 0, 1, 1, 0, "w4g32asym"},
      {2, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 128, "w4g32"},
      {1, 64, 17, 15, 64, 5, 3, 1, 1, 3, 2, 1, 2, 16, "w4g32asym"},
      {5, 192, 9, 11, 100, 3, 3, 3, 2, 1, 1, 1, 1, 64, "w8g32"},
  };
  uint32_t seed = 900;
  int i = 0;
  for (const WgmmaGeom& g : geoms)
    for (DType xt : {DType::F16, DType::BF16}) {
      const ConvCase c = wgmma_case(g, xt, i++);
      const ConvWeight cw = make_conv_weight(c, seed);
      expect_wgmma_conv_ok(c, cw, seed);
      ConvCase old = c;
      old.force = "sm80_conv_igemm";
      const ConvRun sm80 = run_conv(old, cw, seed);
      EXPECT_LE(sm80.rel_err, tolerance(c.xt, c.yt)) << describe(old);
      ++seed;
    }
}

// Ci not a multiple of 64 (from 32 channels, 16-byte pixels): the wgmma implicit GEMM on the
// weight's taps padded to the next multiple of 64 columns, which the im2col map reads as zeros
// past Ci. Every zero form, int4 / int8, blocks and per-channel scales, one and two chunks a tap,
// odd chunk counts, strides, dilation, a strided 1x1, both 16-bit types, NHWC and NCHW (copies).
TEST(CudaConv, WgmmaImplicitGemmPadsTapChannels) {
  SKIP_WITHOUT_HOPPER();
  const WgmmaGeom geoms[] = {
      // a detection downsampler; two chunks a tap, dilation 2; int8 per channel, Co past 128
      {2, 32, 40, 40, 64, 3, 3, 2, 2, 1, 1, 1, 1, 32, "w4g32"},
      {1, 96, 15, 13, 72, 3, 3, 1, 1, 2, 2, 2, 2, 32, "w4g32zp"},
      {3, 160, 9, 9, 130, 3, 3, 1, 1, 1, 1, 1, 1, 0, "w8g32asym"},
      // 24 of 64 columns padding; a strided 1x1 with blocks of 16; 25 taps (an odd chunk count)
      {1, 40, 11, 11, 48, 3, 3, 1, 1, 1, 1, 1, 1, 0, "w4g32"},
      {2, 48, 10, 12, 64, 1, 1, 2, 2, 0, 0, 1, 1, 16, "w4g32asym"},
      {1, 32, 9, 9, 32, 5, 5, 1, 1, 2, 2, 1, 1, 32, "w8g32zp"},
      // NCHW through the NHWC copies, stride 2 and 3
      {2, 32, 20, 20, 64, 3, 3, 2, 2, 1, 1, 1, 1, 32, "w4g32", Layout::NCHW},
      {1, 80, 12, 12, 96, 3, 3, 3, 3, 1, 1, 1, 1, 16, "w4g32zp", Layout::NCHW},
  };
  uint32_t seed = 1900;
  int i = 0;
  for (const WgmmaGeom& g : geoms)
    for (DType xt : {DType::F16, DType::BF16}) {
      const ConvCase c = wgmma_case(g, xt, i++);
      expect_wgmma_conv_ok(c, make_conv_weight(c, seed), seed);
      ++seed;
    }
}

// The K split over a thread-block cluster on the implicit GEMM (tuning wo_k_split=2, 4, 8;
// sm90_wo_ws_k_split.cuh): each tile's taps in 2-8 ranges on the CTAs of a cluster, summed
// through distributed shared memory. The batch-1 ResNet layers the rule splits (int4 and int8),
// stride and dilation with odd sizes and odd Co, padded taps, a 3x1 kernel of 3 stages (a forced
// 4 or 8 splits 2 ways), NCHW through the copies, both 16-bit types, f32 outputs, bias and relu6;
// each against float64, after the stream-K plan (wo_k_split=1) on the same case; the kernel's name
// carries the split where the instantiation has it (not the fold at token tile 64, as the int8
// 512-channel layer may run). (An odd chunk count takes token tiles of 128, which do not split.)
TEST(CudaConv, WgmmaImplicitGemmKSplitOverCluster) {
  SKIP_WITHOUT_HOPPER();
  const WgmmaGeom geoms[] = {
      {1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, 1, 128, "w4g32"},
      {1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 128, "w8g32zp"},
      {3, 128, 13, 9, 72, 3, 3, 2, 1, 2, 3, 2, 1, 32, "w4g32zp"},
      {1, 96, 15, 13, 72, 3, 3, 1, 1, 2, 2, 2, 2, 32, "w4g32asym"},
      {1, 128, 9, 7, 40, 3, 1, 1, 1, 1, 0, 1, 1, 0, "w4g32"},
      {2, 128, 20, 20, 64, 3, 3, 2, 2, 1, 1, 1, 1, 32, "w4g32", Layout::NCHW},
  };
  uint32_t seed = 2700;
  int i = 0;
  for (const WgmmaGeom& g : geoms)
    for (DType xt : {DType::F16, DType::BF16}) {
      ConvCase c = wgmma_case(g, xt, i++);
      const ConvWeight cw = make_conv_weight(c, seed);
      int64_t Ho = 0, Wo = 0;
      conv2d_output_size(c.H, c.W, c.Kh, c.Kw, params_of(c), &Ho, &Wo);
      // the instantiations that have the split: token tiles up to 32, and 64 without the fold
      const std::string plain = prepare(cw, cuda_opts()).kernel_name(c.B * Ho * Wo);
      const bool has_split =
          plain.find(",mt16,") != std::string::npos || plain.find(",mt32,") != std::string::npos ||
          (plain.find(",mt64,") != std::string::npos && plain.find(",fold") == std::string::npos);
      EXPECT_TRUE(has_split || g.Ci * g.Kh * g.Kw > 4096) << describe(c) << ": " << plain;
      for (int split : {1, 2, 4, 8}) {
        c.tuning = "wo_k_split=" + std::to_string(split);
        const std::string name =
            prepare(cw, test::with_tuning(cuda_opts(), c.tuning)).kernel_name(c.B * Ho * Wo);
        EXPECT_EQ(name.find(",ksplit") != std::string::npos, split > 1 && has_split)
            << describe(c) << ": " << name;
        expect_wgmma_conv_ok(c, cw, seed);
      }
      ++seed;
    }
}

namespace {

// [b][r][c] -> [b][c][r] on the host, elements of `es` bytes (NCHW <-> NHWC).
std::vector<uint8_t> transpose_bytes(const void* src, size_t es, int64_t batch, int64_t rows,
                                     int64_t cols) {
  const auto* s = static_cast<const uint8_t*>(src);
  std::vector<uint8_t> d(size_t(batch * rows * cols) * es);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(d.data() + size_t((b * cols + c) * rows + r) * es,
                    s + size_t((b * rows + r) * cols + c) * es, es);
  return d;
}

std::vector<float> nchw_to_nhwc(const std::vector<float>& x, int64_t B, int64_t C, int64_t HW) {
  const std::vector<uint8_t> b = transpose_bytes(x.data(), 4, B, C, HW);
  std::vector<float> out(x.size());
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

}  // namespace

// On Hopper an NCHW call with 16-bit x runs the NHWC kernels (the wgmma implicit GEMM, or the
// linear kernel of a 1x1 stride-1 unpadded conv) on NHWC copies of x and y: its output is the
// NHWC call's on the transposed input, bit for bit, through the reserved scratch (no workspace)
// and through a workspace of conv2d_workspace_size. A workspace sized for the GEMM alone (what
// the same call in NHWC asks for) is no error: without room for the copies the sm_80 kernel runs
// the call (checked against the float64 reference).
TEST(CudaConv, NchwRunsTheNhwcKernelsOnCopies) {
  SKIP_WITHOUT_HOPPER();
  struct G {
    int64_t B, Ci, H, W, Co, k, s, pad, cb;
    const char* scheme;
  };
  const G geoms[] = {
      {2, 128, 14, 14, 128, 3, 1, 1, 128, "w4g32"},  // the implicit GEMM
      {1, 256, 7, 7, 128, 1, 1, 0, 128, "w4g32"},    // 1x1 stride 1 unpadded: the linear kernel
      {1, 64, 9, 11, 72, 3, 2, 1, 64, "w8g32zp"},    // odd sizes, stride 2, padding 1
      // strided 1x1: the implicit GEMM; 2 K steps, too few for the sm_80 kernel's K split, so the
      // NHWC call's workspace size has no room for the copies (the fallback runs)
      {3, 64, 9, 11, 80, 1, 2, 0, 32, "w4g32asym"},
  };
  const auto round256 = [](size_t b) { return (b + 255) / 256 * 256; };
  uint32_t seed = 1500;
  int i = 0;
  for (const G& g : geoms)
    for (DType xt : {DType::F16, DType::BF16})
      for (DType yt : {xt, DType::F32}) {
        ConvCase c;
        c.B = g.B; c.Ci = g.Ci; c.H = g.H; c.W = g.W; c.Co = g.Co; c.Kh = c.Kw = g.k;
        c.sh = c.sw = g.s; c.ph = c.pw = g.pad;
        c.cb = g.cb;
        c.scheme = g.scheme;
        c.layout = Layout::NCHW;
        c.xt = xt;
        c.yt = yt;
        c.bias = i % 2 == 0;
        c.clamp = i % 3 == 1 ? Epilogue::relu() : Epilogue::none();
        ++i;
        ConvCase n = c;
        n.layout = Layout::NHWC;
        const ConvWeight cw = make_conv_weight(c, seed);
        const PreparedWeight pw = prepare(cw, cuda_opts());
        int64_t Ho = 0, Wo = 0;
        conv2d_output_size(c.H, c.W, c.Kh, c.Kw, params_of(c), &Ho, &Wo);
        const double tol = tolerance(xt, yt);
        const std::vector<float> x = randn(size_t(c.B * c.Ci * c.H * c.W), seed + 1);
        const std::vector<float> x_nhwc = nchw_to_nhwc(x, c.B, c.Ci, c.H * c.W);
        const ConvRun nhwc = run_conv(n, cw, seed, &x_nhwc);
        EXPECT_LE(nhwc.rel_err, tol) << describe(n);
        const std::vector<uint8_t> want =
            transpose_bytes(nhwc.y.data(), esize(yt), c.B, Ho * Wo, c.Co);
        // the reserved scratch
        const ConvRun scratch = run_conv(c, cw, seed, &x);
        EXPECT_EQ(scratch.y, want) << describe(c) << ": NCHW without a workspace differs from NHWC";
        // a caller workspace of conv2d_workspace_size: the GEMM's part, then the copies (y's at
        // 4 bytes an element whatever y's dtype)
        const size_t need = conv2d_workspace_size(
            pw, act_view(nullptr, xt, c, c.Ci, c.H, c.W, Device::CUDA), params_of(c));
        const size_t gemm = conv2d_workspace_size(
            pw, act_view(nullptr, xt, n, c.Ci, c.H, c.W, Device::CUDA), params_of(n));
        EXPECT_GE(need, gemm) << describe(c);
        const size_t copies = round256(size_t(c.B * c.H * c.W * c.Ci) * 2) +
                              round256(size_t(c.B * Ho * Wo * c.Co) * 4);
        EXPECT_GE(need, copies) << describe(c);
        const ConvRun sized = run_conv(c, cw, seed, &x, need);
        EXPECT_EQ(sized.y, want) << describe(c) << ": NCHW with a workspace of " << need
                                 << " bytes differs from NHWC";
        // a workspace of the NHWC call's size: the sm_80 kernel where the copies do not fit
        if (g.k == 1 && g.s == 2)
          EXPECT_LT(gemm, need) << describe(c) << ": this case should exercise the fallback";
        const ConvRun small = run_conv(c, cw, seed, &x, gemm);
        EXPECT_LE(small.rel_err, tol) << describe(c) << ", workspace " << gemm << " of " << need;
        EXPECT_LE(small.max_err, 12 * tol) << describe(c) << ", workspace " << gemm << " of "
                                          << need;
        ++seed;
      }
}

// The layout transpose itself (launch/conv_layout.cu) against the host's, bit for bit: 2-byte
// elements through the 64 x 64 pair kernel in its four forms (4-byte pairs on the load side
// where the source rows are even and 4-byte aligned, on the store side where the destination
// rows are; a pointer 2 bytes off alignment takes the 2-byte form), 1-byte elements (int8 images)
// through its element form with 2-byte or 1-byte stores, 4-byte elements through the 32 x 32
// kernel; partial tiles at both edges, batches, with and without dependent launch.
TEST(CudaConv, ImageTransposeEveryShapeAndAlignment) {
  SKIP_WITHOUT_GPU();
  struct S {
    int64_t batch, rows, cols;
  };
  const S shapes[] = {{1, 64, 64},  {3, 1, 1},   {2, 65, 63},   {1, 130, 49},
                      {2, 49, 512}, {5, 7, 3},   {1, 128, 196}, {2, 196, 256},
                      {1, 1, 200},  {1, 200, 1}, {3, 64, 130},  {2, 127, 66}};
  uint32_t seed = 4100;
  for (const S& s : shapes)
    for (size_t es : {size_t(1), size_t(2), size_t(4)})
      for (int src_skew : {0, 1})
        for (int dst_skew : {0, 1})
          for (bool pdl : {false, true}) {
            if (es == 4 && (src_skew || dst_skew)) continue;  // 4-byte elements are aligned
            // one element off the pairs' alignment (bytes: 1, halves: 2)
            const int src_off = src_skew * int(es), dst_off = dst_skew * int(es);
            const size_t n = size_t(s.batch * s.rows * s.cols);
            std::vector<uint8_t> host(n * es);
            std::mt19937 rng(seed++);
            for (auto& b : host) b = uint8_t(rng());
            std::vector<uint8_t> padded(host.size() + 16, 0);
            std::memcpy(padded.data() + src_off, host.data(), host.size());
            const DeviceBuffer src = test::upload(padded);
            DeviceBuffer dst(host.size() + 16);
            std::vector<uint8_t> poison(host.size() + 16, 0xA5);
            dst.copy_from_host(poison.data(), poison.size());
            cuda::launch_image_transpose(static_cast<const uint8_t*>(src.data()) + src_off,
                                         static_cast<uint8_t*>(dst.data()) + dst_off, int(es),
                                         s.batch, s.rows, s.cols, nullptr, pdl);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            const std::vector<uint8_t> got = test::download<uint8_t>(dst, poison.size());
            const std::vector<uint8_t> want =
                transpose_bytes(host.data(), es, s.batch, s.rows, s.cols);
            const std::string what = std::to_string(s.batch) + "x" + std::to_string(s.rows) + "x" +
                                     std::to_string(s.cols) + ", " + std::to_string(es) +
                                     "-byte, src +" + std::to_string(src_off) + ", dst +" +
                                     std::to_string(dst_off) + (pdl ? ", pdl" : "");
            EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + dst_off)) << what;
            // nothing written outside the destination
            for (int i = 0; i < dst_off; ++i) EXPECT_EQ(got[size_t(i)], 0xA5) << what;
            for (size_t i = size_t(dst_off) + want.size(); i < got.size(); ++i)
              ASSERT_EQ(got[i], 0xA5) << what << ": byte " << i << " past the end";
          }
}
