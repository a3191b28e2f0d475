// ggml block types: formats.md §1 worked examples (byte-exact), and the canonical conversion
// against the independent element-wise reference decoder on many random valid blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "formats/gguf/ggml_block_layout.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/ggml_blocks.hpp"
#include "mixq/numeric.hpp"

using namespace mixq;
using namespace mixq::formats;
namespace gd = mixq::formats::detail;

namespace {

std::vector<uint8_t> hex(const char* s) {
  std::vector<uint8_t> out;
  while (*s) {
    while (*s == ' ' || *s == '|') ++s;
    if (!*s) break;
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(s, 2), nullptr, 16)));
    s += 2;
  }
  return out;
}

uint32_t bits(float f) { return f32_bits(f); }

// Random bytes for a block, with every fp16 scale field replaced by a finite value (the canonical
// form keeps scales finite; non-finite ones are rejected, tested separately).
std::vector<uint8_t> random_blocks(GgmlType t, int64_t nblocks, std::mt19937& rng) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(t));
  std::vector<uint8_t> b(static_cast<size_t>(nblocks * info->block_bytes));
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  std::vector<int> f16_fields;
  switch (t) {
    case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS: f16_fields = {0}; break;
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K:
      f16_fields = {0, 2}; break;
    case GgmlType::Q2_K: f16_fields = {80, 82}; break;
    case GgmlType::Q3_K: f16_fields = {108}; break;
    case GgmlType::Q6_K: f16_fields = {208}; break;
    case GgmlType::F16: f16_fields = {0}; break;
    default: break;
  }
  std::uniform_real_distribution<float> mag(-3.f, 3.f);
  for (int64_t i = 0; i < nblocks; ++i)
    for (int off : f16_fields) {
      // random sign, magnitude spanning subnormals to large values
      float v = std::ldexp(1.f + std::abs(mag(rng)) / 3.f, static_cast<int>(rng() % 36) - 24);
      if (rng() & 1) v = -v;
      if (rng() % 17 == 0) v = 0.f;
      gd::store_u16(b.data() + i * info->block_bytes + off, f32_to_f16(v));
    }
  return b;
}

}  // namespace

TEST(GgmlBlocks, Q4_0WorkedExampleEncodeDecode) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = (j - 16) * 0.25f;
  uint8_t y[18];
  ggml_quantize_row(GgmlType::Q4_0, x, y, 32);
  EXPECT_EQ(std::vector<uint8_t>(y, y + 18),
            hex("00 38 | 80 91 91 a2 a2 b3 b3 c4 c4 d5 d5 e6 e6 f7 f7 f8"));
  const float expect[32] = {-4.0f, -3.5f, -3.5f, -3.0f, -3.0f, -2.5f, -2.5f, -2.0f, -2.0f, -1.5f, -1.5f,
                            -1.0f, -1.0f, -0.5f, -0.5f, 0.0f,  0.0f,  0.5f,  0.5f,  1.0f,  1.0f,  1.5f,
                            1.5f,  2.0f,  2.0f,  2.5f,  2.5f,  3.0f,  3.0f,  3.5f,  3.5f,  3.5f};
  QuantizedWeight w = ggml_to_canonical(GgmlType::Q4_0, y, 1, 32, "test");
  w.validate();
  for (int j = 0; j < 32; ++j) EXPECT_EQ(w.dequant(0, j), expect[j]) << j;
  EXPECT_EQ(w.code_type, DType::I4);
  EXPECT_EQ(w.code_int(0, 0), -8);
  EXPECT_EQ(w.code_int(0, 31), 7);
}

TEST(GgmlBlocks, Q5_0WorkedExampleDecode) {
  const auto b = hex("00 30 | 00 00 ff ff | 00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff");
  QuantizedWeight w = ggml_to_canonical(GgmlType::Q5_0, b.data(), 1, 32, "test");
  w.validate();
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(w.dequant(0, j), (j - 16) * 0.125f) << j;
    EXPECT_EQ(w.code_int(0, j), j - 16);
  }
}

TEST(GgmlBlocks, Q8_0WorkedExampleEncode) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 12) * 0.1f;
  uint8_t y[34];
  ggml_quantize_row(GgmlType::Q8_0, x, y, 32);
  EXPECT_EQ(std::vector<uint8_t>(y, y + 34),
            hex("a9 23 b0 b6 bd c4 cb d1 d8 df e5 ec f3 f9 00 07 0d 14 1b 21 28 2f 35 3c 43 4a 50 "
                "57 5e 64 6b 72 78 7f"));
}

TEST(GgmlBlocks, Q3KScalePackingExample) {
  const auto s = hex("50 bf a0 61 f2 13 4f c0 a8 59 ee 16");
  const int expect[16] = {-32, -1, 0, 1, 2, 3, 31, -16, 5, -5, 10, -10, 15, -15, 20, -20};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(gd::q3k_scale(s.data(), i), expect[i]) << i;
}

TEST(GgmlBlocks, KQuantScaleMinPackingExample) {
  const auto s = hex("81 c2 c3 c4 45 86 c7 c8 18 12 0c ef");
  const int sc[8] = {1, 2, 3, 4, 40, 50, 60, 63}, mn[8] = {5, 6, 7, 8, 17, 33, 48, 62};
  for (int j = 0; j < 8; ++j) {
    int a, b;
    gd::kquant_scale_min(s.data(), j, &a, &b);
    EXPECT_EQ(a, sc[j]) << j;
    EXPECT_EQ(b, mn[j]) << j;
  }
}

