// MNN int4 conv weights (formats.md §7): worked bytes, high-nibble-first order across channels,
// symmetric and asymmetric blocks, reverse packer, and conv2d end to end on the reference and
// CPU backends against a float64 direct convolution.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "mixq/formats/mnn.hpp"
#include "mixq/ops.hpp"
#include "test_safetensors_util.hpp"

using namespace mixq;
using namespace mixq::formats;
using mixq_test::expect_error;

namespace {

TEST(Mnn, WorkedBytes) {
  int a, b;
  mnn_int4_byte(0x3C, &a, &b);
  EXPECT_EQ(a, -5);
  EXPECT_EQ(b, 4);
  mnn_int4_byte(0x80, &a, &b);
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, -8);
  mnn_int4_byte(0xF7, &a, &b);
  EXPECT_EQ(a, 7);
  EXPECT_EQ(b, -1);
  // Same bytes through the converter: one output channel, Ci = 6, symmetric scale 0.5.
  MnnInt4Weight m;
  m.Co = 1;
  m.Ci = 6;
  m.packed = {0x3C, 0x80, 0xF7};
  m.alpha = {0.5f};
  const ConvWeight cw = mnn_int4_to_conv_weight(m);
  const int expect[6] = {-5, 4, 0, -8, 7, -1};
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(cw.weight.code_int(0, k), expect[k]);
    EXPECT_EQ(cw.weight.dequant(0, k), 0.5f * expect[k]);
  }
}

MnnInt4Weight random_mnn(int64_t Co, int64_t Ci, int64_t Kh, int64_t Kw, int64_t nb, bool asym,
                         uint32_t seed) {
  std::mt19937 rng(seed);
  MnnInt4Weight m;
  m.Co = Co;
  m.Ci = Ci;
  m.Kh = Kh;
  m.Kw = Kw;
  m.blocks_per_channel = nb;
  m.asymmetric = asym;
  m.packed.resize((Co * Ci * Kh * Kw + 1) / 2);
  for (auto& b : m.packed) b = static_cast<uint8_t>(rng());
  if ((Co * Ci * Kh * Kw) % 2) m.packed.back() &= 0xF0;  // the unused low nibble stays zero
  std::uniform_real_distribution<float> s(0.01f, 0.2f), mn(-2.f, 0.f);
  for (int64_t i = 0; i < Co * nb; ++i) {
    if (asym) m.alpha.push_back(mn(rng));
    m.alpha.push_back(s(rng));
  }
  return m;
}

TEST(Mnn, SymAndAsymBlocksMatchMnnRuntimeFormula) {
  struct C {
    int64_t Co, Ci, Kh, Kw, nb;
    bool asym;
  };
  uint32_t seed = 3;
  for (const C c : {C{5, 32, 3, 3, 2, false}, C{7, 48, 3, 3, 3, true}, C{3, 5, 1, 1, 1, true},
                    C{9, 17, 1, 3, 1, false}}) {
    SCOPED_TRACE(::testing::Message() << c.Co << "x" << c.Ci << "x" << c.Kh << "x" << c.Kw
                                      << " nb=" << c.nb << " asym=" << c.asym);
    const MnnInt4Weight m = random_mnn(c.Co, c.Ci, c.Kh, c.Kw, c.nb, c.asym, ++seed);
    const ConvWeight cw = mnn_int4_to_conv_weight(m);
    EXPECT_EQ(cw.order, ConvKOrder::CiKhKw);
    EXPECT_EQ(cw.weight.code_type, DType::I4);
    EXPECT_EQ(cw.weight.zero_kind, c.asym ? ZeroKind::Offset : ZeroKind::None);
    const int64_t K = c.Ci * c.Kh * c.Kw, bk = K / c.nb;
    EXPECT_EQ(cw.weight.block_k, bk);
    for (int64_t oc = 0; oc < c.Co; ++oc)
      for (int64_t k = 0; k < K; ++k) {
        // Element e of the whole-tensor bitstream: byte e/2, high nibble when e is even.
        const int64_t e = oc * K + k;
        const int nibble = e % 2 == 0 ? m.packed[e / 2] >> 4 : m.packed[e / 2] & 0xF;
        const int64_t i = oc * c.nb + k / bk;
        const float scale = c.asym ? m.alpha[2 * i + 1] : m.alpha[i];
        const float offset = c.asym ? m.alpha[2 * i] + 8.0f * scale : 0.f;
        const float ref = c.asym ? float(nibble - 8) * scale + offset : float(nibble - 8) * scale;
        ASSERT_EQ(cw.weight.dequant(oc, k), ref);
        // And close to the file-level formula nibble*scale + min (exact up to f32 rounding).
        if (c.asym) {
          ASSERT_NEAR(cw.weight.dequant(oc, k), nibble * scale + m.alpha[2 * i], 1e-5);
        }
      }
    const MnnInt4Weight back = mnn_int4_pack(cw);
    EXPECT_EQ(back.packed, m.packed);
    ASSERT_EQ(back.alpha.size(), m.alpha.size());
    for (size_t i = 0; i < m.alpha.size(); ++i) EXPECT_NEAR(back.alpha[i], m.alpha[i], 1e-6);
    const ConvWeight again = mnn_int4_to_conv_weight(back);
    EXPECT_EQ(again.weight.codes, cw.weight.codes);
  }
}

