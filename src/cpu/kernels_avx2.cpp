// AVX2 + FMA + F16C micro-kernels (compiled with exactly those flags, selected at run time from
// cpuid, so the library still loads on any x86-64). The panel layout is the AVX-512 one
// (packed_weight.hpp): one panel of 16 output rows is two ymm of 8 lanes here, and every tile
// runs each segment one half-panel at a time so that 8 rows of accumulators fit the 16 ymm
// registers; per-segment results are added into c in memory (a few lines that stay in L1).
//
// Float path: code k of 8 lanes is brought to the low bits of its dword by one shift and
// masked (4-bit) or sign-extended (8-bit), then converted; AVX2 has no 16-entry vpermps, so the
// 4-bit code is decoded as the unsigned nibble u = q + code_shift and the shift is folded into
// the segment's offset term (sum x*q = sum x*u - code_shift * sum x).
// Integer path: kernels_avx2_int.hpp, with vpmaddubsw + vpmaddwd here; kernels_avx2vnni.cpp
// builds the same tile on AVX-VNNI vpdpbusd for CPUs that have it.
#include <immintrin.h>

#include "cpu/kernel_dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/kernels_avx2_int.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cpu {

namespace {

// u8 x s8 dot of four byte pairs per dword (vpmaddubsw, then vpmaddwd against ones). Exact
// only while a pair sum fits 16 bits: kernels_avx2_int.hpp keeps the u8 operand to a nibble.
struct DotMaddubs {
  static constexpr bool kWide8 = false;
  static __m256i dot(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(
        acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
};

// Code j (0..7) of the 8-k group at gp, lanes 8h..8h+7, as f32 (Int4: the unsigned nibble u).
template <CodeKind CK>
inline __m256 decode8(const uint8_t* gp, int h, int j) {
  if constexpr (CK == CodeKind::Int4) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gp + 32 * h));
    const int sh = (j & 3) * 8 + (j >= 4 ? 4 : 0);
    return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, sh), _mm256_set1_epi32(0xF)));
  } else if constexpr (CK == CodeKind::Int8) {
    const __m256i v =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gp + (j >> 2) * 64 + 32 * h));
    return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * (j & 3)), 24));
  } else if constexpr (CK == CodeKind::Uint8) {
    const __m256i v =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gp + (j >> 2) * 64 + 32 * h));
    return _mm256_cvtepi32_ps(
        _mm256_and_si256(_mm256_srli_epi32(v, 8 * (j & 3)), _mm256_set1_epi32(0xFF)));
  } else if constexpr (CK == CodeKind::Fp8) {
    // As in the AVX-512 file: the e4m3 magnitude at f32 bit 20 is the value times 2^-120
    // (subnormals included); 0x7F / 0xFF are NaN.
    const __m256i v =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gp + (j >> 2) * 64 + 32 * h));
    const __m256i t = _mm256_slli_epi32(v, 24 - 8 * (j & 3));
    const __m256i bits = _mm256_and_si256(_mm256_srai_epi32(t, 4),
                                          _mm256_set1_epi32(static_cast<int>(0x87F00000u)));
    const __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(bits), _mm256_set1_ps(1.329227995784916e36f));
    const __m256i m7f = _mm256_set1_epi32(0x7F000000);
    const __m256i nan = _mm256_cmpeq_epi32(_mm256_and_si256(t, m7f), m7f);
    return _mm256_blendv_ps(f, _mm256_set1_ps(__builtin_nanf("")), _mm256_castsi256_ps(nan));
  } else if constexpr (CK == CodeKind::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gp + j * 32 + 16 * h)));
  } else if constexpr (CK == CodeKind::BF16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(gp + j * 32 + 16 * h));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  } else {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(gp + j * 64 + 32 * h));
  }
}

// Per-segment offset term coefficient: offset - code_shift * scale (Int4 decodes u = q + shift).
template <CodeKind CK>
inline __m256 offset_term(const PackedWeight& w, size_t si, __m256 sc) {
  __m256 of = w.has_offset ? _mm256_loadu_ps(&w.offset[si]) : _mm256_setzero_ps();
  if constexpr (CK == CodeKind::Int4)
    of = _mm256_fnmadd_ps(_mm256_set1_ps(float(w.code_shift)), sc, of);
  return of;
}

