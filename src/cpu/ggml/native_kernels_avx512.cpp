// AVX-512 VNNI native kernels: one zmm lane per output row of a 16-row panel, 4 consecutive k
// per lane (native_format.hpp), so 4 codes x 16 rows are one vpdpbusd per activation row, the
// activation's 4 bytes broadcast from memory ({1to16}). Codes come out of the record with one
// load + (shift) + mask per 64 codes; 5th / 6th bits are shifted into place and merged with one
// vpternlog; the IQ4 codebook is one vpshufb. Integer sub-block scales are converted once per
// sub-block (16 rows at a time) and applied in f32 to the int32 sums; the f16 block scale once
// per block. Nothing is decoded to memory on the integer path.
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 avx512fintrin.h false positive

#include "cpu/ggml/native_kernels.hpp"
#include "cpu/ggml/native_prefill.hpp"

namespace mixq::cpu::ggml {

namespace {

// Software prefetch of the weight stream (M <= 4): one core's DRAM bandwidth is latency-bound
// (~14 GB/s x ~150 ns: ~2 KB in flight), more than the L1's 16 fill buffers can hold with
// prefetches into L1 alone. So lines are asked into L2 far ahead (its queue holds more misses)
// and into L1 a little ahead of use.
constexpr int kPrefetchL1Bytes = 2048;
constexpr int kPrefetchL2Bytes = 16384;

template <GgmlType T>
struct K512 {
  static constexpr Format F = FormatOf<T>::f;
  static constexpr int kSpans = F.qk / 32;      // 32-k spans per block
  static constexpr int kSubPerSpan = 32 / F.sub;
  static constexpr int kQuadsPerSub = F.sub / 4;

