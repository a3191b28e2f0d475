// Plain C++ access to one element / sub-block of a native record (native_format.hpp): the
// scalar kernel set, and the reference the SIMD sets are tested against through the public API.
// Internal linkage: compiled into the scalar kernel file only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu/ggml/native_format.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cpu::ggml {
namespace {

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// The unsigned code u of element e (0 .. qk) of row r.
inline int record_code(const Format& f, const uint8_t* rec, int r, int e) {
  int u;
  if (f.lb == 8) {
    u = rec[(e / 4) * 64 + r * 4 + e % 4];
  } else if (f.lb == 4) {
    const int t = e % 8;
    u = (rec[(e / 8) * 64 + r * 4 + t % 4] >> (t < 4 ? 0 : 4)) & 15;
  } else {
    const int t = e % 16;
    u = (rec[(e / 16) * 64 + r * 4 + t % 4] >> (2 * (t / 4))) & 3;
  }
  const uint8_t* hi = rec + f.off_hi();
  if (f.hb == 1) {
    const int t = e % 32;
    u |= ((hi[(e / 32) * 64 + r * 4 + t % 4] >> (t / 4)) & 1) << f.lb;
  } else if (f.hb == 2) {
    const int t = e % 16;
    u |= ((hi[(e / 16) * 64 + r * 4 + t % 4] >> (2 * (t / 4))) & 3) << f.lb;
  }
  return f.iq4 ? kIq4Biased[u] : u;
}

// Integer scale and min of sub-block j of row r (1 and 0 for the types with one f16 scale).
inline void record_int_scale(const Format& f, const uint8_t* rec, int r, int j, int* sc, int* mn) {
  const uint8_t* s = rec + f.off_sc();
  *sc = 1;
  *mn = 0;
  switch (f.sk) {
    case ScaleKind::K4: *sc = s[j * 16 + r]; *mn = s[(f.n_sub() + j) * 16 + r]; break;
    case ScaleKind::Q2K: *sc = s[j * 16 + r] & 15; *mn = s[j * 16 + r] >> 4; break;
    case ScaleKind::Signed8: *sc = static_cast<int8_t>(s[j * 16 + r]); break;
    case ScaleKind::Q3K:
      *sc = (((s[(j / 2) * 16 + r] >> (4 * (j % 2))) & 15) |
             (((s[(8 + j / 4) * 16 + r] >> (2 * (j % 4))) & 3) << 4)) - 32;
      break;
    default: break;
  }
}

// ggml's f32 scale s and offset o of sub-block j of row r (w = s * float(u - bias) + o).
inline void record_exact_scale(const Format& f, const uint8_t* rec, int r, int j, float* s,
                               float* o) {
  const float d = f16_at(rec + f.off_d() + 2 * r);
  const float dm = f.has_dm() ? f16_at(rec + f.off_dm() + 2 * r) : 0.f;
  int sc, mn;
  record_int_scale(f, rec, r, j, &sc, &mn);
  switch (f.sk) {
    case ScaleKind::Single: *s = d; *o = 0.f; break;
    case ScaleKind::Affine: *s = d; *o = dm; break;
    case ScaleKind::K4: case ScaleKind::Q2K:
      *s = d * static_cast<float>(sc);
      *o = -(dm * static_cast<float>(mn));
      break;
    default: *s = d * static_cast<float>(sc); *o = 0.f; break;
  }
}

// ggml's quantize_row_q8_0 arithmetic per 32, then per sub-block of `sub`: dx, -bias * sum q,
// and the f32 sum of x. The SIMD sets reproduce q and dxs bit for bit.
inline void quantize_row_ref(const float* x, int64_t K, int sub, int bias, int8_t* q, float* dxs,
                             int32_t* corr, float* xs) {
  for (int64_t b = 0; b < K; b += 32) {
    float amax = 0.f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    const float d = amax / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    for (int i = 0; i < 32; ++i) {
      const float v = std::round(x[b + i] * id);
      q[b + i] = static_cast<int8_t>(std::min(127.f, std::max(-127.f, v)));
    }
    for (int h = 0; h < 32 / sub; ++h) {
      const int64_t j = (b + h * sub) / sub;
      int32_t sq = 0;
      float sx = 0.f;
      for (int i = 0; i < sub; ++i) {
        sq += q[b + h * sub + i];
        sx += x[b + h * sub + i];
      }
      dxs[j] = d;
      corr[j] = -bias * sq;
      xs[j] = sx;
    }
  }
}

}  // namespace
}  // namespace mixq::cpu::ggml
