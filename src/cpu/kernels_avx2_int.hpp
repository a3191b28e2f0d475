// The AVX2 integer tile (kernels.hpp, IntTileArgs), written once over its dot-product step and
// included by the two files that compile it: kernels_avx2.cpp (vpmaddubsw + vpmaddwd, any AVX2
// CPU) and kernels_avx2vnni.cpp (AVX-VNNI vpdpbusd, Alder Lake and later). Everything here has
// internal linkage (anonymous namespace): each file gets its own copy compiled with its own ISA
// flags, so the linker can never hand the plain-AVX2 table a function built with AVX-VNNI.
//
// A 16-row panel is two ymm of 8 lanes; each segment runs one half at a time (8 accumulators per
// 8 rows fit the 16 ymm registers) and adds its result into c in memory, which stays in L1.
//
// Exactness: every form recovers the same int32 d = sum_k qx * q per (row, lane, segment) as the
// AVX-512 kernel and applies the same float epilogue in the same order, so results are
// bit-identical across avx512 / avx2vnni / avx2.
//   Dot::kWide8 (VNNI): vpdpbusd takes any u8 x s8 pair exactly (32-bit sums, no 16-bit stage).
//   !kWide8 (vpmaddubsw): the pairwise 16-bit sum saturates past 32767, so the u8 operand is
//   kept to a nibble (15 * 128 * 2 = 3840): 4-bit codes are nibbles already; 8-bit codes (or
//   the biased activations facing Int8 codes) are split into low / high nibbles and recombined
//   as lo + 16 * hi in the exact 32-bit vpmaddwd stage.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "cpu/kernel_dispatch.hpp"
#include "cpu/kernels.hpp"

