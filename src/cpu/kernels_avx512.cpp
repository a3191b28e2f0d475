// AVX-512 (F/BW/VL/DQ/VNNI) micro-kernels: one zmm lane per output row of a 16-row panel.
//
// Float path: the codes of 8 k are one (4-bit) or two (8-bit) 64-byte loads; code k of every
// lane is brought to the low bits of its dword by one shift and turned into a float by a single
// vpermps against a 16-entry table (4-bit: the table holds q = u - shift, so no mask is needed,
// vpermps only reads the low 4 index bits) or by shift/mask + cvtdq2ps (8-bit). Each decoded
// vector then feeds `rows` FMAs against broadcast activations, so the decode is amortized over
// the tile rows. The per-block scale (and offset * sum(x)) is applied once per segment.
//
// Integer path: the 8-bit dword layout is exactly vpdpbusd's operand (4 consecutive k per lane);
// 4-bit codes are split into two such registers with one mask and one shift+mask.
#include <immintrin.h>

// GCC 12 reports its own intrinsics' _mm512_undefined_* placeholders as maybe-uninitialized
// (a known false positive of avx512fintrin.h); nothing in this file reads uninitialized data.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "cpu/kernel_dispatch.hpp"
#include "cpu/kernels.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cpu {

namespace {

constexpr int kPrefetchBytes = 2048;

template <CodeKind CK>
inline __m512 decode_float(const uint8_t* cp, int j, __m512 tab) {
  if constexpr (CK == CodeKind::Int4) {
    const __m512i v = _mm512_loadu_si512(cp);
    const int sh = (j & 3) * 8 + (j >= 4 ? 4 : 0);
    return _mm512_permutexvar_ps(_mm512_srli_epi32(v, sh), tab);
  } else if constexpr (CK == CodeKind::Int8) {
    const __m512i v = _mm512_loadu_si512(cp + (j >> 2) * 64);
    const int jj = j & 3;
    return _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * jj), 24));
  } else if constexpr (CK == CodeKind::Uint8) {
    const __m512i v = _mm512_loadu_si512(cp + (j >> 2) * 64);
    const __m512i b = _mm512_and_si512(_mm512_srli_epi32(v, 8 * (j & 3)), _mm512_set1_epi32(0xFF));
    return _mm512_cvtepi32_ps(b);
  } else if constexpr (CK == CodeKind::Fp8) {
    // e4m3 magnitude m (7 bits) placed at f32 bit 20 is the value times 2^-120 (subnormals
    // included, exactly). Byte jj is moved to bits 24..31 (sign on bit 31), an arithmetic
    // shift by 4 puts the magnitude at bits 20..26 and keeps the sign, one mask clears the rest;
    // 0x7F / 0xFF are NaN.
    const __m512i v = _mm512_loadu_si512(cp + (j >> 2) * 64);
    const __m512i t = _mm512_slli_epi32(v, 24 - 8 * (j & 3));
    const __m512i bits = _mm512_and_si512(_mm512_srai_epi32(t, 4),
                                          _mm512_set1_epi32(static_cast<int>(0x87F00000u)));
    const __m512 f = _mm512_mul_ps(_mm512_castsi512_ps(bits),
                                   _mm512_set1_ps(1.329227995784916e36f));  // 2^120
    const __m512i m7f = _mm512_set1_epi32(0x7F000000);
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(_mm512_and_si512(t, m7f), m7f);
    return _mm512_mask_blend_ps(nan, f, _mm512_set1_ps(__builtin_nanf("")));
  } else if constexpr (CK == CodeKind::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + j * 32)));
  } else if constexpr (CK == CodeKind::BF16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + j * 32));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(cp + j * 64));
  }
}

