// AVX2 native kernels: lanes along K as in the AVX-512 file, 32 codes per ymm. Without VNNI the
// u8 x s8 products go through vpmaddubsw, whose 16-bit pair sums saturate above 32767: codes
// below 128 (every type with bias < 128: at most 63 * 127 * 2) are safe as they are; the
// bias-128 types (Q8_0, IQ4_NL, IQ4_XS) are turned back into signed codes and multiplied with
// the sign trick (|q| x sign(qx, q), at most 128 * 127 * 2), exactly as ggml's AVX2 vec_dot.
#include <immintrin.h>

#include "cpu/ggml/panel_decode.hpp"

namespace mixq::cpu::ggml {

namespace {

inline float hsum8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

template <int MR, bool Signed>
inline void dot_i8_rows(const I8DotArgs& a, int r, int m0) {
  const uint8_t* u = a.u + r * a.ldu;
  const float* s16 = a.s16 + r * (a.ldu / 16);
  const __m256i spread = _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0);
  const int64_t q4 = a.ldq / 4;
  const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < a.kc; k += 32) {
    __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u + k));
    __m256i wabs = w;
    if (Signed) {
      w = _mm256_xor_si256(w, flip);  // u - 128 as s8
      wabs = _mm256_sign_epi8(w, w);
    }
    const __m256 s = _mm256_permutevar8x32_ps(
        _mm256_castps128_ps256(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(s16 + k / 16)))),
        spread);
    for (int i = 0; i < MR; ++i) {
      const int64_t m = m0 + i;
      __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + m * a.ldq + k));
      if (Signed) x = _mm256_sign_epi8(x, w);
      __m256i d = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, x), ones);
      if (!Signed)
        d = _mm256_add_epi32(d, _mm256_loadu_si256(
                                    reinterpret_cast<const __m256i*>(a.binit + m * q4 + k / 4)));
      const __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(d), _mm256_loadu_ps(a.dxl + m * q4 + k / 4));
      acc[i] = _mm256_fmadd_ps(f, s, acc[i]);
    }
  }
  if (a.has_min) {
    const float* o = a.o16 + r * (a.ldu / 16);
    for (int64_t j = 0; j < a.kc / 16; j += 4) {
      const __m128 ov = _mm_loadu_ps(o + j);
      for (int i = 0; i < MR; ++i) {
        const __m128 p = _mm_mul_ps(ov, _mm_loadu_ps(a.xs16 + (m0 + i) * (a.ldq / 16 + 16) + j));
        acc[i] = _mm256_add_ps(acc[i], _mm256_castps128_ps256(p));
      }
    }
  }
  for (int i = 0; i < MR; ++i) a.c[(m0 + i) * a.ldc + r] += hsum8(acc[i]);
}

template <bool Signed>
void dot_i8_all(const I8DotArgs& a) {
  for (int r = 0; r < a.wrows; ++r) {
    int m = 0;
    for (; m + 4 <= a.mrows; m += 4) dot_i8_rows<4, Signed>(a, r, m);
    switch (a.mrows - m) {
      case 3: dot_i8_rows<3, Signed>(a, r, m); break;
      case 2: dot_i8_rows<2, Signed>(a, r, m); break;
      case 1: dot_i8_rows<1, Signed>(a, r, m); break;
      default: break;
    }
  }
}

void dot_i8_avx2(const I8DotArgs& a) {
  if (a.bias == 128) dot_i8_all<true>(a); else dot_i8_all<false>(a);
}

template <int MR>
inline void dot_f32_rows(const F32DotArgs& a, int r, int m0) {
  const float* w = a.w + r * a.ldw;
  __m256 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < a.kc; k += 8) {
    const __m256 wv = _mm256_loadu_ps(w + k);
    for (int i = 0; i < MR; ++i)
      acc[i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(a.x + (m0 + i) * a.ldx + k), acc[i]);
  }
  for (int i = 0; i < MR; ++i) a.c[(m0 + i) * a.ldc + r] += hsum8(acc[i]);
}

void dot_f32_avx2(const F32DotArgs& a) {
  for (int r = 0; r < a.wrows; ++r) {
    int m = 0;
    for (; m + 4 <= a.mrows; m += 4) dot_f32_rows<4>(a, r, m);
    switch (a.mrows - m) {
      case 3: dot_f32_rows<3>(a, r, m); break;
      case 2: dot_f32_rows<2>(a, r, m); break;
      case 1: dot_f32_rows<1>(a, r, m); break;
      default: break;
    }
  }
}

const NativeKernels kAvx2 = {"avx2", decode_i8_any, decode_f32_any, decode_f32_t_any,
                             dot_i8_avx2, dot_f32_avx2};

}  // namespace

const NativeKernels* native_avx2_kernels() { return &kAvx2; }

}  // namespace mixq::cpu::ggml
