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

constexpr int kMaxRows = kPackRows;  // register tile: 8 accumulators + 8 int32 sums

// acc += w . (the 4 bytes at p, broadcast to every lane), the broadcast embedded in the
// instruction's memory operand: one fused uop, where the intrinsics give a separate
// vpbroadcastd.
inline void dpbusd_bcast(__m512i& acc, __m512i w, const int8_t* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
}

// Rows [g * kPackRows, + MR) of the packed activations (one group) against the chunk.
template <int SUB, bool MIN, int MR>
void tile(const I8TileArgs& a, const DecodedChunk& d, int64_t g) {
  const __m512 magicf = _mm512_castsi512_ps(_mm512_set1_epi32(kSumMagicBits));
  // [K / 4][kPackRows][4] codes and [nj][kPackRows] per-sub-block arrays of this group (named
  // variables, not a structured binding: the lambdas below capture them, which C++17 does not
  // allow for bindings and clang refuses)
  const PackedGroup pg = packed_group<SUB>(a, g);
  const int64_t nsub = pg.nsub;
  const int8_t* q = pg.q;
  const float *dxs = pg.dxs, *xs = pg.xs;
  const int32_t* corr = pg.corr;
  float* c = pg.c;
  __m512 acc[MR];
  for (int m = 0; m < MR; ++m) acc[m] = a.accumulate ? _mm512_loadu_ps(c + m * a.ldc) : _mm512_setzero_ps();
  const uint8_t* u = d.codes;
  // Sub-block jl's int32 sums of the tile's rows, started at corr (bias correction + magic).
  auto dots = [&](int64_t jl, __m512i ia[MR]) {
    for (int m = 0; m < MR; ++m) ia[m] = _mm512_set1_epi32(corr[jl * kPackRows + m]);
    const int8_t* qj = q + jl * SUB * kPackRows;
#pragma GCC unroll 8
    for (int t = 0; t < SUB / 4; ++t, u += 64) {
      const __m512i w = _mm512_loadu_si512(u);
      for (int m = 0; m < MR; ++m) dpbusd_bcast(ia[m], w, qj + (t * kPackRows + m) * 4);
    }
  };
  auto sum_f32 = [&](__m512i v) { return _mm512_sub_ps(_mm512_castsi512_ps(v), magicf); };
  for (int64_t jl = 0; jl < nsub; jl += 32 / SUB) {
    __m512i ia[MR];
    if constexpr (SUB == 16) {
      // Both halves of a 32-k span share the activations' dx: scale them in f32 first, then
      // apply dx once (one multiply per row and span saved).
      __m512 fs[MR];
      dots(jl, ia);
      const __m512 s0 = _mm512_loadu_ps(d.s + jl * 16);
      for (int m = 0; m < MR; ++m) fs[m] = _mm512_mul_ps(sum_f32(ia[m]), s0);
      dots(jl + 1, ia);
      const __m512 s1 = _mm512_loadu_ps(d.s + (jl + 1) * 16);
      for (int m = 0; m < MR; ++m) {
        fs[m] = _mm512_fmadd_ps(sum_f32(ia[m]), s1, fs[m]);
        acc[m] = _mm512_fmadd_ps(fs[m], _mm512_set1_ps(dxs[jl * kPackRows + m]), acc[m]);
      }
    } else {
      dots(jl, ia);
      const __m512 s = _mm512_loadu_ps(d.s + jl * 16);
      for (int m = 0; m < MR; ++m)
        acc[m] = _mm512_fmadd_ps(sum_f32(ia[m]), _mm512_mul_ps(s, _mm512_set1_ps(dxs[jl * kPackRows + m])),
                                 acc[m]);
    }
    if constexpr (MIN) {
      for (int h = 0; h < 32 / SUB; ++h) {
        const __m512 o = _mm512_loadu_ps(d.o + (jl + h) * 16);
        for (int m = 0; m < MR; ++m)
          acc[m] = _mm512_fmadd_ps(o, _mm512_set1_ps(xs[(jl + h) * kPackRows + m]), acc[m]);
      }
    }
  }
  for (int m = 0; m < MR; ++m) _mm512_storeu_ps(c + m * a.ldc, acc[m]);
}

