#include <gtest/gtest.h>

#include <cmath>

#include "mixq/numeric.hpp"

using namespace mixq;

TEST(Numeric, F16RoundTripAllBitPatterns) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << "h=" << h;
  }
}

TEST(Numeric, F16RoundsHalfToEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even -> 1.0 (0x3C00)
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even) -> 0x3C02
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // rounds to inf
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);
}

TEST(Numeric, BF16RoundTripAndRounding) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16_to_f32(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), b);
  }
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie -> even
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
}

TEST(Numeric, E4M3DecodeExamplesFromFormatsMd) {
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0x40), 2.0f);
  EXPECT_EQ(e4m3_to_f32(0xC0), -2.0f);
  EXPECT_EQ(e4m3_to_f32(0xB4), -0.75f);
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xFF)));
}

TEST(Numeric, E4M3RoundTripAndSaturation) {
  for (int b = 0; b < 256; ++b) {
    const float f = e4m3_to_f32(static_cast<uint8_t>(b));
    if (std::isnan(f)) continue;
    if (b == 0x80) {  // -0
      EXPECT_EQ(f32_to_e4m3(f), 0x80);
      continue;
    }
    ASSERT_EQ(f32_to_e4m3(f), b) << b;
  }
  EXPECT_EQ(f32_to_e4m3(1000.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(-1000.0f), 0xFE);
  EXPECT_EQ(f32_to_e4m3(INFINITY), 0x7E);
  EXPECT_EQ(f32_to_e4m3(NAN), 0x7F);
  // RNE: 1.0625 is halfway between 1.0 (0x38, even) and 1.125 (0x39) -> 0x38
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);
  EXPECT_EQ(f32_to_e4m3(1.1875f), 0x3A);  // halfway 1.125 / 1.25 -> even 0x3A
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -10)), 0x00);  // half the smallest subnormal: tie -> 0
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.5f, -10)), 0x01);
}

TEST(Numeric, E4M3NearestOverAllFloatsInRange) {
  // Exhaustive over a dense sample: the encoded value is a nearest representable value.
  for (int i = -460000; i <= 460000; i += 7) {
    const float f = i / 1000.0f;
    const float e = e4m3_to_f32(f32_to_e4m3(f));
    const float err = std::fabs(e - std::min(std::fabs(f), 448.0f) * (f < 0 ? -1.f : 1.f));
    // nearest: no representable neighbour is closer
    const uint8_t code = f32_to_e4m3(f);
    for (int d : {-1, 1}) {
      const int nb = (code & 0x7F) + d;
      if (nb < 0 || nb > 0x7E) continue;
      const float other = e4m3_to_f32(static_cast<uint8_t>((code & 0x80) | nb));
      ASSERT_LE(err, std::fabs(other - std::max(-448.f, std::min(448.f, f))) + 0.0f) << f;
    }
  }
}