  // The 8 registers (4 k x 16 rows each) of span s of a record.
  static inline void span(const uint8_t* rec, int s, __m512i u[8]) {
    if constexpr (F.lb == 8) {
      for (int i = 0; i < 8; ++i) u[i] = _mm512_loadu_si512(rec + (8 * s + i) * 64);
    } else if constexpr (F.lb == 4) {
      const __m512i m = _mm512_set1_epi8(0x0F);
      for (int i = 0; i < 4; ++i) {
        const __m512i v = _mm512_loadu_si512(rec + (4 * s + i) * 64);
        u[2 * i] = _mm512_and_si512(v, m);
        u[2 * i + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
      }
    } else {
      const __m512i m = _mm512_set1_epi8(3);
      for (int i = 0; i < 2; ++i) {
        const __m512i v = _mm512_loadu_si512(rec + (2 * s + i) * 64);
        u[4 * i] = _mm512_and_si512(v, m);
        u[4 * i + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 2), m);
        u[4 * i + 2] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
        u[4 * i + 3] = _mm512_and_si512(_mm512_srli_epi16(v, 6), m);
      }
    }
    // High bits: shift bit b (or pair b) of every byte to bit lb, keep it, OR it in
    // (vpternlog 0xF8 = A | (B & C)).
    if constexpr (F.hb == 1) {
      const __m512i h = _mm512_loadu_si512(rec + F.off_hi() + s * 64);
      const __m512i bit = _mm512_set1_epi8(static_cast<char>(1 << F.lb));
      for (int b = 0; b < 8; ++b) {
        const int sh = F.lb - b;
        const __m512i t = sh >= 0 ? _mm512_slli_epi16(h, sh) : _mm512_srli_epi16(h, -sh);
        u[b] = _mm512_ternarylogic_epi32(u[b], t, bit, 0xF8);
      }
    } else if constexpr (F.hb == 2) {
      const __m512i bits = _mm512_set1_epi8(static_cast<char>(3 << F.lb));
      for (int i = 0; i < 2; ++i) {
        const __m512i h = _mm512_loadu_si512(rec + F.off_hi() + (2 * s + i) * 64);
        for (int b = 0; b < 4; ++b) {
          const int sh = F.lb - 2 * b;
          const __m512i t = sh >= 0 ? _mm512_slli_epi16(h, sh) : _mm512_srli_epi16(h, -sh);
          u[4 * i + b] = _mm512_ternarylogic_epi32(u[4 * i + b], t, bits, 0xF8);
        }
      }
    }
    if constexpr (F.iq4) {
      const __m512i tab = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Biased)));
      for (int i = 0; i < 8; ++i) u[i] = _mm512_shuffle_epi8(tab, u[i]);
    }
  }

  static inline __m512 bytes_u8(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }

  // Integer scale (f32) of sub-block jj for the 16 rows; and the integer min (K4, Q2K).
  static inline __m512 int_scale(const uint8_t* rec, int jj) {
    const uint8_t* s = rec + F.off_sc();
    if constexpr (F.sk == ScaleKind::K4) {
      return bytes_u8(s + jj * 16);
    } else if constexpr (F.sk == ScaleKind::Q2K) {
      const __m512i p = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + jj * 16)));
      return _mm512_cvtepi32_ps(_mm512_and_si512(p, _mm512_set1_epi32(15)));
    } else if constexpr (F.sk == ScaleKind::Signed8) {
      return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + jj * 16))));
    } else if constexpr (F.sk == ScaleKind::Q3K) {
      const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + (jj / 2) * 16)));
      const __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + (8 + jj / 4) * 16)));
      const __m512i l4 = _mm512_and_si512(_mm512_srli_epi32(lo, 4 * (jj % 2)), _mm512_set1_epi32(15));
      const __m512i h2 = _mm512_and_si512(_mm512_srli_epi32(hi, 2 * (jj % 4)), _mm512_set1_epi32(3));
      return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_or_si512(l4, _mm512_slli_epi32(h2, 4)),
                                                 _mm512_set1_epi32(32)));
    } else {
      return _mm512_set1_ps(1.f);
    }
  }
  static inline __m512 int_min(const uint8_t* rec, int jj) {
    const uint8_t* s = rec + F.off_sc();
    if constexpr (F.sk == ScaleKind::K4) {
      return bytes_u8(s + (F.n_sub() + jj) * 16);
    } else {  // Q2K
      const __m512i p = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + jj * 16)));
      return _mm512_cvtepi32_ps(_mm512_srli_epi32(p, 4));
    }
  }
  // An accumulator started at corr (which carries kSumMagicBits) as the f32 of its int32 sum.
  static inline __m512 sum_f32(__m512i ia) {
    return _mm512_sub_ps(_mm512_castsi512_ps(ia), _mm512_castsi512_ps(_mm512_set1_epi32(kSumMagicBits)));
  }
  static inline __m512 f16x16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }

  template <int MR>
  static void tile(const I8TileArgs& a, int m0) {
    constexpr bool kPerSub = F.n_sub() > 1 || F.sk == ScaleKind::Signed8;  // integer sub scales
    const int64_t rb = a.w->record_bytes;
    const uint8_t* rec = a.w->panel(a.panel) + a.kb0 * rb;
    const int8_t* q[MR];
    const float* dxs[MR];
    const int32_t* corr[MR];
    const float* xs[MR];
    __m512 acc[MR];
    for (int m = 0; m < MR; ++m) {
      q[m] = a.q + (m0 + m) * a.ldq;
      dxs[m] = a.dxs + (m0 + m) * a.ldj;
      corr[m] = a.corr + (m0 + m) * a.ldj;
      xs[m] = a.xs + (m0 + m) * a.ldj;
      acc[m] = a.accumulate ? _mm512_loadu_ps(a.c + (m0 + m) * a.ldc) : _mm512_setzero_ps();
    }
    const bool prefetch = m0 == 0;
    for (int64_t kb = a.kb0; kb < a.kb1; ++kb, rec += rb) {
      // (one span a record: its lines at once, into L1 as well where asked; else the L2 lines a
      // slice per span, below)
      if (prefetch && (kSpans == 1 || a.prefetch_l1))
        for (int64_t o = 0; o < rb; o += 64) {
          if (a.prefetch_l1)
            _mm_prefetch(reinterpret_cast<const char*>(rec) + kPrefetchL1Bytes + o, _MM_HINT_T0);
          if (kSpans == 1) _mm_prefetch(reinterpret_cast<const char*>(rec) + kPrefetchL2Bytes + o, _MM_HINT_T1);
        }
      const __m512 d = f16x16(rec + F.off_d());
      __m512 sb[MR], mn[MR];
      if constexpr (kPerSub)
        for (int m = 0; m < MR; ++m) sb[m] = mn[m] = _mm512_setzero_ps();
      for (int s = 0; s < kSpans; ++s) {
        if (prefetch && kSpans > 1) {
          const PrefetchSlice sl = prefetch_slice(rb, s, kSpans);
          for (int64_t o = sl.begin; o < sl.end; o += 64)
            _mm_prefetch(reinterpret_cast<const char*>(rec) + kPrefetchL2Bytes + o, _MM_HINT_T1);
        }
        __m512i u[8];
        span(rec, s, u);
        for (int h = 0; h < kSubPerSpan; ++h) {
          const int jj = s * kSubPerSpan + h;
          const int64_t j = kb * F.n_sub() + jj;
          const int64_t k = kb * F.qk + jj * F.sub;
          __m512i ia[MR];
          for (int m = 0; m < MR; ++m)
            ia[m] = _mm512_set1_epi32(corr[m][j]);  // bias correction + kSumMagicBits
          for (int t = 0; t < kQuadsPerSub; ++t)
            for (int m = 0; m < MR; ++m) {
              int32_t x4;
              __builtin_memcpy(&x4, q[m] + k + 4 * t, 4);
              ia[m] = _mm512_dpbusd_epi32(ia[m], u[h * kQuadsPerSub + t], _mm512_set1_epi32(x4));
            }
          if constexpr (!kPerSub) {
            for (int m = 0; m < MR; ++m)
              acc[m] = _mm512_fmadd_ps(sum_f32(ia[m]), _mm512_mul_ps(d, _mm512_set1_ps(dxs[m][j])),
                                       acc[m]);
            if constexpr (F.sk == ScaleKind::Affine) {
              const __m512 dm = f16x16(rec + F.off_dm());
              for (int m = 0; m < MR; ++m) acc[m] = _mm512_fmadd_ps(dm, _mm512_set1_ps(xs[m][j]), acc[m]);
            }
          } else {
            const __m512 sc = int_scale(rec, jj);
            for (int m = 0; m < MR; ++m)
              sb[m] = _mm512_fmadd_ps(sum_f32(ia[m]), _mm512_mul_ps(sc, _mm512_set1_ps(dxs[m][j])),
                                      sb[m]);
            if constexpr (F.sk == ScaleKind::K4 || F.sk == ScaleKind::Q2K) {
              const __m512 mv = int_min(rec, jj);
              for (int m = 0; m < MR; ++m) mn[m] = _mm512_fmadd_ps(mv, _mm512_set1_ps(xs[m][j]), mn[m]);
            }
          }
        }
      }
      if constexpr (kPerSub) {
        for (int m = 0; m < MR; ++m) acc[m] = _mm512_fmadd_ps(sb[m], d, acc[m]);
        if constexpr (F.sk == ScaleKind::K4 || F.sk == ScaleKind::Q2K) {
          const __m512 dm = f16x16(rec + F.off_dm());
          for (int m = 0; m < MR; ++m) acc[m] = _mm512_fnmadd_ps(mn[m], dm, acc[m]);
        }
      }
    }
    for (int m = 0; m < MR; ++m) _mm512_storeu_ps(a.c + (m0 + m) * a.ldc, acc[m]);
  }

  static void i8_tile(const I8TileArgs& a) {
    int m = 0;
    for (; m + 4 <= a.rows; m += 4) tile<4>(a, m);
    switch (a.rows - m) {
      case 3: tile<3>(a, m); break;
      case 2: tile<2>(a, m); break;
      case 1: tile<1>(a, m); break;
      default: break;
    }
  }

  // Prefill form (DecodedChunk): each span's 8 registers stored as they come out of span(),
  // the f32 sub-block scales formed once per (sub-block, row) instead of once per register tile.
  static void decode_i8(const NativeWeight& w, int64_t p, int64_t kb0, int64_t kb1, uint8_t* codes,
                        float* sv, float* ov) {
    const int64_t rb = w.record_bytes;
    const uint8_t* rec = w.panel(p) + kb0 * rb;
    for (int64_t kb = kb0; kb < kb1; ++kb, rec += rb) {
      const __m512 d = f16x16(rec + F.off_d());
      for (int s = 0; s < kSpans; ++s) {
        __m512i u[8];
        span(rec, s, u);
        for (int i = 0; i < 8; ++i) _mm512_storeu_si512(codes + (8 * s + i) * 64, u[i]);
      }
      codes += F.qk * 16;
      for (int jj = 0; jj < F.n_sub(); ++jj, sv += 16) {
        if constexpr (F.sk == ScaleKind::Single || F.sk == ScaleKind::Affine) {
          _mm512_storeu_ps(sv, d);
        } else {
          _mm512_storeu_ps(sv, _mm512_mul_ps(d, int_scale(rec, jj)));
        }
        if constexpr (F.sk == ScaleKind::Affine) {
          _mm512_storeu_ps(ov, f16x16(rec + F.off_dm()));
          ov += 16;
        } else if constexpr (F.sk == ScaleKind::K4 || F.sk == ScaleKind::Q2K) {
          const __m512 t = _mm512_mul_ps(f16x16(rec + F.off_dm()), int_min(rec, jj));
          _mm512_storeu_ps(ov, _mm512_sub_ps(_mm512_setzero_ps(), t));
          ov += 16;
        }
      }
    }
  }

  // Exact path: w = s * float(u - bias) + o per element, multiply then add (the file is built
  // with -ffp-contract=off), s and o formed as ggml forms them: ggml's decode bit for bit.
  static void decode_f32_t(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, float* out) {
    const int64_t rb = w.record_bytes;
    const uint8_t* rec = w.panel(p) + kb0 * rb;
    const __m512i bias = _mm512_set1_epi32(F.bias), ff = _mm512_set1_epi32(0xFF);
    for (int64_t kb = 0; kb < nb; ++kb, rec += rb) {
      const __m512 d = f16x16(rec + F.off_d());
      float* o = out + kb * F.qk * 16;
      for (int s = 0; s < kSpans; ++s) {
        __m512i u[8];
        span(rec, s, u);
        for (int h = 0; h < kSubPerSpan; ++h) {
          const int jj = s * kSubPerSpan + h;
          __m512 sv = d, ov = _mm512_setzero_ps();
          if constexpr (F.sk == ScaleKind::Affine) {
            ov = f16x16(rec + F.off_dm());
          } else if constexpr (F.sk == ScaleKind::K4 || F.sk == ScaleKind::Q2K) {
            sv = _mm512_mul_ps(d, int_scale(rec, jj));
            const __m512 t = _mm512_mul_ps(f16x16(rec + F.off_dm()), int_min(rec, jj));
            ov = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(t), _mm512_set1_epi32(INT32_MIN)));
          } else if constexpr (F.sk != ScaleKind::Single) {
            sv = _mm512_mul_ps(d, int_scale(rec, jj));
          }
          for (int t = 0; t < kQuadsPerSub; ++t) {
            const __m512i v = u[h * kQuadsPerSub + t];
            for (int b = 0; b < 4; ++b) {
              const __m512i e = _mm512_sub_epi32(_mm512_and_si512(_mm512_srli_epi32(v, 8 * b), ff), bias);
              __m512 wv = _mm512_mul_ps(sv, _mm512_cvtepi32_ps(e));
              if constexpr (F.has_min()) wv = _mm512_add_ps(wv, ov);
              _mm512_storeu_ps(o + (jj * F.sub + 4 * t + b) * 16, wv);
            }
          }
        }
      }
    }
  }
};

