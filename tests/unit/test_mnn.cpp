// MNN int4 conv weights (formats.md §7): worked bytes, high-nibble-first order across channels,
// symmetric and asymmetric blocks, reverse packer.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "mixq/formats/mnn.hpp"
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

}  // namespace