template <int MR, CodeKind CK>
void float_tile(const FloatTileArgs& a) {
  const PackedWeight& w = *a.w;
  const int64_t ns = w.n_segs(), gb = w.group_bytes;
  __m512 tot[MR];
  for (int m = 0; m < MR; ++m)
    tot[m] = a.accumulate ? _mm512_loadu_ps(a.c + m * a.ldc) : _mm512_setzero_ps();
  __m512 tab = _mm512_setzero_ps();
  if constexpr (CK == CodeKind::Int4) {
    alignas(64) float t[16];
    for (int i = 0; i < 16; ++i) t[i] = float(i - w.code_shift);
    tab = _mm512_load_ps(t);
  }
  const uint8_t* pc = w.panel_codes(a.panel);
  // Independent accumulator chains: with few rows one chain per row would serialize on the FMA
  // latency (4 cycles) instead of its throughput.
  constexpr int NA = MR == 1 ? 4 : MR == 2 ? 2 : 1;
  for (int64_t s = a.seg0; s < a.seg1; ++s) {
    const Segment& sg = w.segs[s];
    __m512 acc[NA][MR];
    for (int c = 0; c < NA; ++c)
      for (int m = 0; m < MR; ++m) acc[c][m] = _mm512_setzero_ps();
    const uint8_t* cp = pc + sg.kp0 / 8 * gb;
    // Row pointers hoisted so the broadcasts fold into the FMAs as memory operands.
    const float* xr[MR];
    for (int m = 0; m < MR; ++m) xr[m] = a.x + m * a.ldx + sg.kp0;
    const int32_t len = sg.len;
    for (int32_t g = 0; g < len; g += 8, cp += gb) {
      for (int64_t l = 0; l < gb; l += 64)  // see int_tile: more lines in flight per core
        _mm_prefetch(reinterpret_cast<const char*>(cp) + kPrefetchBytes + l, _MM_HINT_T0);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m512 wv = decode_float<CK>(cp, j, tab);
        for (int m = 0; m < MR; ++m)
          acc[j % NA][m] = _mm512_fmadd_ps(wv, _mm512_set1_ps(xr[m][g + j]), acc[j % NA][m]);
      }
    }
    for (int c = 1; c < NA; ++c)
      for (int m = 0; m < MR; ++m) acc[0][m] = _mm512_add_ps(acc[0][m], acc[c][m]);
    const size_t si = static_cast<size_t>((a.panel * ns + s) * kLanes);
    const __m512 sc = _mm512_loadu_ps(&w.scale[si]);
    for (int m = 0; m < MR; ++m) tot[m] = _mm512_fmadd_ps(acc[0][m], sc, tot[m]);
    if (w.has_offset) {
      const __m512 of = _mm512_loadu_ps(&w.offset[si]);
      for (int m = 0; m < MR; ++m)
        tot[m] = _mm512_fmadd_ps(of, _mm512_set1_ps(a.xsum[m * a.ldxs + s]), tot[m]);
    }
  }
  for (int m = 0; m < MR; ++m) _mm512_storeu_ps(a.c + m * a.ldc, tot[m]);
}

