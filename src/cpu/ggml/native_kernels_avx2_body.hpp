// The AVX2 native kernel set (native_kernels.hpp), written once over its dot-product step and
// compiled by two files: native_kernels_avx2.cpp (VNNI = false: vpmaddubsw + vpmaddwd, any AVX2
// CPU) and native_kernels_avx2vnni.cpp (VNNI = true: AVX-VNNI vpdpbusd on ymm, Alder Lake, Sapphire
// Rapids, Zen 5 and later). Everything here has internal linkage (anonymous namespace): each file
// gets its own copy compiled with its own ISA flags, so the linker can never hand the plain-AVX2
// table a function built with AVX-VNNI.
//
// The AVX-512 file's scheme on 8-lane ymm registers, each record handled as two half panels (rows
// 0-7 are the low 32 bytes of every 64-byte line, rows 8-15 the high 32). Without VNNI the u8 x s8
// products go through vpmaddubsw + vpmaddwd; vpmaddubsw's 16-bit pair sums saturate above 32767,
// so codes below 64 (every type with bias < 128: at most 2 * 63 * 127) are used as they are, and
// the bias-128 types (Q8_0, IQ4_NL, IQ4_XS) are turned back into signed values and multiplied with
// the sign trick (|w| x sign(qx, w), at most 2 * 128 * 127), as ggml's AVX2 vec_dot does; they need
// no bias correction. With VNNI one vpdpbusd takes any u8 x s8 quad into a 32-bit sum: every type
// runs as biased unsigned codes plus the correction corr = -bias * sum q (the avx512 arithmetic),
// one instruction a quad where the plain set spends two or three (five with the sign trick).
#pragma once

#include <immintrin.h>

#include "cpu/ggml/native_kernels.hpp"

namespace mixq::cpu::ggml {
namespace {  // NOLINT: per-ISA copies on purpose (see above)

// Weight stream prefetch (M <= 4), as in the avx512 set: into L2 far ahead (one core's DRAM
// stream needs more lines in flight than the L1's fill buffers hold), into L1 just ahead.
constexpr int kPrefetchL1Bytes = 2048;
constexpr int kPrefetchL2Bytes = 16384;

template <GgmlType T, bool VNNI>
struct K256 {
  static constexpr Format F = FormatOf<T>::f;
  static constexpr int kSpans = F.qk / 32;
  static constexpr int kSubPerSpan = 32 / F.sub;
  static constexpr int kQuadsPerSub = F.sub / 4;
  // The bias-128 types multiplied with the sign trick (vpmaddubsw); with VNNI every type is
  // multiplied as biased unsigned codes and corrected by corr = -bias * sum q, as on avx512.
  static constexpr bool kSigned = F.bias == 128 && !VNNI;

