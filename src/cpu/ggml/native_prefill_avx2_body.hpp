// AVX2 integer tile over a DecodedChunk (the prefill path of the avx2 and avx2vnni sets, compiled
// by each of their files: see native_kernels_avx2_body.hpp): each 64-byte line of codes is two ymm
// halves (rows 0-7, rows 8-15).
//
// Plain AVX2: u8 x s8 products go through vpmaddubsw + vpmaddwd. For codes below 2^b (every type
// whose bias is under 128) the 16-bit pair sums of G quads are added before one vpmaddwd widens
// them, G as large as a sub-block allows without saturation (a pair sums at most
// 2 x (2^b - 1) x 127: G = 8 for 4-bit codes, 4 for 5-bit, 2 for 6-bit): vpmaddubsw and vpmaddwd
// share the multiply pipes, so a 4-bit sub-block of 32 costs 9 multiply-pipe instructions per row
// and half instead of 12 with pairs. The bias-128 types (Q8_0, IQ4_NL, IQ4_XS) are decoded to
// signed values and multiplied as |w| x sign(x, w) (at most 2 x 128 x 127 per pair), ggml's AVX2
// trick, one quad at a time.
// AVX-VNNI: one vpdpbusd a quad and row into the 32-bit sums, started at the row's correction
// (-bias * sum q) for every biased type, the bias-128 ones included (decoded unsigned).
// Registers: 4 rows x one half of int32 sums (and of 16-bit group sums), two code lines; the f32
// outputs accumulate in c (L1).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/ggml/native_kernels.hpp"

namespace mixq::cpu::ggml {
namespace {  // NOLINT: per-ISA copies on purpose (native_kernels_avx2_body.hpp)

constexpr int kRows = 4;

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// G: quads whose 16-bit pair sums are added before widening (unsigned codes; a multiple of 2
// dividing SUB / 4). BIAS: the codes carry a bias (the sums start at the row's correction
// -bias * sum q; the K-quants with mins and Q4_1 / Q5_1 have none).
template <int SUB, bool MIN, bool SIGNED, int G, bool BIAS, int MR, bool VNNI>
void tile(const I8TileArgs& a, const DecodedChunk& d, int64_t g, int r0) {
  static_assert(SIGNED || VNNI || (G >= 2 && G % 2 == 0 && (SUB / 4) % G == 0),
                "G: pairs of quads within a sub-block");
  static_assert(!(SIGNED && VNNI), "VNNI multiplies the bias-128 codes unsigned");
  // Rows r0 .. r0 + MR of group g: lane r0 + m of the packed arrays.
  const auto [nsub, q, dxs, corr, xs, c] = packed_group<SUB>(a, g, r0);
  if (!a.accumulate)
    for (int m = 0; m < MR; ++m) {
      _mm256_storeu_ps(c + m * a.ldc, _mm256_setzero_ps());
      _mm256_storeu_ps(c + m * a.ldc + 8, _mm256_setzero_ps());
    }
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t jl = 0; jl < nsub; ++jl) {
    const uint8_t* u = d.codes + jl * SUB * 16;
    const int8_t* qj = q + jl * SUB * kPackRows;
    for (int hf = 0; hf < 2; ++hf) {
      // unsigned codes: ia starts at the first group's end (corr plus its widened sums), so that
      // one group per sub-block keeps only the 16-bit sums live in the loop (16 ymm registers)
      __m256i ia[MR], ps[MR];
      for (int m = 0; m < MR; ++m) ia[m] = ps[m] = _mm256_setzero_si256();  // (dead for unsigned codes)
      if constexpr (VNNI && BIAS)
        for (int m = 0; m < MR; ++m) ia[m] = _mm256_set1_epi32(corr[jl * kPackRows + m]);
      // unrolled: the group's first and last pairs are known at compile time
#pragma GCC unroll 8
      for (int t = 0; t < SUB / 4; t += 2) {
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u + t * 64 + 32 * hf));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u + (t + 1) * 64 + 32 * hf));
        if constexpr (VNNI) {
          for (int m = 0; m < MR; ++m) {
            const __m256i x0 = bcast4(qj + (t * kPackRows + m) * 4);
            const __m256i x1 = bcast4(qj + ((t + 1) * kPackRows + m) * 4);
            ia[m] = _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(ia[m], w0, x0), w1, x1);
          }
        } else if constexpr (SIGNED) {
          const __m256i a0 = _mm256_sign_epi8(w0, w0), a1 = _mm256_sign_epi8(w1, w1);
          for (int m = 0; m < MR; ++m) {
            const __m256i x0 = bcast4(qj + (t * kPackRows + m) * 4);
            const __m256i x1 = bcast4(qj + ((t + 1) * kPackRows + m) * 4);
            const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(x0, w0)), ones);
            const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(x1, w1)), ones);
            ia[m] = _mm256_add_epi32(ia[m], _mm256_add_epi32(p0, p1));
          }
        } else {
          // the group's 16-bit sums: started at its first pair, widened after its last
          const bool first = t % G == 0, last = (t + 2) % G == 0;
          for (int m = 0; m < MR; ++m) {
            const __m256i x0 = bcast4(qj + (t * kPackRows + m) * 4);
            const __m256i x1 = bcast4(qj + ((t + 1) * kPackRows + m) * 4);
            const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(w0, x0), _mm256_maddubs_epi16(w1, x1));
            ps[m] = first ? p : _mm256_add_epi16(ps[m], p);
            // pinned: left free, GCC reassociates the group's sums into a tree over every pair's
            // products and spills them (24 ymm spills per sub-block, 30% slower)
            asm("" : "+x"(ps[m]));
            if (last) {
              const __m256i wide = _mm256_madd_epi16(ps[m], ones);
              if (t + 2 == G)
                ia[m] = BIAS ? _mm256_add_epi32(_mm256_set1_epi32(corr[jl * kPackRows + m]), wide) : wide;
              else
                ia[m] = _mm256_add_epi32(ia[m], wide);
            }
          }
        }
      }
      const __m256 s = _mm256_loadu_ps(d.s + jl * 16 + 8 * hf);
      for (int m = 0; m < MR; ++m) {
        float* cm = c + m * a.ldc + 8 * hf;
        __m256 cv = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[m]), _mm256_mul_ps(s, _mm256_set1_ps(dxs[jl * kPackRows + m])),
                                    _mm256_loadu_ps(cm));
        if constexpr (MIN)
          cv = _mm256_fmadd_ps(_mm256_loadu_ps(d.o + jl * 16 + 8 * hf), _mm256_set1_ps(xs[jl * kPackRows + m]), cv);
        _mm256_storeu_ps(cm, cv);
      }
    }
  }
}

