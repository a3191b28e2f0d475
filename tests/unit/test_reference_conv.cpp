// Reference conv2d against a direct definition written here (loops over the logical
// [Co][Ci][Kh][Kw] kernel decoded from bytes), for both layouts and both K orders, plus the
// 1x1 conv == linear identity (bitwise) and the int8 requantized variant.
#include <gtest/gtest.h>

#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"
#include "unit/test_util.hpp"

using namespace mixq;
using namespace mixq::testing;

namespace {

int64_t k_of(const ConvWeight& w, int64_t ci, int64_t kh, int64_t kw) {
  return w.order == ConvKOrder::KhKwCi ? (kh * w.Kw + kw) * w.Ci + ci
                                       : (ci * w.Kh + kh) * w.Kw + kw;
}

ConvWeight make_conv_weight(const std::string& scheme, int64_t Co, int64_t Ci, int64_t Kh,
                            int64_t Kw, ConvKOrder order, uint32_t seed) {
  const HostTensor w = random_tensor(DType::F32, {Co, Ci * Kh * Kw}, seed, -0.7, 0.9);
  ConvWeight cw;
  cw.weight = scheme == "i8pc" ? quantize_weight_int8_per_channel(w.view())
                               : quantize_weight(w.view(), parse_scheme(scheme));
  cw.Ci = Ci;
  cw.Kh = Kh;
  cw.Kw = Kw;
  cw.order = order;
  cw.validate();
  return cw;
}

struct Geometry {
  int64_t B, Ci, H, W, Co, Ho, Wo;
  bool nchw;
  int64_t xi(int64_t b, int64_t c, int64_t h, int64_t w) const {
    return nchw ? ((b * Ci + c) * H + h) * W + w : ((b * H + h) * W + w) * Ci + c;
  }
  int64_t yi(int64_t b, int64_t c, int64_t h, int64_t w) const {
    return nchw ? ((b * Co + c) * Ho + h) * Wo + w : ((b * Ho + h) * Wo + w) * Co + c;
  }
};

// y[b][co][oh][ow] = sum over (ci, kh, kw) with the input position inside the image of
// x[b][ci][oh*sh - ph + kh*dh][ow*sw - pw + kw*dw] * W[co][ci][kh][kw]; then bias and clamp.
std::vector<double> direct_conv(const std::vector<double>& x, const ConvWeight& cw,
                                const Geometry& g, const Conv2dParams& p,
                                const std::vector<double>* bias, double lo, double hi) {
  std::vector<double> y(static_cast<size_t>(g.B * g.Co * g.Ho * g.Wo));
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t co = 0; co < g.Co; ++co)
      for (int64_t oh = 0; oh < g.Ho; ++oh)
        for (int64_t ow = 0; ow < g.Wo; ++ow) {
          double acc = 0;
          for (int64_t ci = 0; ci < g.Ci; ++ci)
            for (int64_t kh = 0; kh < cw.Kh; ++kh)
              for (int64_t kw = 0; kw < cw.Kw; ++kw) {
                const int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dilation_h;
                const int64_t iw = ow * p.stride_w - p.pad_w + kw * p.dilation_w;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                acc += x[g.xi(b, ci, ih, iw)] * raw_dequant(cw.weight, co, k_of(cw, ci, kh, kw));
              }
          if (bias) acc += (*bias)[co];
          y[g.yi(b, co, oh, ow)] = std::min(std::max(acc, lo), hi);
        }
  return y;
}

PreparedWeight prepare_ref(const ConvWeight& w, ActQuant act = ActQuant::None,
                           Int8TensorQuant in = {}, Int8TensorQuant out = {}) {
  PrepareOptions o;
  o.backend = BackendKind::Reference;
  o.act = act;
  o.input_quant = in;
  o.output_quant = out;
  return prepare(w, o);
}

}  // namespace