  static inline __m256i ld(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

  // The 8 registers (4 k x 8 rows) of span s, half hf (byte offset 32 * hf in each line).
  static inline void span(const uint8_t* rec, int s, int hf, __m256i u[8]) {
    const int o = 32 * hf;
    if constexpr (F.lb == 8) {
      for (int i = 0; i < 8; ++i) u[i] = ld(rec + (8 * s + i) * 64 + o);
    } else if constexpr (F.lb == 4) {
      const __m256i m = _mm256_set1_epi8(0x0F);
      for (int i = 0; i < 4; ++i) {
        const __m256i v = ld(rec + (4 * s + i) * 64 + o);
        u[2 * i] = _mm256_and_si256(v, m);
        u[2 * i + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
      }
    } else {
      const __m256i m = _mm256_set1_epi8(3);
      for (int i = 0; i < 2; ++i) {
        const __m256i v = ld(rec + (2 * s + i) * 64 + o);
        u[4 * i] = _mm256_and_si256(v, m);
        u[4 * i + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 2), m);
        u[4 * i + 2] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
        u[4 * i + 3] = _mm256_and_si256(_mm256_srli_epi16(v, 6), m);
      }
    }
    if constexpr (F.hb == 1) {
      const __m256i h = ld(rec + F.off_hi() + s * 64 + o);
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << F.lb));
      for (int b = 0; b < 8; ++b) {
        const int sh = F.lb - b;
        const __m256i t = sh >= 0 ? _mm256_slli_epi16(h, sh) : _mm256_srli_epi16(h, -sh);
        u[b] = _mm256_or_si256(u[b], _mm256_and_si256(t, bit));
      }
    } else if constexpr (F.hb == 2) {
      const __m256i bits = _mm256_set1_epi8(static_cast<char>(3 << F.lb));
      for (int i = 0; i < 2; ++i) {
        const __m256i h = ld(rec + F.off_hi() + (2 * s + i) * 64 + o);
        for (int b = 0; b < 4; ++b) {
          const int sh = F.lb - 2 * b;
          const __m256i t = sh >= 0 ? _mm256_slli_epi16(h, sh) : _mm256_srli_epi16(h, -sh);
          u[4 * i + b] = _mm256_or_si256(u[4 * i + b], _mm256_and_si256(t, bits));
        }
      }
    }
    if constexpr (F.iq4) {
      const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Biased)));
      for (int i = 0; i < 8; ++i) u[i] = _mm256_shuffle_epi8(tab, u[i]);
    }
  }

  static inline __m256i u8x8(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static inline __m256 int_scale(const uint8_t* rec, int jj, int hf) {
    const uint8_t* s = rec + F.off_sc() + 8 * hf;
    if constexpr (F.sk == ScaleKind::K4) {
      return _mm256_cvtepi32_ps(u8x8(s + jj * 16));
    } else if constexpr (F.sk == ScaleKind::Q2K) {
      return _mm256_cvtepi32_ps(_mm256_and_si256(u8x8(s + jj * 16), _mm256_set1_epi32(15)));
    } else if constexpr (F.sk == ScaleKind::Signed8) {
      return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + jj * 16))));
    } else if constexpr (F.sk == ScaleKind::Q3K) {
      const __m256i lo = u8x8(s + (jj / 2) * 16), hi = u8x8(s + (8 + jj / 4) * 16);
      const __m256i l4 = _mm256_and_si256(_mm256_srli_epi32(lo, 4 * (jj % 2)), _mm256_set1_epi32(15));
      const __m256i h2 = _mm256_and_si256(_mm256_srli_epi32(hi, 2 * (jj % 4)), _mm256_set1_epi32(3));
      return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_or_si256(l4, _mm256_slli_epi32(h2, 4)),
                                                 _mm256_set1_epi32(32)));
    } else {
      return _mm256_set1_ps(1.f);
    }
  }
  static inline __m256 int_min(const uint8_t* rec, int jj, int hf) {
    const uint8_t* s = rec + F.off_sc() + 8 * hf;
    if constexpr (F.sk == ScaleKind::K4) return _mm256_cvtepi32_ps(u8x8(s + (F.n_sub() + jj) * 16));
    else return _mm256_cvtepi32_ps(_mm256_srli_epi32(u8x8(s + jj * 16), 4));
  }
  static inline __m256 f16x8(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }

  // Quads whose vpmaddubsw pair sums are added in 16 bits before one vpmaddwd: a pair sum is at
  // most 2 * max code * 127, so 8 quads of 4-bit codes, 4 of 5-bit and 2 of 6-bit stay under
  // 2^15 (the bias-128 types' sign trick, |w| <= 128, allows one). Saves per quad a vpmaddwd and
  // a vpaddd against one vpaddw. Measured on a 2-core AMD EPYC, one thread (MIXQ_CPU_ISA=avx2,
  // 14336x4096 / 4096x14336): Q4_K 2-8 % and Q5_K 6-11 % faster at M = 1 and 4. Q6_K's M = 1
  // moved by 20 % between builds whose Q6_K code was byte-identical (placement), more than this.
  static constexpr int kMaxCode = (1 << (F.lb + F.hb)) - 1;
  static constexpr int group_quads() {
    if (kSigned || VNNI) return 1;  // (vpdpbusd sums into 32 bits: no 16-bit stage)
    int g = 1;
    while (2 * g <= kQuadsPerSub && kQuadsPerSub % (2 * g) == 0 && 2 * g * 2 * kMaxCode * 127 <= 32767) g *= 2;
    return g;
  }
  static constexpr int kGroup = group_quads();

  // acc + the dot products of kGroup quads u[0 .. kGroup) (4 k x 8 rows each) with the activation
  // codes x[0 .. 4 kGroup)
  static inline __m256i dot_group(__m256i acc, const __m256i* u, const int8_t* x) {
    if constexpr (kGroup == 1) {
      int32_t x4;
      __builtin_memcpy(&x4, x, 4);
      return dot4(acc, u[0], x4);
    } else {
      __m256i p = _mm256_setzero_si256();
      for (int i = 0; i < kGroup; ++i) {
        int32_t x4;
        __builtin_memcpy(&x4, x + 4 * i, 4);
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u[i], _mm256_set1_epi32(x4)));
      }
      return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
    }
  }

  static inline __m256i dot4(__m256i acc, __m256i u, int32_t x4) {
    const __m256i x = _mm256_set1_epi32(x4);
    const __m256i ones = _mm256_set1_epi16(1);
    if constexpr (VNNI) {
      return _mm256_dpbusd_avx_epi32(acc, u, x);
    } else if constexpr (kSigned) {
      const __m256i w = _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80)));
      return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w),
                                                                          _mm256_sign_epi8(x, w)), ones));
    } else {
      return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), ones));
    }
  }

  // Rows [m0, m0 + MR) against the panel's 8-row halves hf0 .. hf0 + NH - 1 (a ymm holds 8 rows x
  // 4 k, half a record line). NH = 2 walks both halves in one pass over the records, so the
  // weights stream once; NH = 1 (4 rows: two halves' accumulators would not fit the 16 registers)
  // walks the records once per half, the second pass from L2.
  template <int MR, int NH>
  static void tile(const I8TileArgs& a, int m0, int hf0) {
    constexpr bool kPerSub = F.n_sub() > 1 || F.sk == ScaleKind::Signed8;
    const int64_t rb = a.w->record_bytes;
    const uint8_t* rec = a.w->panel(a.panel) + a.kb0 * rb;
    __m256 acc[NH][MR];
    for (int g = 0; g < NH; ++g)
      for (int m = 0; m < MR; ++m)
        acc[g][m] = a.accumulate ? _mm256_loadu_ps(a.c + (m0 + m) * a.ldc + 8 * (hf0 + g)) : _mm256_setzero_ps();
    const bool prefetch = m0 == 0 && hf0 == 0;
    for (int64_t kb = a.kb0; kb < a.kb1; ++kb, rec += rb) {
      // (one span a record: its lines at once, into L1 as well where asked; else the L2 lines a
      // slice per span, below)
      if (prefetch && (kSpans == 1 || a.prefetch_l1))
        for (int64_t o = 0; o < rb; o += 64) {
          if (a.prefetch_l1)
            _mm_prefetch(reinterpret_cast<const char*>(rec) + kPrefetchL1Bytes + o, _MM_HINT_T0);
          if (kSpans == 1) _mm_prefetch(reinterpret_cast<const char*>(rec) + kPrefetchL2Bytes + o, _MM_HINT_T1);
        }
      __m256 sb[NH][MR], mn[NH][MR];
      if constexpr (kPerSub)
        for (int g = 0; g < NH; ++g)
          for (int m = 0; m < MR; ++m) sb[g][m] = mn[g][m] = _mm256_setzero_ps();
      for (int s = 0; s < kSpans; ++s) {
        if (prefetch && kSpans > 1) {
          const PrefetchSlice sl = prefetch_slice(rb, s, kSpans);
          for (int64_t o = sl.begin; o < sl.end; o += 64)
            _mm_prefetch(reinterpret_cast<const char*>(rec) + kPrefetchL2Bytes + o, _MM_HINT_T1);
        }
        for (int g = 0; g < NH; ++g) {
          const int hf = hf0 + g;
          __m256i u[8];
          span(rec, s, hf, u);
          for (int h = 0; h < kSubPerSpan; ++h) {
            const int jj = s * kSubPerSpan + h;
            const int64_t j = kb * F.n_sub() + jj;
            const int64_t k = kb * F.qk + jj * F.sub;
            __m256i ia[MR];
            for (int m = 0; m < MR; ++m)
              ia[m] = (F.bias && !kSigned) ? _mm256_set1_epi32(a.corr[(m0 + m) * a.ldj + j]) : _mm256_setzero_si256();
            for (int t = 0; t < kQuadsPerSub; t += kGroup)
              for (int m = 0; m < MR; ++m)
                ia[m] = dot_group(ia[m], &u[h * kQuadsPerSub + t], a.q + (m0 + m) * a.ldq + k + 4 * t);
            if constexpr (!kPerSub) {
              const __m256 d = f16x8(rec + F.off_d() + 16 * hf);
              for (int m = 0; m < MR; ++m)
                acc[g][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[m]),
                                            _mm256_mul_ps(d, _mm256_set1_ps(a.dxs[(m0 + m) * a.ldj + j])), acc[g][m]);
              if constexpr (F.sk == ScaleKind::Affine) {
                const __m256 dm = f16x8(rec + F.off_dm() + 16 * hf);
                for (int m = 0; m < MR; ++m)
                  acc[g][m] = _mm256_fmadd_ps(dm, _mm256_set1_ps(a.xs[(m0 + m) * a.ldj + j]), acc[g][m]);
              }
            } else {
              const __m256 sc = int_scale(rec, jj, hf);
              for (int m = 0; m < MR; ++m)
                sb[g][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[m]),
                                           _mm256_mul_ps(sc, _mm256_set1_ps(a.dxs[(m0 + m) * a.ldj + j])), sb[g][m]);
              if constexpr (F.sk == ScaleKind::K4 || F.sk == ScaleKind::Q2K) {
                const __m256 mv = int_min(rec, jj, hf);
                for (int m = 0; m < MR; ++m)
                  mn[g][m] = _mm256_fmadd_ps(mv, _mm256_set1_ps(a.xs[(m0 + m) * a.ldj + j]), mn[g][m]);
              }
            }
          }
        }
      }
      if constexpr (kPerSub) {
        for (int g = 0; g < NH; ++g) {
          const __m256 d = f16x8(rec + F.off_d() + 16 * (hf0 + g));
          for (int m = 0; m < MR; ++m) acc[g][m] = _mm256_fmadd_ps(sb[g][m], d, acc[g][m]);
          if constexpr (F.sk == ScaleKind::K4 || F.sk == ScaleKind::Q2K) {
            const __m256 dm = f16x8(rec + F.off_dm() + 16 * (hf0 + g));
            for (int m = 0; m < MR; ++m) acc[g][m] = _mm256_fnmadd_ps(mn[g][m], dm, acc[g][m]);
          }
        }
      }
    }
    for (int g = 0; g < NH; ++g)
      for (int m = 0; m < MR; ++m) _mm256_storeu_ps(a.c + (m0 + m) * a.ldc + 8 * (hf0 + g), acc[g][m]);
  }

  // Four rows a tile, then the rest in one pass over both halves. The register tile's weight
  // registers (and Q8_0 / IQ4's sign-trick operands) serve every row of the tile, and each pass
  // re-reads the records from L2. Against the earlier pairs (two rows, one half a pass: four passes
  // at M = 4, two at M = 2-3), on a 2-core AVX2-only AMD EPYC, one thread, the six GGUF types x
  // four Llama layers, best of 3 alternating runs: M = 4 1.22x (geomean; Q8_0 1.21-1.33x), M = 2
  // 1.22x (IQ4_XS even), M = 3 1.26x.
  static void i8_tile(const I8TileArgs& a) {
    int m = 0;
    for (; m + 4 <= a.rows; m += 4)
      for (int hf = 0; hf < 2; ++hf) tile<4, 1>(a, m, hf);
    switch (a.rows - m) {
      case 3: tile<3, 2>(a, m, 0); break;
      case 2: tile<2, 2>(a, m, 0); break;
      case 1: tile<1, 2>(a, m, 0); break;
      default: break;
    }
  }

  // Prefill form (DecodedChunk), both halves of every line; bias-128 codes stored signed
  // (u ^ 0x80) for the sign trick of native_prefill_avx2_body.hpp (plain AVX2 only).
  static void decode_i8(const NativeWeight& w, int64_t p, int64_t kb0, int64_t kb1, uint8_t* codes,
                        float* sv, float* ov) {
    const int64_t rb = w.record_bytes;
    const uint8_t* rec = w.panel(p) + kb0 * rb;
    for (int64_t kb = kb0; kb < kb1; ++kb, rec += rb) {
      for (int hf = 0; hf < 2; ++hf) {
        for (int s = 0; s < kSpans; ++s) {
          __m256i u[8];
          span(rec, s, hf, u);
          for (int i = 0; i < 8; ++i) {
            if constexpr (kSigned) u[i] = _mm256_xor_si256(u[i], _mm256_set1_epi8(static_cast<char>(0x80)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + (8 * s + i) * 64 + 32 * hf), u[i]);
          }
        }
        const __m256 d = f16x8(rec + F.off_d() + 16 * hf);
        for (int jj = 0; jj < F.n_sub(); ++jj) {
          float* sj = sv + jj * 16 + 8 * hf;
          if constexpr (F.sk == ScaleKind::Single || F.sk == ScaleKind::Affine) {
            _mm256_storeu_ps(sj, d);
          } else {
            _mm256_storeu_ps(sj, _mm256_mul_ps(d, int_scale(rec, jj, hf)));
          }
          if constexpr (F.sk == ScaleKind::Affine) {
            _mm256_storeu_ps(ov + jj * 16 + 8 * hf, f16x8(rec + F.off_dm() + 16 * hf));
          } else if constexpr (F.sk == ScaleKind::K4 || F.sk == ScaleKind::Q2K) {
            const __m256 t = _mm256_mul_ps(f16x8(rec + F.off_dm() + 16 * hf), int_min(rec, jj, hf));
            _mm256_storeu_ps(ov + jj * 16 + 8 * hf, _mm256_sub_ps(_mm256_setzero_ps(), t));
          }
        }
      }
      codes += F.qk * 16;
      sv += F.n_sub() * 16;
      if constexpr (F.has_min()) ov += F.n_sub() * 16;
    }
  }

  static void decode_f32_t(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, float* out) {
    const int64_t rb = w.record_bytes;
    const uint8_t* rec = w.panel(p) + kb0 * rb;
    const __m256i bias = _mm256_set1_epi32(F.bias), ff = _mm256_set1_epi32(0xFF);
    for (int64_t kb = 0; kb < nb; ++kb, rec += rb) {
      float* o = out + kb * F.qk * 16;
      for (int hf = 0; hf < 2; ++hf) {
        const __m256 d = f16x8(rec + F.off_d() + 16 * hf);
        for (int s = 0; s < kSpans; ++s) {
          __m256i u[8];
          span(rec, s, hf, u);
          for (int h = 0; h < kSubPerSpan; ++h) {
            const int jj = s * kSubPerSpan + h;
            __m256 sv = d, ov = _mm256_setzero_ps();
            if constexpr (F.sk == ScaleKind::Affine) {
              ov = f16x8(rec + F.off_dm() + 16 * hf);
            } else if constexpr (F.sk == ScaleKind::K4 || F.sk == ScaleKind::Q2K) {
              sv = _mm256_mul_ps(d, int_scale(rec, jj, hf));
              const __m256 t = _mm256_mul_ps(f16x8(rec + F.off_dm() + 16 * hf), int_min(rec, jj, hf));
              ov = _mm256_xor_ps(t, _mm256_set1_ps(-0.f));
            } else if constexpr (F.sk != ScaleKind::Single) {
              sv = _mm256_mul_ps(d, int_scale(rec, jj, hf));
            }
            for (int t = 0; t < kQuadsPerSub; ++t) {
              const __m256i v = u[h * kQuadsPerSub + t];
              for (int b = 0; b < 4; ++b) {
                const __m256i e = _mm256_sub_epi32(_mm256_and_si256(_mm256_srli_epi32(v, 8 * b), ff), bias);
                __m256 wv = _mm256_mul_ps(sv, _mm256_cvtepi32_ps(e));
                if constexpr (F.has_min()) wv = _mm256_add_ps(wv, ov);
                _mm256_storeu_ps(o + (jj * F.sub + 4 * t + b) * 16 + 8 * hf, wv);
              }
            }
          }
        }
      }
    }
  }
};