template <int MR, CodeKind CK>
void float_tile(const FloatTileArgs& a) {
  const PackedWeight& w = *a.w;
  const int64_t ns = w.n_segs(), gb = w.group_bytes;
  if (!a.accumulate)
    for (int m = 0; m < MR; ++m) {
      _mm256_storeu_ps(a.c + m * a.ldc, _mm256_setzero_ps());
      _mm256_storeu_ps(a.c + m * a.ldc + 8, _mm256_setzero_ps());
    }
  const bool has_off = w.has_offset || (CK == CodeKind::Int4 && w.code_shift != 0);
  const uint8_t* pc = w.panel_codes(a.panel);
  // Independent accumulator chains: with few rows one chain per row would serialize on the FMA
  // latency (4 cycles) instead of its throughput.
  constexpr int NA = MR == 1 ? 4 : MR == 2 ? 2 : 1;
  for (int64_t s = a.seg0; s < a.seg1; ++s) {
    const Segment& sg = w.segs[s];
    const float* xr[MR];
    for (int m = 0; m < MR; ++m) xr[m] = a.x + m * a.ldx + sg.kp0;
    const int32_t len = sg.len;
    for (int h = 0; h < 2; ++h) {
      __m256 acc[NA][MR];
      for (int c = 0; c < NA; ++c)
        for (int m = 0; m < MR; ++m) acc[c][m] = _mm256_setzero_ps();
      const uint8_t* cp = pc + sg.kp0 / 8 * gb;
      for (int32_t g = 0; g < len; g += 8, cp += gb) {
        if (h == 0)
          for (int64_t l = 0; l < gb; l += 64)
            _mm_prefetch(reinterpret_cast<const char*>(cp) + kAvx2PrefetchBytes + l, _MM_HINT_T0);
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          const __m256 wv = decode8<CK>(cp, h, j);
          for (int m = 0; m < MR; ++m)
            acc[j % NA][m] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(xr[m] + g + j), acc[j % NA][m]);
        }
      }
      for (int c = 1; c < NA; ++c)
        for (int m = 0; m < MR; ++m) acc[0][m] = _mm256_add_ps(acc[0][m], acc[c][m]);
      const size_t si = static_cast<size_t>((a.panel * ns + s) * kLanes + 8 * h);
      const __m256 sc = _mm256_loadu_ps(&w.scale[si]);
      const __m256 of = offset_term<CK>(w, si, sc);
      for (int m = 0; m < MR; ++m) {
        float* c = a.c + m * a.ldc + 8 * h;
        __m256 t = _mm256_fmadd_ps(acc[0][m], sc, _mm256_loadu_ps(c));
        if (has_off) t = _mm256_fmadd_ps(of, _mm256_set1_ps(a.xsum[m * a.ldxs + s]), t);
        _mm256_storeu_ps(c, t);
      }
    }
  }
}

void float_tile_avx2(const FloatTileArgs& a) {
  dispatch_float_tile(a, [](auto ck, auto rows, const FloatTileArgs& b) {
    float_tile<decltype(rows)::value, decltype(ck)::value>(b);
  });
}

void int_tile_avx2(const IntTileArgs& a) { int_tile_avx2_t<DotMaddubs>(a); }

// Dequantizes segments of a panel to f32 (w = u * scale + (offset - shift * scale) for 4-bit
// codes, q * scale + offset otherwise: one fused rounding, within an ulp or two of the
// reference's unfused formula).
template <CodeKind CK>
void decode_panel_kind(const PackedWeight& w, int64_t panel, int64_t seg0, int64_t seg1,
                       float* out) {
  const int64_t ns = w.n_segs(), gb = w.group_bytes;
  const uint8_t* pc = w.panel_codes(panel);
  for (int64_t s = seg0; s < seg1; ++s) {
    const Segment& sg = w.segs[s];
    const size_t si = static_cast<size_t>((panel * ns + s) * kLanes);
    __m256 sc[2], of[2];
    for (int h = 0; h < 2; ++h) {
      sc[h] = _mm256_loadu_ps(&w.scale[si + 8 * h]);
      of[h] = offset_term<CK>(w, si + 8 * h, sc[h]);
    }
    const uint8_t* cp = pc + sg.kp0 / 8 * gb;
    for (int32_t g = 0; g < sg.len; g += 8, cp += gb, out += 8 * kLanes) {
      for (int64_t l = 0; l < gb; l += 64)
        _mm_prefetch(reinterpret_cast<const char*>(cp) + kAvx2PrefetchBytes + l, _MM_HINT_T0);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        for (int h = 0; h < 2; ++h)
          _mm256_store_ps(out + j * kLanes + 8 * h,
                          _mm256_fmadd_ps(decode8<CK>(cp, h, j), sc[h], of[h]));
    }
  }
}

void decode_panel_avx2(const PackedWeight& w, int64_t panel, int64_t seg0, int64_t seg1,
                       float* out) {
  with_code_kind(w.kind, [&](auto ck) {
    decode_panel_kind<decltype(ck)::value>(w, panel, seg0, seg1, out);
  });
}

