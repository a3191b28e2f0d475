// Decoding of one ggml block, in registers / L1, into the form every native kernel consumes:
//   u[e]      unsigned 8-bit code of element e (natural order inside the block),
//   s16[j]    f32 scale of the 16 elements 16j .. 16j+15,
//   o16[j]    f32 offset of those elements (written only by types with mins),
// such that ggml's f32 decode of element e is, bit for bit,
//   w[e] = s16[e/16] * float(u[e] - bias) + o16[e/16]        (multiply, then add: no FMA)
// with the per-type `bias` of GgmlTraits. The scales are the f32 products ggml forms first
// (d * sub_scale, dmin * min), the same values as the canonical form (ggml_canonical.cpp), so
// the exact f32 path reproduces ggml's dequantization; the integer path uses the unsigned codes
// directly as vpdpbusd's u8 operand and folds `bias` into the accumulator's start value.
//
// The header is compiled into each ISA's kernel file (scalar, avx2, avx512) with that file's
// flags, so everything here has internal linkage: each kernel file gets its own copy, vectorized
// for its ISA, and no copy built with AVX-512 can be picked by the linker for another file.
#pragma once

#include <cstdint>
#include <cstring>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "mixq/formats/ggml_blocks.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cpu::ggml {
namespace {

using formats::GgmlType;

// f16 -> f32 is exact either way; F16C does it in one instruction where the file is built with it.
inline float h2f(const uint8_t* p) {
  const uint16_t h = static_cast<uint16_t>(p[0] | (p[1] << 8));
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (ggml get_scale_min_k4).
inline void k4_scale_min(const uint8_t* q, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Splits 16 bytes of nibbles into 32 codes: low nibbles first, then high nibbles (the element
// order of Q4_0 / Q4_1 / IQ4 blocks and of each 32-element half of a Q4_K 64-element group).
inline void split_nibbles16(const uint8_t* qs, uint8_t* lo, uint8_t* hi) {
  for (int i = 0; i < 16; ++i) {
    lo[i] = qs[i] & 0xF;
    hi[i] = qs[i] >> 4;
  }
}

template <GgmlType T>
struct GgmlTraits;

#define MIXQ_GGML_TRAITS(TYPE, QK, BYTES, BIAS, HAS_MIN)             \
  template <>                                                        \
  struct GgmlTraits<GgmlType::TYPE> {                                \
    static constexpr int qk = QK, block_bytes = BYTES, bias = BIAS;  \
    static constexpr bool has_min = HAS_MIN;                         \
  };
MIXQ_GGML_TRAITS(Q4_0, 32, 18, 8, false)
MIXQ_GGML_TRAITS(Q4_1, 32, 20, 0, true)
MIXQ_GGML_TRAITS(Q5_0, 32, 22, 16, false)
MIXQ_GGML_TRAITS(Q5_1, 32, 24, 0, true)
MIXQ_GGML_TRAITS(Q8_0, 32, 34, 128, false)
MIXQ_GGML_TRAITS(IQ4_NL, 32, 18, 128, false)
MIXQ_GGML_TRAITS(Q2_K, 256, 84, 0, true)
MIXQ_GGML_TRAITS(Q3_K, 256, 110, 4, false)
MIXQ_GGML_TRAITS(Q4_K, 256, 144, 0, true)
MIXQ_GGML_TRAITS(Q5_K, 256, 176, 0, true)
MIXQ_GGML_TRAITS(Q6_K, 256, 210, 32, false)
MIXQ_GGML_TRAITS(IQ4_XS, 256, 136, 128, false)
#undef MIXQ_GGML_TRAITS

// IQ4 codebook shifted by +128 (unsigned operand for vpdpbusd, bias 128).
constexpr uint8_t kIq4Biased[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                    129, 141, 153, 166, 181, 197, 217, 241};

template <GgmlType T>
inline void decode_block(const uint8_t* b, uint8_t* u, float* s16, float* o16);

template <>
inline void decode_block<GgmlType::Q4_0>(const uint8_t* b, uint8_t* u, float* s16, float*) {
  split_nibbles16(b + 2, u, u + 16);
  s16[0] = s16[1] = h2f(b);
}

template <>
inline void decode_block<GgmlType::Q4_1>(const uint8_t* b, uint8_t* u, float* s16, float* o16) {
  split_nibbles16(b + 4, u, u + 16);
  s16[0] = s16[1] = h2f(b);
  o16[0] = o16[1] = h2f(b + 2);
}

inline void q5_codes(const uint8_t* qh_p, const uint8_t* qs, uint8_t* u) {
  uint32_t qh;
  std::memcpy(&qh, qh_p, 4);
  for (int j = 0; j < 16; ++j) {
    u[j] = static_cast<uint8_t>((qs[j] & 0xF) | (((qh >> j) & 1) << 4));
    u[j + 16] = static_cast<uint8_t>((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
  }
}

template <>
inline void decode_block<GgmlType::Q5_0>(const uint8_t* b, uint8_t* u, float* s16, float*) {
  q5_codes(b + 2, b + 6, u);
  s16[0] = s16[1] = h2f(b);
}

template <>
inline void decode_block<GgmlType::Q5_1>(const uint8_t* b, uint8_t* u, float* s16, float* o16) {
  q5_codes(b + 4, b + 8, u);
  s16[0] = s16[1] = h2f(b);
  o16[0] = o16[1] = h2f(b + 2);
}

template <>
inline void decode_block<GgmlType::Q8_0>(const uint8_t* b, uint8_t* u, float* s16, float*) {
  for (int e = 0; e < 32; ++e) u[e] = static_cast<uint8_t>(b[2 + e] ^ 0x80);  // q + 128
  s16[0] = s16[1] = h2f(b);
}

template <>
inline void decode_block<GgmlType::IQ4_NL>(const uint8_t* b, uint8_t* u, float* s16, float*) {
  for (int i = 0; i < 16; ++i) {
    u[i] = kIq4Biased[b[2 + i] & 0xF];
    u[i + 16] = kIq4Biased[b[2 + i] >> 4];
  }
  s16[0] = s16[1] = h2f(b);
}

template <>
inline void decode_block<GgmlType::Q2_K>(const uint8_t* b, uint8_t* u, float* s16, float* o16) {
  const uint8_t* sc = b;
  const uint8_t* qs = b + 16;
  const float d = h2f(b + 80), dmin = h2f(b + 82);
  for (int j = 0; j < 16; ++j) {
    s16[j] = d * static_cast<float>(sc[j] & 0xF);
    o16[j] = -(dmin * static_cast<float>(sc[j] >> 4));
  }
  for (int h = 0; h < 2; ++h)
    for (int p = 0; p < 4; ++p)
      for (int l = 0; l < 32; ++l) u[128 * h + 32 * p + l] = (qs[32 * h + l] >> (2 * p)) & 3;
}

template <>
inline void decode_block<GgmlType::Q3_K>(const uint8_t* b, uint8_t* u, float* s16, float*) {
  const uint8_t* hm = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float d = h2f(b + 108);
  for (int j = 0; j < 16; ++j) {
    const int low4 = j < 8 ? (sc[j] & 0xF) : (sc[j - 8] >> 4);
    const int high2 = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    s16[j] = d * static_cast<float>((low4 | (high2 << 4)) - 32);
  }
  // value = low2 - (hbit ? 0 : 4) = u - 4 with u = low2 | hbit << 2.
  for (int h = 0; h < 2; ++h)
    for (int p = 0; p < 4; ++p)
      for (int l = 0; l < 32; ++l) {
        const int e = 128 * h + 32 * p + l;
        u[e] = static_cast<uint8_t>(((qs[32 * h + l] >> (2 * p)) & 3) |
                                    (((hm[l] >> (4 * h + p)) & 1) << 2));
      }
}

inline void k4_scales(const uint8_t* b, float* s16, float* o16) {
  const float d = h2f(b), dmin = h2f(b + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    k4_scale_min(b + 4, j, &sc, &mn);
    s16[2 * j] = s16[2 * j + 1] = d * static_cast<float>(sc);
    o16[2 * j] = o16[2 * j + 1] = -(dmin * static_cast<float>(mn));
  }
}

template <>
inline void decode_block<GgmlType::Q4_K>(const uint8_t* b, uint8_t* u, float* s16, float* o16) {
  k4_scales(b, s16, o16);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const uint8_t q = b[16 + 32 * c + l];
      u[64 * c + l] = q & 0xF;
      u[64 * c + 32 + l] = q >> 4;
    }
}

template <>
inline void decode_block<GgmlType::Q5_K>(const uint8_t* b, uint8_t* u, float* s16, float* o16) {
  k4_scales(b, s16, o16);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const uint8_t q = qs[32 * c + l], h = qh[l];
      u[64 * c + l] = static_cast<uint8_t>((q & 0xF) | (((h >> (2 * c)) & 1) << 4));
      u[64 * c + 32 + l] = static_cast<uint8_t>((q >> 4) | (((h >> (2 * c + 1)) & 1) << 4));
    }
}

template <>
inline void decode_block<GgmlType::Q6_K>(const uint8_t* b, uint8_t* u, float* s16, float*) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const float d = h2f(b + 208);
  for (int j = 0; j < 16; ++j) {
    s16[j] = d * static_cast<float>(static_cast<int8_t>(b[192 + j]));
  }
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t a = ql[64 * h + l], c = ql[64 * h + 32 + l], hb = qh[32 * h + l];
      uint8_t* o = u + 128 * h + l;
      o[0] = static_cast<uint8_t>((a & 0xF) | ((hb & 3) << 4));
      o[32] = static_cast<uint8_t>((c & 0xF) | (((hb >> 2) & 3) << 4));
      o[64] = static_cast<uint8_t>((a >> 4) | (((hb >> 4) & 3) << 4));
      o[96] = static_cast<uint8_t>((c >> 4) | (((hb >> 6) & 3) << 4));
    }
}

template <>
inline void decode_block<GgmlType::IQ4_XS>(const uint8_t* b, uint8_t* u, float* s16, float*) {
  const float d = h2f(b);
  const uint16_t sh = static_cast<uint16_t>(b[2] | (b[3] << 8));
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
    s16[2 * ib] = s16[2 * ib + 1] = d * static_cast<float>(ls - 32);
  }
  for (int ib = 0; ib < 8; ++ib)
    for (int i = 0; i < 16; ++i) {
      const uint8_t q = b[8 + 16 * ib + i];
      u[32 * ib + i] = kIq4Biased[q & 0xF];
      u[32 * ib + 16 + i] = kIq4Biased[q >> 4];
    }
}

// Calls f.template operator()<T>() for the runtime type (one instantiation per type).
template <typename F>
inline void dispatch_type(GgmlType t, F&& f) {
  switch (t) {
    case GgmlType::Q4_0: f.template operator()<GgmlType::Q4_0>(); break;
    case GgmlType::Q4_1: f.template operator()<GgmlType::Q4_1>(); break;
    case GgmlType::Q5_0: f.template operator()<GgmlType::Q5_0>(); break;
    case GgmlType::Q5_1: f.template operator()<GgmlType::Q5_1>(); break;
    case GgmlType::Q8_0: f.template operator()<GgmlType::Q8_0>(); break;
    case GgmlType::IQ4_NL: f.template operator()<GgmlType::IQ4_NL>(); break;
    case GgmlType::Q2_K: f.template operator()<GgmlType::Q2_K>(); break;
    case GgmlType::Q3_K: f.template operator()<GgmlType::Q3_K>(); break;
    case GgmlType::Q4_K: f.template operator()<GgmlType::Q4_K>(); break;
    case GgmlType::Q5_K: f.template operator()<GgmlType::Q5_K>(); break;
    case GgmlType::Q6_K: f.template operator()<GgmlType::Q6_K>(); break;
    case GgmlType::IQ4_XS: f.template operator()<GgmlType::IQ4_XS>(); break;
    default: break;
  }
}

}  // namespace
}  // namespace mixq::cpu::ggml