template <bool VNNI>
struct TileFn {
  const I8TileArgs& a;
  template <GgmlType T> void operator()() const { K256<T, VNNI>::i8_tile(a); }
};
template <bool VNNI>
void i8_tile_avx2_t(const I8TileArgs& a) { dispatch_type(a.w->type, TileFn<VNNI>{a}); }

template <bool VNNI>
struct DecodeI8Fn {
  const NativeWeight& w; int64_t p, kb0, kb1; uint8_t* codes; float* s; float* o;
  template <GgmlType T> void operator()() const { K256<T, VNNI>::decode_i8(w, p, kb0, kb1, codes, s, o); }
};
template <bool VNNI>
void decode_i8_avx2_t(const NativeWeight& w, int64_t p, int64_t kb0, int64_t kb1, uint8_t* codes,
                      float* s, float* o) {
  dispatch_type(w.type, DecodeI8Fn<VNNI>{w, p, kb0, kb1, codes, s, o});
}

template <bool VNNI>
struct DecodeFn {
  const NativeWeight& w; int64_t p, kb0, nb; float* out;
  template <GgmlType T> void operator()() const { K256<T, VNNI>::decode_f32_t(w, p, kb0, nb, out); }
};
template <bool VNNI>
void decode_f32_t_avx2_t(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, float* out) {
  dispatch_type(w.type, DecodeFn<VNNI>{w, p, kb0, nb, out});
}