TEST(RefConv2d, MatchesDirectDefinition) {
  struct P { int64_t sh, sw, ph, pw, dh, dw; };
  const P params[] = {{1, 1, 0, 0, 1, 1}, {2, 2, 1, 1, 1, 1}, {2, 1, 0, 2, 1, 2}, {1, 3, 2, 1, 2, 1}};
  const int64_t B = 2, Ci = 8, H = 7, W = 6, Co = 5, Kh = 3, Kw = 2;
  for (ConvKOrder order : {ConvKOrder::KhKwCi, ConvKOrder::CiKhKw})
    for (Layout layout : {Layout::NCHW, Layout::NHWC})
      for (const P& pp : params) {
        // KhKwCi: blocks run along Ci (4 | 8). CiKhKw: a multiple of Kh*Kw = 6 dividing K = 48.
        const ConvWeight cw = make_conv_weight(order == ConvKOrder::KhKwCi ? "w4g4asym" : "w8g12zp",
                                               Co, Ci, Kh, Kw, order, 500);
        Conv2dParams p;
        p.stride_h = pp.sh; p.stride_w = pp.sw; p.pad_h = pp.ph; p.pad_w = pp.pw;
        p.dilation_h = pp.dh; p.dilation_w = pp.dw; p.layout = layout;
        int64_t Ho, Wo;
        conv2d_output_size(H, W, Kh, Kw, p, &Ho, &Wo);
        const Geometry g{B, Ci, H, W, Co, Ho, Wo, layout == Layout::NCHW};
        const HostTensor x = random_tensor(DType::F16, g.nchw ? std::vector<int64_t>{B, Ci, H, W}
                                                              : std::vector<int64_t>{B, H, W, Ci}, 501);
        const HostTensor bias = random_tensor(DType::BF16, {Co}, 502, -0.5, 0.5);
        HostTensor y(DType::F32, g.nchw ? std::vector<int64_t>{B, Co, Ho, Wo}
                                        : std::vector<int64_t>{B, Ho, Wo, Co});
        y.poison();
        Epilogue ep;
        ep.bias = bias.view();
        ep.clamp_lo = -1.0f;
        ep.clamp_hi = 1.5f;
        conv2d(x.view(), prepare_ref(cw), y.view(), p, ep);
        const std::string what = std::string(order == ConvKOrder::KhKwCi ? "KhKwCi " : "CiKhKw ") +
                                 (g.nchw ? "NCHW" : "NHWC") + " stride " + std::to_string(pp.sh) +
                                 "," + std::to_string(pp.sw) + " pad " + std::to_string(pp.ph) +
                                 "," + std::to_string(pp.pw) + " dil " + std::to_string(pp.dh) +
                                 "," + std::to_string(pp.dw);
        expect_all_written(y, what.c_str());
        const std::vector<double> bd = bias.values();
        const std::vector<double> want = direct_conv(x.values(), cw, g, p, &bd, -1.0, 1.5);
        for (int64_t i = 0; i < y.numel(); ++i)
          ASSERT_NEAR(y.get(i), want[i], 1e-5) << what << " i " << i;
        // Some outputs must be clamped, some not, so both paths are exercised.
        int64_t clamped = 0;
        for (double v : want) clamped += (v == -1.0 || v == 1.5);
        EXPECT_GT(clamped, 0) << what;
        EXPECT_LT(clamped, y.numel()) << what;
      }
}

// With H = W = Kh = Kw = 1 the conv is the GEMM [B, Ci] x [Ci, Co]: identical f32 bits.
TEST(RefConv2d, OneByOneConvIsExactlyLinear) {
  const int64_t B = 3, Ci = 64, Co = 24;
  for (ConvKOrder order : {ConvKOrder::KhKwCi, ConvKOrder::CiKhKw}) {
    const ConvWeight cw = make_conv_weight("w4g32zp", Co, Ci, 1, 1, order, 510);
    const HostTensor x = random_tensor(DType::BF16, {B, Ci, 1, 1}, 511);
    const HostTensor bias = random_tensor(DType::F32, {Co}, 512);
    Epilogue ep;
    ep.bias = bias.view();
    ep.clamp_lo = 0.f;
    PrepareOptions o;
    o.backend = BackendKind::Reference;
    const PreparedWeight pc = prepare(cw, o), pl = prepare(cw.weight, o);
    HostTensor yc(DType::F32, {B, Co, 1, 1}), yl(DType::F32, {B, Co});
    yc.poison();
    yl.poison();
    conv2d(x.view(), pc, yc.view(), Conv2dParams{}, ep);
    linear(TensorView(const_cast<uint8_t*>(x.bytes.data()), DType::BF16, {B, Ci}), pl, yl.view(), ep);
    expect_all_written(yc, "1x1 conv");
    EXPECT_EQ(yc.bytes, yl.bytes) << "1x1 conv and linear differ";
  }
  // NHWC with a real image: every pixel is a row of the GEMM.
  const ConvWeight cw = make_conv_weight("w8g16", Co, Ci, 1, 1, ConvKOrder::KhKwCi, 513);
  const HostTensor x = random_tensor(DType::F32, {2, 3, 5, Ci}, 514);
  Conv2dParams p;
  p.layout = Layout::NHWC;
  PrepareOptions o;
  o.backend = BackendKind::Reference;
  HostTensor yc(DType::F32, {2, 3, 5, Co}), yl(DType::F32, {30, Co});
  yc.poison();
  conv2d(x.view(), prepare(cw, o), yc.view(), p, {});
  linear(TensorView(const_cast<uint8_t*>(x.bytes.data()), DType::F32, {30, Ci}), prepare(cw.weight, o),
         yl.view(), {});
  EXPECT_EQ(yc.bytes, yl.bytes);
}