TEST(Mnn, RejectsInconsistentInput) {
  MnnInt4Weight m = random_mnn(2, 32, 3, 3, 2, false, 1);
  m.blocks_per_channel = 3;
  expect_error([&] { mnn_int4_to_conv_weight(m); }, ErrorCode::Format, {"do not divide Ci"});
  m = random_mnn(2, 32, 3, 3, 2, false, 1);
  m.packed.pop_back();
  expect_error([&] { mnn_int4_to_conv_weight(m); }, ErrorCode::Format, {"packed codes hold"});
  m = random_mnn(2, 32, 3, 3, 2, true, 1);
  m.alpha.pop_back();
  expect_error([&] { mnn_int4_to_conv_weight(m); }, ErrorCode::Format, {"alpha holds"});
  m = random_mnn(2, 32, 1, 1, 2, true, 1);
  m.alpha[1] = NAN;
  expect_error([&] { mnn_int4_to_conv_weight(m); }, ErrorCode::Format, {"not finite"});
}

// The weight decoded from the MNN bytes alone (formats.md §7, not via the canonical form):
// w = q*scale (sym) or q*scale + (min + 8*scale) (asym, MNN's runtime form), in f32.
std::vector<float> mnn_dequant_direct(const MnnInt4Weight& m) {
  const int64_t K = m.Ci * m.Kh * m.Kw, bk = K / m.blocks_per_channel;
  std::vector<float> w(static_cast<size_t>(m.Co * K));
  for (int64_t oc = 0; oc < m.Co; ++oc)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = oc * K + k;
      const int q = (e % 2 == 0 ? m.packed[e / 2] >> 4 : m.packed[e / 2] & 0xF) - 8;
      const int64_t i = oc * m.blocks_per_channel + k / bk;
      const float scale = m.asymmetric ? m.alpha[2 * i + 1] : m.alpha[i];
      const float prod = float(q) * scale;
      w[e] = m.asymmetric ? prod + (m.alpha[2 * i] + 8.0f * scale) : prod;
    }
  return w;
}