// MR rows (<= 6) x one 16-lane panel = 2 * MR ymm accumulators (12 of the 16 registers), two
// weight loads and MR broadcasts per k for 2 * MR FMAs: FMA-bound, not load-bound.
constexpr int kGemmSubRows = 6;

template <int MR>
void gemm_sub(const float* a, int lda, const float* w, int64_t kc, float* c, int64_t ldc,
              bool accumulate) {
  __m256 acc[MR][2];
  for (int m = 0; m < MR; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k, a += lda, w += kLanes) {
    const __m256 b0 = _mm256_load_ps(w), b1 = _mm256_load_ps(w + 8);
#pragma GCC unroll 6
    for (int m = 0; m < MR; ++m) {
      const __m256 av = _mm256_broadcast_ss(a + m);
      acc[m][0] = _mm256_fmadd_ps(b0, av, acc[m][0]);
      acc[m][1] = _mm256_fmadd_ps(b1, av, acc[m][1]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int h = 0; h < 2; ++h) {
      float* dst = c + m * ldc + 8 * h;
      _mm256_storeu_ps(dst, accumulate ? _mm256_add_ps(_mm256_loadu_ps(dst), acc[m][h]) : acc[m][h]);
    }
}

void gemm_sub_rows(int rows, const float* a, int lda, const float* w, int64_t kc, float* c,
                   int64_t ldc, bool accumulate) {
  switch (rows) {
    case 1: return gemm_sub<1>(a, lda, w, kc, c, ldc, accumulate);
    case 2: return gemm_sub<2>(a, lda, w, kc, c, ldc, accumulate);
    case 3: return gemm_sub<3>(a, lda, w, kc, c, ldc, accumulate);
    case 4: return gemm_sub<4>(a, lda, w, kc, c, ldc, accumulate);
    case 5: return gemm_sub<5>(a, lda, w, kc, c, ldc, accumulate);
    default: return gemm_sub<6>(a, lda, w, kc, c, ldc, accumulate);
  }
}

void gemm_tile_avx2(const GemmTileArgs& t) {
  // Row blocks of near-equal height <= 6 (12 = 6 + 6, 7 = 4 + 3); weights re-read from L1.
  const int blocks = (t.rows + kGemmSubRows - 1) / kGemmSubRows;
  for (int p = 0; p < (t.w1 ? 2 : 1); ++p) {
    const float* w = p ? t.w1 : t.w0;
    int r0 = 0;
    for (int b = 0; b < blocks; ++b) {
      const int rb = t.rows / blocks + (b < t.rows % blocks ? 1 : 0);
      gemm_sub_rows(rb, t.a + r0, t.rows, w, t.kc, t.c + r0 * t.ldc + p * kLanes, t.ldc,
                    t.accumulate);
      r0 += rb;
    }
  }
}

// 16 values per step, exactly int8_act_code: RN(x - of) * RN(1 / sc) in f32, clamp (max_ps
// returns its second operand, -128, for a NaN first operand), round half to even (MXCSR default).
void quantize_i8_avx2(const float* x, int64_t n, float of, float sc, int8_t* q) {
  const float inv = 1.0f / sc;
  const __m256 vo = _mm256_set1_ps(of), vi = _mm256_set1_ps(inv);
  const __m256 lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
  // packs interleave the two 128-bit lanes: dwords (a0-3, b0-3, a0-3, b0-3 | a4-7, b4-7, ...).
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 t0 = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vo), vi);
    __m256 t1 = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vo), vi);
    t0 = _mm256_min_ps(_mm256_max_ps(t0, lo), hi);
    t1 = _mm256_min_ps(_mm256_max_ps(t1, lo), hi);
    const __m256i w16 = _mm256_packs_epi32(_mm256_cvtps_epi32(t0), _mm256_cvtps_epi32(t1));
    const __m256i b8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w16, w16), order);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm256_castsi256_si128(b8));
  }
  for (; i < n; ++i) q[i] = int8_act_code(x[i], of, inv);
}

}  // namespace

const KernelTable* avx2_kernels() {
  static const KernelTable t{"avx2", float_tile_avx2, int_tile_avx2, decode_panel_avx2,
                             gemm_tile_avx2, quantize_i8_avx2};
  return &t;
}

const KernelTable* avx2vnni_kernels() {
  static const KernelTable t{"avx2vnni", float_tile_avx2, int_tile_avx2vnni, decode_panel_avx2,
                             gemm_tile_avx2, quantize_i8_avx2};
  return &t;
}

}  // namespace mixq::cpu