TEST(RefConv2d, Int8RequantMatchesDirectDefinition) {
  const int64_t B = 2, Ci = 6, H = 5, W = 7, Co = 4, Kh = 3, Kw = 3;
  const Int8TensorQuant in{0.05f, 9}, out{0.1f, -3};
  for (Layout layout : {Layout::NCHW, Layout::NHWC})
    for (ConvKOrder order : {ConvKOrder::KhKwCi, ConvKOrder::CiKhKw}) {
      const ConvWeight cw = make_conv_weight("i8pc", Co, Ci, Kh, Kw, order, 520);
      Conv2dParams p;
      p.pad_h = 1;
      p.pad_w = 2;
      p.stride_w = 2;
      p.layout = layout;
      int64_t Ho, Wo;
      conv2d_output_size(H, W, Kh, Kw, p, &Ho, &Wo);
      const Geometry g{B, Ci, H, W, Co, Ho, Wo, layout == Layout::NCHW};
      const HostTensor x = random_tensor(DType::I8, g.nchw ? std::vector<int64_t>{B, Ci, H, W}
                                                           : std::vector<int64_t>{B, H, W, Ci},
                                         521, -128.0, 128.0);
      const HostTensor bias = random_tensor(DType::F32, {Co}, 522, -1.0, 1.0);
      const std::vector<int64_t> yshape = g.nchw ? std::vector<int64_t>{B, Co, Ho, Wo}
                                                 : std::vector<int64_t>{B, Ho, Wo, Co};
      HostTensor yq(DType::I8, yshape), yq2(DType::I8, yshape), yr(DType::F32, yshape);
      yq.poison(0x00);
      yq2.poison(0x7F);
      yr.poison();
      Epilogue ep;
      ep.bias = bias.view();
      ep.clamp_lo = 0.f;  // ReLU in the real domain
      const PreparedWeight pw = prepare_ref(cw, ActQuant::Int8PerTensor, in, out);
      conv2d(x.view(), pw, yq.view(), p, ep);
      conv2d(x.view(), pw, yq2.view(), p, ep);
      conv2d(x.view(), pw, yr.view(), p, ep);
      EXPECT_EQ(yq.bytes, yq2.bytes) << "some i8 outputs were not written";
      expect_all_written(yr, "conv requant f32");
      // Padding holds the real value 0, i.e. the code Z_I: it contributes nothing.
      for (int64_t b = 0; b < B; ++b)
        for (int64_t co = 0; co < Co; ++co)
          for (int64_t oh = 0; oh < Ho; ++oh)
            for (int64_t ow = 0; ow < Wo; ++ow) {
              int64_t acc = 0;
              for (int64_t ci = 0; ci < Ci; ++ci)
                for (int64_t kh = 0; kh < Kh; ++kh)
                  for (int64_t kw = 0; kw < Kw; ++kw) {
                    const int64_t ih = oh - p.pad_h + kh, iw = ow * 2 - p.pad_w + kw;
                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                    acc += (int64_t(x.get(g.xi(b, ci, ih, iw))) - in.zero) *
                           raw_code(cw.weight, co, k_of(cw, ci, kh, kw));
                  }
              const double real = std::max(
                  0.0, double(in.scale) * raw_scale(cw.weight, co, 0) * double(acc) + bias.get(co));
              const double q = std::min(127.0, std::max(-128.0, std::nearbyint(real / out.scale) + out.zero));
              const int64_t i = g.yi(b, co, oh, ow);
              ASSERT_NEAR(yr.get(i), real, 2 * half_ulp(DType::F32, real)) << i;
              ASSERT_EQ(yq.get(i), q) << i;
            }
    }
}
