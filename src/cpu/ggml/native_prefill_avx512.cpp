// AVX-512 VNNI integer tile over a DecodedChunk: the prefill path (more than one register tile of
// activation rows per task). The chunk was decoded once for the task, so every register tile
// only loads a 64-byte code register and issues one vpdpbusd per activation row; the work per
// 4 k that does not scale with the rows (the 5th / 6th bit merge, the IQ4 codebook, the scale
// decode) is gone from the loop.
//
// Port budget (Sapphire Rapids, and Ice Lake alike): 512-bit vpdpbusd issues on port 0 only, the
// f32 add / mul / fma on ports 0 and 5, so the sums become f32 through kSumMagicBits (one vsubps)
// rather than vcvtdq2ps (port 0): port 0 carries the dot products.
#include <immintrin.h>

#include <cstring>

#include "cpu/ggml/native_prefill.hpp"

namespace mixq::cpu::ggml {

namespace {

constexpr int kMaxRows = 8;             // register tile: 8 accumulators + 8 int32 sums

template <int SUB, bool MIN, int MR>
void tile(const I8TileArgs& a, const DecodedChunk& d, int m0) {
  const Format& f = a.w->fmt;
  const int64_t per_block = f.qk / SUB;
  const int64_t nsub = (a.kb1 - a.kb0) * per_block;
  const int64_t j0 = a.kb0 * per_block, k0 = a.kb0 * f.qk;
  const __m512 magicf = _mm512_castsi512_ps(_mm512_set1_epi32(kSumMagicBits));
  const int8_t* q[MR];
  const float* dxs[MR];
  const int32_t* corr[MR];
  const float* xs[MR];
  __m512 acc[MR];
  for (int m = 0; m < MR; ++m) {
    q[m] = a.q + (m0 + m) * a.ldq + k0;
    dxs[m] = a.dxs + (m0 + m) * a.ldj + j0;
    corr[m] = a.corr + (m0 + m) * a.ldj + j0;
    xs[m] = a.xs + (m0 + m) * a.ldj + j0;
    acc[m] = a.accumulate ? _mm512_loadu_ps(a.c + (m0 + m) * a.ldc) : _mm512_setzero_ps();
  }
  const uint8_t* u = d.codes;
  for (int64_t jl = 0; jl < nsub; ++jl) {
    __m512i ia[MR];
    for (int m = 0; m < MR; ++m) ia[m] = _mm512_set1_epi32(corr[m][jl]);
    for (int t = 0; t < SUB / 4; ++t, u += 64) {
      const __m512i w = _mm512_loadu_si512(u);
      for (int m = 0; m < MR; ++m) {
        int32_t x4;
        std::memcpy(&x4, q[m] + jl * SUB + 4 * t, 4);
        ia[m] = _mm512_dpbusd_epi32(ia[m], w, _mm512_set1_epi32(x4));
      }
    }
    const __m512 s = _mm512_loadu_ps(d.s + jl * 16);
    for (int m = 0; m < MR; ++m)
      acc[m] = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_castsi512_ps(ia[m]), magicf),
                               _mm512_mul_ps(s, _mm512_set1_ps(dxs[m][jl])), acc[m]);
    if constexpr (MIN) {
      const __m512 o = _mm512_loadu_ps(d.o + jl * 16);
      for (int m = 0; m < MR; ++m) acc[m] = _mm512_fmadd_ps(o, _mm512_set1_ps(xs[m][jl]), acc[m]);
    }
  }
  for (int m = 0; m < MR; ++m) _mm512_storeu_ps(a.c + (m0 + m) * a.ldc, acc[m]);
}

template <int SUB, bool MIN>
void rows(const I8TileArgs& a, const DecodedChunk& d) {
  int m = 0;
  for (; m + kMaxRows <= a.rows; m += kMaxRows) tile<SUB, MIN, kMaxRows>(a, d, m);
  switch (a.rows - m) {
    case 7: tile<SUB, MIN, 7>(a, d, m); break;
    case 6: tile<SUB, MIN, 6>(a, d, m); break;
    case 5: tile<SUB, MIN, 5>(a, d, m); break;
    case 4: tile<SUB, MIN, 4>(a, d, m); break;
    case 3: tile<SUB, MIN, 3>(a, d, m); break;
    case 2: tile<SUB, MIN, 2>(a, d, m); break;
    case 1: tile<SUB, MIN, 1>(a, d, m); break;
    default: break;
  }
}

}  // namespace

void i8_tile_decoded_avx512(const I8TileArgs& a, const DecodedChunk& d) {
  const bool mins = d.o != nullptr;
  if (a.w->fmt.sub == 16) {
    mins ? rows<16, true>(a, d) : rows<16, false>(a, d);
  } else {
    mins ? rows<32, true>(a, d) : rows<32, false>(a, d);
  }
}

}  // namespace mixq::cpu::ggml
