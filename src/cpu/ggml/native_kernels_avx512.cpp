// AVX-512 VNNI native kernels. Lanes run along K: one zmm holds 64 consecutive codes of one
// weight row (16 dword lanes of 4 codes), so the raw ggml element order needs no transposition
// and vpdpbusd (u8 codes x s8 activations, 64 MACs) consumes the decoded codes as they are.
// The per-lane scale product is one cvtdq2ps + mul + fma per 64 codes per activation row; one
// horizontal sum per (weight row, activation row, chunk) finishes the dot.
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 avx512fintrin.h false positive

#include "cpu/ggml/panel_decode.hpp"

namespace mixq::cpu::ggml {

namespace {

// MR activation rows against one decoded weight row: the codes and lane scales are loaded once
// per 64 k and reused by every row of the tile.
template <int MR>
inline void dot_i8_rows(const I8DotArgs& a, int r, int m0) {
  const uint8_t* u = a.u + r * a.ldu;
  const float* s16 = a.s16 + r * (a.ldu / 16);
  // Lane l of 64 codes takes s16[l / 4]: four scales spread by one permute, no per-lane array.
  const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const int64_t q4 = a.ldq / 4;
  __m512 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < a.kc; k += 64) {
    const __m512i w = _mm512_loadu_si512(u + k);
    const __m512 s = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_loadu_ps(s16 + k / 16)));
    for (int i = 0; i < MR; ++i) {
      const int64_t m = m0 + i;
      const __m512i d = _mm512_dpbusd_epi32(_mm512_loadu_si512(a.binit + m * q4 + k / 4), w,
                                            _mm512_loadu_si512(a.q + m * a.ldq + k));
      const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(d), _mm512_loadu_ps(a.dxl + m * q4 + k / 4));
      acc[i] = _mm512_fmadd_ps(f, s, acc[i]);
    }
  }
  if (a.has_min) {
    const float* o = a.o16 + r * (a.ldu / 16);
    const int64_t nj = a.kc / 16;
    for (int64_t j = 0; j < nj; j += 16) {
      const __mmask16 mk = nj - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (nj - j)) - 1);
      const __m512 ov = _mm512_maskz_loadu_ps(mk, o + j);
      for (int i = 0; i < MR; ++i)
        acc[i] = _mm512_fmadd_ps(
            ov, _mm512_maskz_loadu_ps(mk, a.xs16 + (m0 + i) * (a.ldq / 16 + 16) + j), acc[i]);
    }
  }
  for (int i = 0; i < MR; ++i) a.c[(m0 + i) * a.ldc + r] += _mm512_reduce_add_ps(acc[i]);
}

void dot_i8_avx512(const I8DotArgs& a) {
  for (int r = 0; r < a.wrows; ++r) {
    int m = 0;
    for (; m + 4 <= a.mrows; m += 4) dot_i8_rows<4>(a, r, m);
    switch (a.mrows - m) {
      case 3: dot_i8_rows<3>(a, r, m); break;
      case 2: dot_i8_rows<2>(a, r, m); break;
      case 1: dot_i8_rows<1>(a, r, m); break;
      default: break;
    }
  }
}

template <int MR>
inline void dot_f32_rows(const F32DotArgs& a, int r, int m0) {
  const float* w = a.w + r * a.ldw;
  __m512 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < a.kc; k += 16) {
    const __m512 wv = _mm512_loadu_ps(w + k);
    for (int i = 0; i < MR; ++i)
      acc[i] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(a.x + (m0 + i) * a.ldx + k), acc[i]);
  }
  for (int i = 0; i < MR; ++i) a.c[(m0 + i) * a.ldc + r] += _mm512_reduce_add_ps(acc[i]);
}

void dot_f32_avx512(const F32DotArgs& a) {
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

const NativeKernels kAvx512 = {"avx512", decode_i8_any, decode_f32_any, decode_f32_t_any,
                               dot_i8_avx512, dot_f32_avx512};

}  // namespace

const NativeKernels* native_avx512_kernels() { return &kAvx512; }

}  // namespace mixq::cpu::ggml