// Two panels: each activation broadcast feeds two code registers, so a row group keeps 16
// independent vpdpbusd chains in flight (8 chains of 5-cycle latency cap the port pair at 1.6
// per cycle) and loads one broadcast per two dot products. The 16 int32 sums take 16 registers,
// so the f32 outputs accumulate in c (L1, one load and store per row, panel and sub-block).
template <int SUB, bool MIN, int MR>
void tile2(const I8TileArgs& a, const DecodedChunk* d, int64_t g) {
  const __m512 magicf = _mm512_castsi512_ps(_mm512_set1_epi32(kSumMagicBits));
  const auto [nsub, q, dxs, corr, xs, c] = packed_group<SUB>(a, g);
  if (!a.accumulate)
    for (int m = 0; m < MR; ++m) {
      _mm512_storeu_ps(c + m * a.ldc, _mm512_setzero_ps());
      _mm512_storeu_ps(c + m * a.ldc + 16, _mm512_setzero_ps());
    }
  const uint8_t* u0 = d[0].codes;
  const uint8_t* u1 = d[1].codes;
  for (int64_t jl = 0; jl < nsub; ++jl) {
    __m512i i0[MR], i1[MR];
    for (int m = 0; m < MR; ++m) i0[m] = i1[m] = _mm512_set1_epi32(corr[jl * kPackRows + m]);
    const int8_t* qj = q + jl * SUB * kPackRows;
#pragma GCC unroll 8
    for (int t = 0; t < SUB / 4; ++t, u0 += 64, u1 += 64) {
      const __m512i w0 = _mm512_loadu_si512(u0), w1 = _mm512_loadu_si512(u1);
      for (int m = 0; m < MR; ++m) {
        int32_t x4;
        std::memcpy(&x4, qj + (t * kPackRows + m) * 4, 4);
        const __m512i xb = _mm512_set1_epi32(x4);
        i0[m] = _mm512_dpbusd_epi32(i0[m], w0, xb);
        i1[m] = _mm512_dpbusd_epi32(i1[m], w1, xb);
      }
    }
    const __m512 s0 = _mm512_loadu_ps(d[0].s + jl * 16), s1 = _mm512_loadu_ps(d[1].s + jl * 16);
    for (int m = 0; m < MR; ++m) {
      const __m512 dx = _mm512_set1_ps(dxs[jl * kPackRows + m]);
      float* cm = c + m * a.ldc;
      __m512 c0 = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_castsi512_ps(i0[m]), magicf), _mm512_mul_ps(s0, dx),
                                  _mm512_loadu_ps(cm));
      __m512 c1 = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_castsi512_ps(i1[m]), magicf), _mm512_mul_ps(s1, dx),
                                  _mm512_loadu_ps(cm + 16));
      if constexpr (MIN) {
        const __m512 xv = _mm512_set1_ps(xs[jl * kPackRows + m]);
        c0 = _mm512_fmadd_ps(_mm512_loadu_ps(d[0].o + jl * 16), xv, c0);
        c1 = _mm512_fmadd_ps(_mm512_loadu_ps(d[1].o + jl * 16), xv, c1);
      }
      _mm512_storeu_ps(cm, c0);
      _mm512_storeu_ps(cm + 16, c1);
    }
  }
}

template <int SUB, bool MIN>
void rows2(const I8TileArgs& a, const DecodedChunk* d) {
  int64_t g = 0;
  for (; (g + 1) * kMaxRows <= a.rows; ++g) tile2<SUB, MIN, kMaxRows>(a, d, g);
  switch (a.rows - g * kMaxRows) {
    case 7: tile2<SUB, MIN, 7>(a, d, g); break;
    case 6: tile2<SUB, MIN, 6>(a, d, g); break;
    case 5: tile2<SUB, MIN, 5>(a, d, g); break;
    case 4: tile2<SUB, MIN, 4>(a, d, g); break;
    case 3: tile2<SUB, MIN, 3>(a, d, g); break;
    case 2: tile2<SUB, MIN, 2>(a, d, g); break;
    case 1: tile2<SUB, MIN, 1>(a, d, g); break;
    default: break;
  }
}

template <int SUB, bool MIN>
void rows(const I8TileArgs& a, const DecodedChunk& d) {
  int64_t g = 0;
  for (; (g + 1) * kMaxRows <= a.rows; ++g) tile<SUB, MIN, kMaxRows>(a, d, g);
  switch (a.rows - g * kMaxRows) {
    case 7: tile<SUB, MIN, 7>(a, d, g); break;
    case 6: tile<SUB, MIN, 6>(a, d, g); break;
    case 5: tile<SUB, MIN, 5>(a, d, g); break;
    case 4: tile<SUB, MIN, 4>(a, d, g); break;
    case 3: tile<SUB, MIN, 3>(a, d, g); break;
    case 2: tile<SUB, MIN, 2>(a, d, g); break;
    case 1: tile<SUB, MIN, 1>(a, d, g); break;
    default: break;
  }
}

}  // namespace

void i8_tile_decoded_avx512(const I8TileArgs& a, const DecodedChunk* d, int panels) {
  const bool mins = d[0].o != nullptr;
  if (panels == 2) {
    if (a.w->fmt.sub == 16) {
      mins ? rows2<16, true>(a, d) : rows2<16, false>(a, d);
    } else {
      mins ? rows2<32, true>(a, d) : rows2<32, false>(a, d);
    }
    return;
  }
  if (a.w->fmt.sub == 16) {
    mins ? rows<16, true>(a, d[0]) : rows<16, false>(a, d[0]);
  } else {
    mins ? rows<32, true>(a, d[0]) : rows<32, false>(a, d[0]);
  }
}

}  // namespace mixq::cpu::ggml
