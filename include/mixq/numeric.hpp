// Scalar conversions between f32 and the 16- and 8-bit float formats, usable on host and device.
//
// Rounding: f32 -> f16, bf16 and e4m3 round to nearest, ties to even (IEEE default).
// f16: overflow becomes +-inf (IEEE), NaN stays NaN (quiet, 0x7E00 with sign).
// bf16: the upper 16 bits of f32 after RNE; NaN stays NaN (quiet).
// e4m3 (float8_e4m3fn): SATURATING: finite values beyond +-448 clamp to +-448 (0x7E / 0xFE), and
// +-inf also clamps to +-448 (the format has no infinity; DeepSeek-style quantizers clamp to
// +-448 before the cast). NaN maps to 0x7F. Values below half the smallest subnormal (2^-10) go
// to signed zero.
// Decoding is exact for all three.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MIXQ_HD __host__ __device__ __forceinline__
#else
#define MIXQ_HD inline
#endif

namespace mixq {

MIXQ_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

MIXQ_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

MIXQ_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0) {
    // zero or subnormal: man * 2^-24, exact in f32
    float v = (float)man * 5.9604644775390625e-08f;
    return bits_f32(f32_bits(v) | sign);
  }
  if (exp == 31) return bits_f32(sign | 0x7F800000u | (man << 13));
  return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

MIXQ_HD uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);  // NaN
  if (abs >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  // >= 65520 rounds to inf
  if (abs < 0x38800000u) {
    // result is subnormal or zero: value = abs * 2^24 in units of the smallest subnormal
    // Add 0.5-ulp-even via float arithmetic on the magnitude (exact because of the range).
    const float a = bits_f32(abs);
    // a * 2^24 in [0, 1024): round half to even to an integer
    float scaled = a * 16777216.0f;
    uint32_t i = (uint32_t)scaled;
    float frac = scaled - (float)i;
    if (frac > 0.5f || (frac == 0.5f && (i & 1u))) ++i;
    return (uint16_t)(sign | i);  // i == 1024 correctly becomes the smallest normal
  }
  // normal: rebias exponent, round mantissa from 23 to 10 bits (RNE)
  uint32_t r = abs - 0x38000000u;  // exponent bias 127 -> 15
  const uint32_t lsb = (r >> 13) & 1u;
  r += 0xFFFu + lsb;
  return (uint16_t)(sign | (r >> 13));
}

MIXQ_HD float bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

MIXQ_HD uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);  // quiet NaN
  const uint32_t lsb = (u >> 16) & 1u;
  return (uint16_t)((u + 0x7FFFu + lsb) >> 16);
}

MIXQ_HD float e4m3_to_f32(uint8_t b) {
  const uint32_t sign = (uint32_t)(b & 0x80u) << 24;
  const uint32_t exp = (b >> 3) & 0xFu;
  const uint32_t man = b & 0x7u;
  if (exp == 0xF && man == 0x7) return bits_f32(sign | 0x7FC00000u);  // NaN
  if (exp == 0) {
    float v = (float)man * 0.001953125f;  // man/8 * 2^-6
    return bits_f32(f32_bits(v) | sign);
  }
  return bits_f32(sign | ((exp + 120) << 23) | (man << 20));
}

MIXQ_HD uint8_t f32_to_e4m3(float f) {
  const uint32_t u = f32_bits(f);
  const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return 0x7F;                // NaN
  if (abs >= 0x43E00000u) return (uint8_t)(sign | 0x7E);  // >= 448 (and inf): saturate
  if (abs < 0x3C800000u) {
    // below 2^-6: subnormal range, step 2^-9. Round |f| * 2^9 half to even.
    float scaled = bits_f32(abs) * 512.0f;
    uint32_t i = (uint32_t)scaled;
    float frac = scaled - (float)i;
    if (frac > 0.5f || (frac == 0.5f && (i & 1u))) ++i;
    return (uint8_t)(sign | i);  // i == 8 is the smallest normal 0x08
  }
  // normal: exponent bias 127 -> 7, mantissa 23 -> 3 bits, RNE
  uint32_t r = abs - (120u << 23);
  const uint32_t lsb = (r >> 20) & 1u;
  r += 0x7FFFFu + lsb;
  uint32_t out = r >> 20;
  if (out > 0x7E) out = 0x7E;  // rounding up past 448 saturates (448 < x < 464 rounds to 448)
  return (uint8_t)(sign | out);
}

// The INT8 activation code of x in a block with offset o and scale s > 0, inv_s = RN(1 / s)
// (quantize_activations_int8_block; every backend computes it bit for bit this way):
//   t = RN(RN(x - o) * inv_s) in f32, clamped to [-128, 127] (NaN -> -128), rounded half to even.
// t is within 3 f32 ulps of the real (x - o) / s, so the code is the nearest integer except when
// the quotient lies within ~2e-5 of a half-integer. The f32 recipe (what GPU quantizers compute
// anyway) replaced a double-precision division whose exact-tie fix-ups held the CUDA quantizer
// to 54-75% of the copy ceiling (docs/cuda-act-quant.md).
// int8_act_quotient is t clamped, before the rounding (the CUDA quantizer rounds it with a magic
// number instead of nearbyintf).
MIXQ_HD float int8_act_quotient(float x, float o, float inv_s) {
  const float t = (x - o) * inv_s;  // two roundings (a product of a difference: no FMA form)
  return fminf(fmaxf(t, -128.0f), 127.0f);  // fmaxf returns -128 for NaN
}
MIXQ_HD int8_t int8_act_code(float x, float o, float inv_s) {
  return static_cast<int8_t>(nearbyintf(int8_act_quotient(x, o, inv_s)));
}

}  // namespace mixq