TEST(GgmlBlocks, Q4KWorkedExampleDecode) {
  auto b = hex("00 3c | 00 38 | 81 c2 c3 c4 45 86 c7 c8 18 12 0c ef");
  b.resize(144, 0x21);
  const float expect[8] = {-1.5f, 1.0f, -0.5f, 4.0f, 31.5f, 83.5f, 36.0f, 95.0f};
  QuantizedWeight w = ggml_to_canonical(GgmlType::Q4_K, b.data(), 1, 256, "test");
  w.validate();
  std::vector<float> ref(256);
  ggml_dequantize_row(GgmlType::Q4_K, b.data(), ref.data(), 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(w.dequant(0, e), expect[e / 32]) << e;
    EXPECT_EQ(ref[e], expect[e / 32]) << e;
  }
}

// Every convertible type: canonical dequant == reference decode, bit for bit, on random blocks
// and odd row counts; the chosen mapping matches docs/formats-notes.md.
TEST(GgmlBlocks, RandomBlocksCanonicalMatchesReference) {
  std::mt19937 rng(1234);
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                            GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                            GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                            GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};
  for (GgmlType t : types) {
    const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(t));
    for (int64_t rows : {1, 3, 7}) {
      const int64_t K = info->block_elems == 1 ? 37 : info->block_elems * 3;
      const int64_t nb = rows * K / info->block_elems;
      auto data = random_blocks(t, nb, rng);
      if (t == GgmlType::F32)  // keep NaN patterns out of the F32 comparison
        for (int64_t i = 0; i < nb; ++i) {
          float v = std::ldexp(static_cast<float>(static_cast<int32_t>(rng())) * 1e-9f, static_cast<int>(rng() % 20) - 10);
          std::memcpy(data.data() + 4 * i, &v, 4);
        }
      QuantizedWeight w = ggml_to_canonical(t, data.data(), rows, K, "test");
      ASSERT_NO_THROW(w.validate()) << info->name;
      std::vector<float> ref(static_cast<size_t>(K));
      for (int64_t n = 0; n < rows; ++n) {
        ggml_dequantize_row(t, data.data() + n * (K / info->block_elems) * info->block_bytes,
                            ref.data(), K);
        for (int64_t k = 0; k < K; ++k) {
          const float got = w.dequant(n, k);
          if (std::isnan(ref[k])) {
            ASSERT_TRUE(std::isnan(got)) << info->name;
            continue;
          }
          ASSERT_EQ(bits(got), bits(ref[k])) << info->name << " row " << n << " k " << k
                                             << ": " << got << " vs " << ref[k];
        }
      }
    }
  }
}

TEST(GgmlBlocks, NonFiniteScaleIsAFormatError) {
  std::vector<uint8_t> b(2 * 144, 0x11);
  gd::store_u16(b.data(), 0x3c00);
  gd::store_u16(b.data() + 2, 0x3c00);
  gd::store_u16(b.data() + 144, 0x7c00);  // +inf d in the second block
  gd::store_u16(b.data() + 146, 0x3c00);
  try {
    ggml_to_canonical(GgmlType::Q4_K, b.data(), 1, 512, "f.gguf: tensor 'w'");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Format);
    EXPECT_NE(std::string(e.what()).find("tensor 'w'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("block 1"), std::string::npos) << e.what();
  }
}

TEST(GgmlBlocks, UnsupportedTypeAndBadRowLength) {
  uint8_t b[292] = {};
  EXPECT_THROW(ggml_to_canonical(GgmlType::Q8_K, b, 1, 256, "t"), Error);
  EXPECT_THROW(ggml_to_canonical(GgmlType::Q4_0, b, 1, 48, "t"), Error);
}

// Q4_K encoder: the codes it picks decode within one code step of the input, scales/mins use the
// 6-bit range, and the decode of its output is exactly what the reference decoder gives.
TEST(GgmlBlocks, Q4KEncoderRoundTrip) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t n = 256 * 8;
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng) * 0.05f + 0.01f;
  std::vector<uint8_t> y(static_cast<size_t>(ggml_row_bytes(GgmlType::Q4_K, n)));
  ggml_quantize_row(GgmlType::Q4_K, x.data(), y.data(), n);
  QuantizedWeight w = ggml_to_canonical(GgmlType::Q4_K, y.data(), 1, n, "t");
  double err2 = 0, sig2 = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double d = double(w.dequant(0, k)) - x[k];
    err2 += d * d;
    sig2 += double(x[k]) * x[k];
    const int64_t j = k / 32;
    // |error| <= one sub-block step (the scale), generously
    EXPECT_LE(std::abs(d), std::abs(double(w.scale(0, j))) * 1.01 + 1e-6) << k;
  }
  EXPECT_LT(std::sqrt(err2 / sig2), 0.12);  // 4-bit: ~ 1/15 of the range
  // deterministic: same input, same bytes
  std::vector<uint8_t> y2(y.size());
  ggml_quantize_row(GgmlType::Q4_K, x.data(), y2.data(), n);
  EXPECT_EQ(y, y2);
}

TEST(GgmlBlocks, EncoderRejectsNonFiniteAndBadLength) {
  std::vector<float> x(32, 1.f);
  std::vector<uint8_t> y(34);
  x[5] = NAN;
  EXPECT_THROW(ggml_quantize_row(GgmlType::Q8_0, x.data(), y.data(), 32), Error);
  x[5] = 1.f;
  EXPECT_THROW(ggml_quantize_row(GgmlType::Q8_0, x.data(), y.data(), 31), Error);
  EXPECT_THROW(ggml_quantize_row(GgmlType::Q6_K, x.data(), y.data(), 32), Error);
}