namespace mixq::cpu {
namespace {  // NOLINT: per-ISA copies on purpose (see above)

constexpr int kAvx2PrefetchBytes = 2048;

inline __m256i bcast4_avx2(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// acc + per dword lane sum of four u8 * s8 products of (u, s) where the u8 operand is < 16.
template <class Dot>
inline __m256i dot_nibble(__m256i acc, __m256i u, __m256i s) {
  return Dot::dot(acc, u, s);
}

// acc + per dword lane sum of four u8 * s8 products for any u8 operand (exact).
template <class Dot>
inline __m256i dot_byte(__m256i acc, __m256i u, __m256i s) {
  if constexpr (Dot::kWide8) {
    return Dot::dot(acc, u, s);
  } else {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(u, low4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(u, 4), low4);
    const __m256i plo = _mm256_maddubs_epi16(lo, s), phi = _mm256_maddubs_epi16(hi, s);
    const __m256i t = _mm256_add_epi32(_mm256_madd_epi16(plo, _mm256_set1_epi16(1)),
                                       _mm256_madd_epi16(phi, _mm256_set1_epi16(16)));
    return _mm256_add_epi32(acc, t);
  }
}

template <int MR, CodeKind CK, bool INT_MODE, class Dot>
void int_tile_t(const IntTileArgs& a) {
  const PackedWeight& w = *a.w;
  const int64_t ns = w.n_segs(), gb = w.group_bytes;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const uint8_t* pc = w.panel_codes(a.panel);
  if (!a.accumulate)
    for (int m = 0; m < MR; ++m)
      std::memset(static_cast<char*>(a.c) + m * a.ldc * 4, 0, kLanes * 4);
  // Independent accumulator chains for one or two rows (vpdpbusd latency 5, throughput 2).
  constexpr int NC = MR == 1 ? 4 : MR == 2 ? 2 : 1;
  for (int64_t s = a.seg0; s < a.seg1; ++s) {
    const Segment& sg = w.segs[s];
    const uint8_t* xrow[MR];
    for (int m = 0; m < MR; ++m) xrow[m] = a.x + m * a.ldx + sg.kp0;
    const int32_t len = sg.len;
    for (int h = 0; h < 2; ++h) {
      __m256i acc[NC][MR];
      for (int c = 0; c < NC; ++c)
        for (int m = 0; m < MR; ++m) acc[c][m] = _mm256_setzero_si256();
      const uint8_t* cp = pc + sg.kp0 / 8 * gb + 32 * h;
      int q = 0;
      for (int32_t g = 0; g < len; g += 8, cp += gb, ++q) {
        if (h == 0) {  // more weight lines in flight than the hardware streamer keeps alone
          _mm_prefetch(reinterpret_cast<const char*>(cp) + kAvx2PrefetchBytes, _MM_HINT_T0);
          if constexpr (CK != CodeKind::Int4)
            _mm_prefetch(reinterpret_cast<const char*>(cp) + kAvx2PrefetchBytes + 64, _MM_HINT_T0);
        }
        const int c0 = (2 * q) % NC, c1 = (2 * q + 1) % NC;
        if constexpr (CK == CodeKind::Int4) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp));
          const __m256i lo = _mm256_and_si256(v, low4);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          for (int m = 0; m < MR; ++m) {
            acc[c0][m] = dot_nibble<Dot>(acc[c0][m], lo, bcast4_avx2(xrow[m] + g));
            acc[c1][m] = dot_nibble<Dot>(acc[c1][m], hi, bcast4_avx2(xrow[m] + g + 4));
          }
        } else {
          const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp));
          const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 64));
          for (int m = 0; m < MR; ++m) {
            const __m256i x0 = bcast4_avx2(xrow[m] + g), x1 = bcast4_avx2(xrow[m] + g + 4);
            if constexpr (CK == CodeKind::Uint8) {  // u8 codes x s8 activations
              acc[c0][m] = dot_byte<Dot>(acc[c0][m], v0, x0);
              acc[c1][m] = dot_byte<Dot>(acc[c1][m], v1, x1);
            } else {  // s8 codes x activations biased by +128 (u8)
              acc[c0][m] = dot_byte<Dot>(acc[c0][m], x0, v0);
              acc[c1][m] = dot_byte<Dot>(acc[c1][m], x1, v1);
            }
          }
        }
      }
      for (int c = 1; c < NC; ++c)
        for (int m = 0; m < MR; ++m) acc[0][m] = _mm256_add_epi32(acc[0][m], acc[c][m]);
      const size_t si = static_cast<size_t>((a.panel * ns + s) * kLanes + 8 * h);
      const __m256i qsum = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&w.qsum[si]));
      const __m256i corr_w = _mm256_slli_epi32(qsum, 7);  // 128 * sum q (signed codes)
      __m256 sw = _mm256_setzero_ps(), swq = sw, ow = sw;
      if constexpr (!INT_MODE) {
        sw = _mm256_loadu_ps(&w.scale[si]);
        swq = _mm256_mul_ps(sw, _mm256_cvtepi32_ps(qsum));
        if (w.has_offset) ow = _mm256_loadu_ps(&w.offset[si]);
      }
      for (int m = 0; m < MR; ++m) {
        __m256i d;
        if constexpr (CK == CodeKind::Int8) d = _mm256_sub_epi32(acc[0][m], corr_w);
        else if constexpr (CK == CodeKind::Int4)
          d = _mm256_sub_epi32(acc[0][m],
                               _mm256_set1_epi32(w.code_shift * a.xs[m * a.ldxs + s].sum_qx));
        else d = acc[0][m];
        if constexpr (INT_MODE) {
          int32_t* c = static_cast<int32_t*>(a.c) + m * a.ldc + 8 * h;
          __m256i* cv = reinterpret_cast<__m256i*>(c);
          _mm256_storeu_si256(cv, _mm256_add_epi32(_mm256_loadu_si256(cv), d));
        } else {
          // The AVX-512 kernel's epilogue, operation for operation (bit-identical results).
          const ActSegment& as = a.xs[m * a.ldxs + s];
          float* c = static_cast<float*>(a.c) + m * a.ldc + 8 * h;
          __m256 t = _mm256_loadu_ps(c);
          t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(sw, _mm256_set1_ps(as.sx)), t);
          t = _mm256_fmadd_ps(swq, _mm256_set1_ps(as.ox), t);
          t = _mm256_fmadd_ps(ow, _mm256_set1_ps(as.ow_coef), t);
          _mm256_storeu_ps(c, t);
        }
      }
    }
  }
}

template <class Dot>
void int_tile_avx2_t(const IntTileArgs& a) {
  dispatch_int_tile(a, [](auto ck, auto rows, auto int_mode, const IntTileArgs& b) {
    int_tile_t<decltype(rows)::value, decltype(ck)::value, decltype(int_mode)::value, Dot>(b);
  });
}

}  // namespace
}  // namespace mixq::cpu