template <int SUB, bool MIN, bool SIGNED, int G, bool BIAS, bool VNNI>
void rows(const I8TileArgs& a, const DecodedChunk& d) {
  for (int64_t r = 0; r < a.rows; r += kRows) {
    const int64_t g = r / kPackRows;
    const int r0 = static_cast<int>(r % kPackRows);
    switch (std::min<int64_t>(kRows, a.rows - r)) {
      case 4: tile<SUB, MIN, SIGNED, G, BIAS, 4, VNNI>(a, d, g, r0); break;
      case 3: tile<SUB, MIN, SIGNED, G, BIAS, 3, VNNI>(a, d, g, r0); break;
      case 2: tile<SUB, MIN, SIGNED, G, BIAS, 2, VNNI>(a, d, g, r0); break;
      default: tile<SUB, MIN, SIGNED, G, BIAS, 1, VNNI>(a, d, g, r0); break;
    }
  }
}

// Quads per 16-bit group for unsigned codes of `bits` bits: the most (a power of 2, at most a
// sub-block's SUB / 4) whose pair sums, 2 x (2^bits - 1) x 127 each, stay below 2^15.
constexpr int quad_group(int bits, int sub) {
  int g = 2;
  while (2 * g <= sub / 4 && 2 * g * 2 * ((1 << bits) - 1) * 127 <= 32767) g *= 2;
  return g;
}
static_assert(quad_group(4, 32) == 8 && quad_group(5, 32) == 4 && quad_group(6, 16) == 2 && quad_group(4, 16) == 4 &&
              quad_group(3, 16) == 4 && quad_group(2, 16) == 4, "16-bit group sizes");

template <int SUB, bool MIN, bool VNNI>
void rows_for(const I8TileArgs& a, const DecodedChunk& d) {
  const Format& f = a.w->fmt;
  if constexpr (VNNI) {
    return f.bias ? rows<SUB, MIN, false, 0, true, true>(a, d) : rows<SUB, MIN, false, 0, false, true>(a, d);
  } else {
    if (f.bias == 128) return rows<SUB, MIN, true, 2, true, false>(a, d);
    switch (quad_group(f.lb + f.hb, SUB)) {
      case 8:
        if constexpr (SUB / 4 >= 8)
          return f.bias ? rows<SUB, MIN, false, 8, true, false>(a, d) : rows<SUB, MIN, false, 8, false, false>(a, d);
        break;
      case 4:
        return f.bias ? rows<SUB, MIN, false, 4, true, false>(a, d) : rows<SUB, MIN, false, 4, false, false>(a, d);
      default: break;
    }
    f.bias ? rows<SUB, MIN, false, 2, true, false>(a, d) : rows<SUB, MIN, false, 2, false, false>(a, d);
  }
}

// One panel at a time: the c block of panel i starts 16 floats to the right.
template <bool VNNI>
void i8_tile_decoded_avx2_t(const I8TileArgs& a, const DecodedChunk* d, int panels) {
  for (int i = 0; i < panels; ++i) {
    I8TileArgs ai = a;
    ai.c = a.c + 16 * i;
    const bool mins = d[i].o != nullptr;
    if (a.w->fmt.sub == 16) {
      mins ? rows_for<16, true, VNNI>(ai, d[i]) : rows_for<16, false, VNNI>(ai, d[i]);
    } else {
      mins ? rows_for<32, true, VNNI>(ai, d[i]) : rows_for<32, false, VNNI>(ai, d[i]);
    }
  }
}

}  // namespace
}  // namespace mixq::cpu::ggml