TEST(Mnn, Conv2dOnReferenceAndCpuMatchesFloat64DirectConvolution) {
  struct C {
    int64_t Co, Ci, Kh, Kw, nb;
    bool asym;
    Conv2dParams p;
  };
  Conv2dParams strided;
  strided.stride_h = 2, strided.stride_w = 1, strided.pad_h = 1, strided.pad_w = 2;
  strided.dilation_w = 2;
  Conv2dParams nhwc = strided;
  nhwc.layout = Layout::NHWC;
  const int64_t B = 2, H = 9, W = 7;
  uint32_t seed = 40;
  for (const C& c : {C{6, 8, 3, 3, 2, true, strided}, C{5, 3, 3, 3, 3, false, nhwc},
                    C{7, 16, 1, 1, 4, true, Conv2dParams{}}, C{4, 6, 3, 1, 1, false, nhwc}}) {
    SCOPED_TRACE(::testing::Message() << c.Co << "x" << c.Ci << "x" << c.Kh << "x" << c.Kw
                                      << " nb=" << c.nb << " asym=" << c.asym << " nhwc="
                                      << (c.p.layout == Layout::NHWC));
    // MNN bytes -> packed with the reverse packer from the converted weight (the bytes a model
    // file would hold) -> converted again, as a loader would.
    const MnnInt4Weight m0 = random_mnn(c.Co, c.Ci, c.Kh, c.Kw, c.nb, c.asym, ++seed);
    const MnnInt4Weight m = mnn_int4_pack(mnn_int4_to_conv_weight(m0));
    ASSERT_EQ(m.packed, m0.packed);
    const ConvWeight cw = mnn_int4_to_conv_weight(m);
    const std::vector<float> wd = mnn_dequant_direct(m);

    int64_t Ho = 0, Wo = 0;
    conv2d_output_size(H, W, c.Kh, c.Kw, c.p, &Ho, &Wo);
    const bool nchw = c.p.layout == Layout::NCHW;
    std::mt19937 rng(seed * 7);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(B * c.Ci * H * W));
    for (float& v : x) v = nd(rng);
    auto xi = [&](int64_t b, int64_t ci, int64_t h, int64_t w) {
      return nchw ? ((b * c.Ci + ci) * H + h) * W + w : ((b * H + h) * W + w) * c.Ci + ci;
    };
    auto yi = [&](int64_t b, int64_t co, int64_t h, int64_t w) {
      return nchw ? ((b * c.Co + co) * Ho + h) * Wo + w : ((b * Ho + h) * Wo + w) * c.Co + co;
    };
    // float64 direct convolution with the dequantized weights ([Co][Ci][Kh][Kw]).
    std::vector<double> ref(static_cast<size_t>(B * c.Co * Ho * Wo), 0.0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t co = 0; co < c.Co; ++co)
        for (int64_t oh = 0; oh < Ho; ++oh)
          for (int64_t ow = 0; ow < Wo; ++ow) {
            double acc = 0;
            for (int64_t ci = 0; ci < c.Ci; ++ci)
              for (int64_t kh = 0; kh < c.Kh; ++kh)
                for (int64_t kw = 0; kw < c.Kw; ++kw) {
                  const int64_t h = oh * c.p.stride_h - c.p.pad_h + kh * c.p.dilation_h;
                  const int64_t w = ow * c.p.stride_w - c.p.pad_w + kw * c.p.dilation_w;
                  if (h < 0 || h >= H || w < 0 || w >= W) continue;
                  acc += double(x[xi(b, ci, h, w)]) *
                         double(wd[((co * c.Ci + ci) * c.Kh + kh) * c.Kw + kw]);
                }
            ref[yi(b, co, oh, ow)] = acc;
          }
    for (const BackendKind be : {BackendKind::Reference, BackendKind::CPU}) {
      SCOPED_TRACE(backend_name(be));
      PrepareOptions o;
      o.backend = be;
      const PreparedWeight pw = prepare(cw, o);
      std::vector<float> y(ref.size(), std::nanf(""));
      const TensorView xv = nchw ? TensorView(x.data(), DType::F32, {B, c.Ci, H, W})
                                 : TensorView(x.data(), DType::F32, {B, H, W, c.Ci});
      const TensorView yv = nchw ? TensorView(y.data(), DType::F32, {B, c.Co, Ho, Wo})
                                 : TensorView(y.data(), DType::F32, {B, Ho, Wo, c.Co});
      conv2d(xv, pw, yv, c.p);
      double num = 0, den = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << i;
        num += (y[i] - ref[i]) * (y[i] - ref[i]);
        den += ref[i] * ref[i];
      }
      EXPECT_LE(std::sqrt(num / den), be == BackendKind::Reference ? 1e-7 : 1e-5);
    }
  }
}

}  // namespace