// ggml's q8_0 arithmetic, 8 floats at a time (round half away from zero done exactly: truncate,
// then add the sign where |x - trunc| >= 0.5): the scalar reference's codes bit for bit.
void quantize_row_avx2(const float* x, int64_t K, int sub, int bias, int8_t* q, float* dxs,
                       int32_t* corr, float* xs) {
  const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.f), sgn = _mm256_set1_ps(-0.f);
  for (int64_t b = 0; b < K; b += 32) {
    __m256 xv[4], mx = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      xv[i] = _mm256_loadu_ps(x + b + 8 * i);
      mx = _mm256_max_ps(mx, _mm256_and_ps(xv[i], absm));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const float d = _mm_cvtss_f32(m4) / 127.f;
    const __m256 id = _mm256_set1_ps(d != 0.f ? 1.f / d : 0.f);
    int32_t qs[32];
    for (int i = 0; i < 4; ++i) {
      const __m256 v = _mm256_mul_ps(xv[i], id);
      __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m256 up = _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(v, t), absm), half, _CMP_GE_OQ);
      const __m256 sg = _mm256_or_ps(_mm256_and_ps(v, sgn), one);
      t = _mm256_add_ps(t, _mm256_and_ps(up, sg));
      t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-127.f)), _mm256_set1_ps(127.f));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 8 * i), _mm256_cvtps_epi32(t));
    }
    for (int i = 0; i < 32; ++i) q[b + i] = static_cast<int8_t>(qs[i]);
    for (int h = 0; h < 32 / sub; ++h) {
      const int64_t j = (b + h * sub) / sub;
      int32_t sq = 0;
      float sx = 0.f;
      for (int i = 0; i < sub; ++i) {
        sq += qs[h * sub + i];
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