inline __m512i bcast4(const uint8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

template <int MR, CodeKind CK, bool INT_MODE>
void int_tile(const IntTileArgs& a) {
  const PackedWeight& w = *a.w;
  const int64_t ns = w.n_segs(), gb = w.group_bytes;
  __m512 ftot[MR];
  __m512i itot[MR];
  for (int m = 0; m < MR; ++m) {
    if constexpr (INT_MODE)
      itot[m] = a.accumulate ? _mm512_loadu_si512(static_cast<int32_t*>(a.c) + m * a.ldc)
                             : _mm512_setzero_si512();
    else
      ftot[m] = a.accumulate ? _mm512_loadu_ps(static_cast<float*>(a.c) + m * a.ldc)
                             : _mm512_setzero_ps();
  }
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const uint8_t* pc = w.panel_codes(a.panel);
  for (int64_t s = a.seg0; s < a.seg1; ++s) {
    const Segment& sg = w.segs[s];
    // Chains: [group parity][lo/hi half]; two groups in flight only for a single row (latency).
    constexpr int NG = MR == 1 ? 2 : 1;
    __m512i acc[NG][2][MR];
    for (int q = 0; q < NG; ++q)
      for (int m = 0; m < MR; ++m) acc[q][0][m] = acc[q][1][m] = _mm512_setzero_si512();
    const uint8_t* cp = pc + sg.kp0 / 8 * gb;
    const uint8_t* xrow[MR];
    for (int m = 0; m < MR; ++m) xrow[m] = a.x + m * a.ldx + sg.kp0;
    const int32_t len = sg.len;
    auto group = [&](int32_t g, const uint8_t* gp, __m512i* a0, __m512i* a1) {
      // Software prefetch keeps more weight lines in flight than the hardware streamer alone
      // (one core's DRAM bandwidth is latency-bound).
      _mm_prefetch(reinterpret_cast<const char*>(gp) + kPrefetchBytes, _MM_HINT_T0);
      if constexpr (CK != CodeKind::Int4)
        _mm_prefetch(reinterpret_cast<const char*>(gp) + kPrefetchBytes + 64, _MM_HINT_T0);
      if constexpr (CK == CodeKind::Int4) {
        const __m512i v = _mm512_loadu_si512(gp);
        const __m512i lo = _mm512_and_si512(v, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        for (int m = 0; m < MR; ++m) {
          a0[m] = _mm512_dpbusd_epi32(a0[m], lo, bcast4(xrow[m] + g));
          a1[m] = _mm512_dpbusd_epi32(a1[m], hi, bcast4(xrow[m] + g + 4));
        }
      } else {
        const __m512i v0 = _mm512_loadu_si512(gp), v1 = _mm512_loadu_si512(gp + 64);
        for (int m = 0; m < MR; ++m) {
          if constexpr (CK == CodeKind::Uint8) {
            a0[m] = _mm512_dpbusd_epi32(a0[m], v0, bcast4(xrow[m] + g));
            a1[m] = _mm512_dpbusd_epi32(a1[m], v1, bcast4(xrow[m] + g + 4));
          } else {  // signed codes: activations carry the +128 bias
            a0[m] = _mm512_dpbusd_epi32(a0[m], bcast4(xrow[m] + g), v0);
            a1[m] = _mm512_dpbusd_epi32(a1[m], bcast4(xrow[m] + g + 4), v1);
          }
        }
      }
    };
    int32_t g = 0;
    for (; g + 8 * NG <= len; g += 8 * NG, cp += gb * NG)
      for (int q = 0; q < NG; ++q) group(g + 8 * q, cp + gb * q, acc[q][0], acc[q][1]);
    for (; g < len; g += 8, cp += gb) group(g, cp, acc[0][0], acc[0][1]);
    for (int m = 0; m < MR; ++m) {
      acc[0][0][m] = _mm512_add_epi32(acc[0][0][m], acc[0][1][m]);
      if constexpr (NG > 1)
        acc[0][0][m] = _mm512_add_epi32(acc[0][0][m], _mm512_add_epi32(acc[1][0][m], acc[1][1][m]));
    }
    const size_t si = static_cast<size_t>((a.panel * ns + s) * kLanes);
    const __m512i qsum = _mm512_loadu_si512(&w.qsum[si]);
    // Recover d = sum qx*q exactly (see kernels.hpp).
    const __m512i corr_w = _mm512_slli_epi32(qsum, 7);  // 128 * sum q (signed codes)
    __m512 sw = _mm512_setzero_ps(), swq = sw, ow = sw;
    if constexpr (!INT_MODE) {
      sw = _mm512_loadu_ps(&w.scale[si]);
      swq = _mm512_mul_ps(sw, _mm512_cvtepi32_ps(qsum));
      if (w.has_offset) ow = _mm512_loadu_ps(&w.offset[si]);
    }
    for (int m = 0; m < MR; ++m) {
      const ActSegment& as = a.xs[m * a.ldxs + s];
      __m512i d;
      if constexpr (CK == CodeKind::Int8) d = _mm512_sub_epi32(acc[0][0][m], corr_w);
      else if constexpr (CK == CodeKind::Int4)
        d = _mm512_sub_epi32(acc[0][0][m], _mm512_set1_epi32(w.code_shift * as.sum_qx));
      else d = acc[0][0][m];
      if constexpr (INT_MODE) {
        itot[m] = _mm512_add_epi32(itot[m], d);
      } else {
        ftot[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(sw, _mm512_set1_ps(as.sx)),
                                  ftot[m]);
        ftot[m] = _mm512_fmadd_ps(swq, _mm512_set1_ps(as.ox), ftot[m]);
        ftot[m] = _mm512_fmadd_ps(ow, _mm512_set1_ps(as.ow_coef), ftot[m]);
      }
    }
  }
  for (int m = 0; m < MR; ++m) {
    if constexpr (INT_MODE) _mm512_storeu_si512(static_cast<int32_t*>(a.c) + m * a.ldc, itot[m]);
    else _mm512_storeu_ps(static_cast<float*>(a.c) + m * a.ldc, ftot[m]);
  }
}

void float_tile_avx512(const FloatTileArgs& a) {
  dispatch_float_tile(a, [](auto ck, auto rows, const FloatTileArgs& b) {
    float_tile<decltype(rows)::value, decltype(ck)::value>(b);
  });
}

void int_tile_avx512(const IntTileArgs& a) {
  dispatch_int_tile(a, [](auto ck, auto rows, auto int_mode, const IntTileArgs& b) {
    int_tile<decltype(rows)::value, decltype(ck)::value, decltype(int_mode)::value>(b);
  });
}

// Dequantizes segments of a panel to f32: w = q * scale + offset (one fused rounding; the
// reference's unfused f32 formula differs by at most one ulp of w).
template <CodeKind CK>
void decode_panel_kind(const PackedWeight& w, int64_t panel, int64_t seg0, int64_t seg1,
                       float* out) {
  const int64_t ns = w.n_segs(), gb = w.group_bytes;
  __m512 tab = _mm512_setzero_ps();
  if constexpr (CK == CodeKind::Int4) {
    alignas(64) float t[16];
    for (int i = 0; i < 16; ++i) t[i] = float(i - w.code_shift);
    tab = _mm512_load_ps(t);
  }
  const uint8_t* pc = w.panel_codes(panel);
  for (int64_t s = seg0; s < seg1; ++s) {
    const Segment& sg = w.segs[s];
    const size_t si = static_cast<size_t>((panel * ns + s) * kLanes);
    const __m512 sc = _mm512_loadu_ps(&w.scale[si]);
    const __m512 of = w.has_offset ? _mm512_loadu_ps(&w.offset[si]) : _mm512_setzero_ps();
    const uint8_t* cp = pc + sg.kp0 / 8 * gb;
    for (int32_t g = 0; g < sg.len; g += 8, cp += gb, out += 8 * kLanes) {
      for (int64_t l = 0; l < gb; l += 64)
        _mm_prefetch(reinterpret_cast<const char*>(cp) + kPrefetchBytes + l, _MM_HINT_T0);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        _mm512_store_ps(out + j * kLanes, _mm512_fmadd_ps(decode_float<CK>(cp, j, tab), sc, of));
    }
  }
}

void decode_panel_avx512(const PackedWeight& w, int64_t panel, int64_t seg0, int64_t seg1,
                         float* out) {
  with_code_kind(w.kind, [&](auto ck) {
    decode_panel_kind<decltype(ck)::value>(w, panel, seg0, seg1, out);
  });
}

// MR rows x NP panels of f32 accumulators (MR * NP <= 24 of the 32 zmm registers); per k: NP
// weight loads and MR broadcasts (folded into the FMAs) for MR * NP FMAs.
template <int MR, int NP>
void gemm_tile_mr(const GemmTileArgs& t) {
  __m512 c[NP][MR];
  for (int p = 0; p < NP; ++p)
    for (int m = 0; m < MR; ++m) c[p][m] = _mm512_setzero_ps();
  const float* a = t.a;
  const float* w0 = t.w0;
  const float* w1 = NP == 2 ? t.w1 : t.w0;
  for (int64_t k = 0; k < t.kc; ++k, a += MR, w0 += kLanes, w1 += kLanes) {
    const __m512 b0 = _mm512_load_ps(w0);
    const __m512 b1 = NP == 2 ? _mm512_load_ps(w1) : b0;
#pragma GCC unroll 12
    for (int m = 0; m < MR; ++m) {
      const __m512 av = _mm512_set1_ps(a[m]);
      c[0][m] = _mm512_fmadd_ps(b0, av, c[0][m]);
      if constexpr (NP == 2) c[1][m] = _mm512_fmadd_ps(b1, av, c[1][m]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int p = 0; p < NP; ++p) {
      float* dst = t.c + m * t.ldc + p * kLanes;
      _mm512_storeu_ps(dst, t.accumulate ? _mm512_add_ps(_mm512_loadu_ps(dst), c[p][m]) : c[p][m]);
    }
}

template <int NP>
void gemm_tile_np(const GemmTileArgs& t) {
  switch (t.rows) {
    case 1: return gemm_tile_mr<1, NP>(t);
    case 2: return gemm_tile_mr<2, NP>(t);
    case 3: return gemm_tile_mr<3, NP>(t);
    case 4: return gemm_tile_mr<4, NP>(t);
    case 5: return gemm_tile_mr<5, NP>(t);
    case 6: return gemm_tile_mr<6, NP>(t);
    case 7: return gemm_tile_mr<7, NP>(t);
    case 8: return gemm_tile_mr<8, NP>(t);
    case 9: return gemm_tile_mr<9, NP>(t);
    case 10: return gemm_tile_mr<10, NP>(t);
    case 11: return gemm_tile_mr<11, NP>(t);
    default: return gemm_tile_mr<12, NP>(t);
  }
}

void gemm_tile_avx512(const GemmTileArgs& t) {
  if (t.w1) gemm_tile_np<2>(t);
  else gemm_tile_np<1>(t);
}

// 16 values per step, exactly int8_act_code: RN(x - of) * RN(1 / sc) in f32, clamp (max_ps
// returns its second operand, -128, for a NaN first operand), round half to even (MXCSR default).
void quantize_i8_avx512(const float* x, int64_t n, float of, float sc, int8_t* q) {
  const float inv = 1.0f / sc;
  const __m512 vo = _mm512_set1_ps(of), vi = _mm512_set1_ps(inv);
  const __m512 lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vo), vi);
    t = _mm512_min_ps(_mm512_max_ps(t, lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i),
                     _mm512_cvtsepi32_epi8(_mm512_cvt_roundps_epi32(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
  }
  for (; i < n; ++i) q[i] = int8_act_code(x[i], of, inv);
}

}  // namespace

const KernelTable* avx512_kernels() {
  static const KernelTable t{"avx512", float_tile_avx512, int_tile_avx512, decode_panel_avx512,
                             gemm_tile_avx512, quantize_i8_avx512};
  return &t;
}

}  // namespace mixq::cpu