struct TileFn {
  const I8TileArgs& a;
  template <GgmlType T> void operator()() const { K512<T>::i8_tile(a); }
};
void i8_tile_avx512(const I8TileArgs& a) { dispatch_type(a.w->type, TileFn{a}); }

struct DecodeI8Fn {
  const NativeWeight& w; int64_t p, kb0, kb1; uint8_t* codes; float* s; float* o;
  template <GgmlType T> void operator()() const { K512<T>::decode_i8(w, p, kb0, kb1, codes, s, o); }
};
void decode_i8_avx512(const NativeWeight& w, int64_t p, int64_t kb0, int64_t kb1, uint8_t* codes,
                      float* s, float* o) {
  dispatch_type(w.type, DecodeI8Fn{w, p, kb0, kb1, codes, s, o});
}

struct DecodeFn {
  const NativeWeight& w; int64_t p, kb0, nb; float* out;
  template <GgmlType T> void operator()() const { K512<T>::decode_f32_t(w, p, kb0, nb, out); }
};
void decode_f32_t_avx512(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, float* out) {
  dispatch_type(w.type, DecodeFn{w, p, kb0, nb, out});
}

// ggml's q8_0 arithmetic, 16 floats at a time: dx = amax / 127, q = round(x * (1 / dx)) with
// round half away from zero done exactly (truncate, then add the sign where |x - trunc| >= 0.5),
// so the codes are bit for bit those of the scalar reference.
void quantize_row_avx512(const float* x, int64_t K, int sub, int bias, int8_t* q, float* dxs,
                         int32_t* corr, float* xs) {
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.f);
  const __m512i sign = _mm512_set1_epi32(INT32_MIN);
  for (int64_t b = 0; b < K; b += 32) {
    const __m512 x0 = _mm512_loadu_ps(x + b), x1 = _mm512_loadu_ps(x + b + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const float d = amax / 127.f;
    const __m512 id = _mm512_set1_ps(d != 0.f ? 1.f / d : 0.f);
    __m512i qi[2];
    const __m512 xv[2] = {x0, x1};
    for (int h = 0; h < 2; ++h) {
      const __m512 v = _mm512_mul_ps(xv[h], id);
      __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), half, _CMP_GE_OQ);
      const __m512 sg = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v), sign),
                                                            _mm512_castps_si512(one)));
      t = _mm512_mask_add_ps(t, up, t, sg);
      t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-127.f)), _mm512_set1_ps(127.f));
      qi[h] = _mm512_cvtps_epi32(t);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b + 16 * h), _mm512_cvtepi32_epi8(qi[h]));
    }
    if (sub == 32) {
      const int64_t j = b / 32;
      dxs[j] = d;
      corr[j] = kSumMagicBits - bias * _mm512_reduce_add_epi32(_mm512_add_epi32(qi[0], qi[1]));
      xs[j] = _mm512_reduce_add_ps(_mm512_add_ps(x0, x1));
    } else {
      for (int h = 0; h < 2; ++h) {
        const int64_t j = b / 16 + h;
        dxs[j] = d;
        corr[j] = kSumMagicBits - bias * _mm512_reduce_add_epi32(qi[h]);
        xs[j] = _mm512_reduce_add_ps(xv[h]);
      }
    }
  }
}

const NativeKernels kAvx512 = {"avx512",          i8_tile_avx512,      decode_i8_avx512,
                               i8_tile_decoded_avx512, decode_f32_t_avx512, quantize_row_avx512};

}  // namespace

const NativeKernels* native_avx512_kernels() { return &kAvx512; }

}  // namespace mixq::cpu::ggml
