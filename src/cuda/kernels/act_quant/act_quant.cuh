// Run-time activation quantizer kernels: per-block INT8 (scale, offset, code sums) and
// per-token 1x128 FP8, writing the layout fixed in act_quant.hpp.
//
// Work split: a group of G = block / 16 consecutive lanes owns one (row, K block); each lane owns
// a 16-element chunk (32 bytes of f16/bf16 input, 64 of f32, 16 bytes of codes), so loads and
// the code store are 16-byte vector accesses and a warp reads 512-1024 contiguous bytes of one
// row. The block's min/max/amax and code sum are reduced with xor shuffles inside the group (no
// shared memory); the group's first lane writes the meta values.
//
// Streaming: the grid is persistent (as many CTAs as fit, see launch_persistent) and walks the
// (row, block) groups in bands of rows (Geom: row-major for FP8, 8-row bands for INT8), P pieces of
// 16 elements per lane per step (default 1;
// 2 measured slower on an H100). Each step first issues the 16-byte loads of the NEXT
// step, then quantizes the current one, so every warp keeps its loads in flight while it
// computes; a one-shot thread (load, wait, compute, exit) left the memory pipe idle during the
// compute phase and reached only 45-72% of the copy ceiling. The per-lane (row, block) cursor
// advances by a constant stride (no 64-bit division per chunk).
//
// Bit-exactness with the CPU quantizers (src/core/quantize.cpp) -- fast paths with exact checks:
//  - FP8: s = max(amax, 1e-10f) / 448 is an IEEE division (__fdiv_rn) as on the host. The host
//    code is e(RN(x / s)) with e = e4m3 RNE saturating conversion. Instead of a division per
//    element the kernel brackets the quotient with the directed-rounding reciprocals
//    r_lo = RD(1/s) <= 1/s <= r_hi = RU(1/s): for x >= 0 the reals satisfy
//    x*r_lo <= x/s <= x*r_hi (reversed for x < 0), and RN and e are monotone (non-decreasing)
//    functions, so e(RN(x*r_lo)), e(RN(x/s)), e(RN(x*r_hi)) are ordered and carry x's sign
//    (zeros included: all three values are products/quotients of x with a positive number).
//    Hence if the two outer codes are equal, the host's code equals them. They differ only when
//    x/s lies within ~1 f32 ulp of an e4m3 rounding boundary (a midpoint between adjacent e4m3
//    values, subnormal range and saturation included; ~3e-4 of f16 and ~3e-3 of bf16 elements of
//    normal data): only those bytes are redone with __fdiv_rn. No case analysis of the e4m3
//    format is involved.
//  - INT8: the codes are int8_act_code (mixq/numeric.hpp), an f32 recipe by definition:
//    t = RN(RN(x - o) * RN(1/s)), clamped to [-128, 127], then rounded half to even by adding the
//    magic number 1.5 * 2^23 (t + M is rint(t) in the low mantissa bits, whose low byte is the
//    int8 code in two's complement). Every operation is IEEE-rounded on host and device alike, so
//    no element needs a fix-up. (A double-division definition needed near-tie fix-ups -- 0.8% of
//    f16 and 5% of bf16 16-element chunks -- that held this kernel to 75% / 54% of the copy
//    ceiling: docs/decisions/act-quant-quantizers.md.) The code sum is accumulated exactly from the magic-number
//    bit patterns.
//  - Non-finite inputs: the host quantizers reject them (INT8) or produce NaN codes (FP8); the
//    kernels cannot throw, so an INT8 block holding inf/NaN gets meaningless codes and meta, and
//    FP8 behaves like the host (amax ignores NaN; an inf gives s = inf and NaN codes).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/kernels/common/e4m3_convert.cuh"
#include "cuda/kernels/common/grid_dependency.cuh"
#include "mixq/numeric.hpp"

namespace mixq::cuda::act_quant {


constexpr int kChunk = 16;     // elements per lane and step
constexpr int kThreads = 256;  // per CTA
constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int kMinCtasPerSm = 3;  // launch bounds of both quantizers (see the register caps)
// 16-element pieces per lane for 16-bit input (f32 input: 1), measured on an H100 (see
// docs/decisions/act-quant-quantizers.md); Tuning::act_quant_pieces overrides.
constexpr int kFp8Pieces = 1, kInt8Pieces = 1;
// Task order (Geom): log2 of the rows per band. INT8 writes three meta values per block, which
// row-major order scatters over one 32-byte sector each; 8-row bands fill the sectors.
constexpr int kFp8BandShift = 0, kInt8BandShift = 3;

enum XType : int { kF16 = 0, kBF16 = 1, kF32 = 2 };

// 32-bit words holding one chunk of raw input (16-bit inputs stay packed until used).
template <int XT>
constexpr int raw_words() { return XT == kF32 ? 16 : 8; }
template <int XT>
constexpr int elem_bytes() { return XT == kF32 ? 4 : 2; }

// Loads chunk [c0, c0 + 16) of one row as raw bits; elements at or past K (n_valid) are zero
// bits (+0). A partial chunk or an unaligned row uses scalar loads.
template <int XT>
__device__ __forceinline__ void load_raw(const void* row, int c0, int n_valid, bool vec,
                                         uint32_t (&w)[raw_words<XT>()]) {
  constexpr int W = raw_words<XT>();
  if (vec && n_valid == kChunk) {
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const char*>(row) +
                                                    static_cast<int64_t>(c0) * elem_bytes<XT>());
#pragma unroll
    for (int i = 0; i < W / 4; ++i) {
      const uint4 r = __ldg(p + i);
      w[4 * i + 0] = r.x;
      w[4 * i + 1] = r.y;
      w[4 * i + 2] = r.z;
      w[4 * i + 3] = r.w;
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < W; ++i) {  // each word written once (no zeroing the vector path would pay)
    if constexpr (XT == kF32) {
      w[i] = i < n_valid ? __ldg(static_cast<const unsigned int*>(row) + c0 + i) : 0u;
    } else {
      const unsigned short* r = static_cast<const unsigned short*>(row) + c0 + 2 * i;
      const uint32_t lo = 2 * i < n_valid ? __ldg(r) : 0u;
      const uint32_t hi = 2 * i + 1 < n_valid ? __ldg(r + 1) : 0u;
      w[i] = lo | (hi << 16);
    }
  }
}

template <int XT>
__device__ __forceinline__ void to_float(const uint32_t (&w)[raw_words<XT>()], float (&v)[kChunk]) {
#pragma unroll
  for (int i = 0; i < raw_words<XT>(); ++i) {
    if constexpr (XT == kF32) {
      v[i] = __uint_as_float(w[i]);
    } else if constexpr (XT == kF16) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      v[2 * i] = f.x;
      v[2 * i + 1] = f.y;
    } else {
      v[2 * i] = __uint_as_float(w[i] << 16);
      v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
  }
}

// Stores 16 code bytes (already zero past K) at q_row + c0.
__device__ __forceinline__ void store_chunk(uint8_t* q_row, int c0, bool vec,
                                            const uint32_t (&packed)[4]) {
  if (vec) {
    *reinterpret_cast<uint4*>(q_row + c0) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    return;
  }
#pragma unroll
  for (int j = 0; j < kChunk; ++j) q_row[c0 + j] = static_cast<uint8_t>(packed[j / 4] >> (8 * (j % 4)));
}

using cuda::e4m3x2;
using cuda::e4m3x4;

template <int G>
__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
template <int G>
__device__ __forceinline__ float group_min(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
// W4A8 block factors (act_quant.hpp): the sum of 16 e4m3 codes in units of 2^-9. Every e4m3
// value is a multiple of 2^-9 of at most 448 (229376 units), so the f32 sum of 16 is exact
// (< 2^22 units) and the integer is too: the block's sum does not depend on how lanes split it.
__device__ __forceinline__ int e4m3_units16(const uint32_t (&packed)[4]) {
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const unsigned short two = static_cast<unsigned short>(packed[i] >> (16 * h));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
      uint32_t hv;
      asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(hv) : "h"(two));
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&hv));
      s += f.x + f.y;
#else
      s += e4m3_to_f32(static_cast<uint8_t>(two & 0xFF)) + e4m3_to_f32(static_cast<uint8_t>(two >> 8));
#endif
    }
  return __float2int_rn(s * 512.f);
}
// The factors of one (row, block) from its scale and code sum: 512 s (the W4A8 kernel's MMA sums
// carry the codes u * 2^-9) and -zero s sum(a) (zero: 1, or the zero point that every group of the
// weight shares; -s sum(a) is rounded first, as the fold rounds it when it multiplies a row's zc in).
__device__ __forceinline__ float2 w4a8_factors(float s, int units, float zero) {
  return make_float2(512.f * s, zero * -(s * (static_cast<float>(units) * 0.001953125f)));
}

template <int G>
__device__ __forceinline__ int group_sum(int v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// Rare FP8 paths (a piece past K, a code near an e4m3 boundary): per-element IEEE divisions.

// FP8, piece past K: every element by IEEE division, zero codes beyond n_valid.
__device__ __forceinline__ void fp8_piece_exact(const float (&v)[kChunk], int n_valid, float s,
                                             uint32_t (&packed)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; j += 2) {
      const int e = 4 * i + j;
      const float a = e < n_valid ? __fdiv_rn(v[e], s) : 0.f;
      const float b = e + 1 < n_valid ? __fdiv_rn(v[e + 1], s) : 0.f;
      word |= e4m3x2(a, b) << (8 * j);
    }
    packed[i] = word;
  }
}

// FP8 fast path fix-up: bytes whose bracket straddles an e4m3 boundary get e4m3(x / s).
__device__ __forceinline__ void fp8_fix_straddles(const float (&v)[kChunk], float s,
                                               const uint32_t (&straddle)[4], uint32_t (&packed)[4]) {
#pragma unroll
  for (int j = 0; j < kChunk; ++j) {
    const int sh = 8 * (j % 4);
    if ((straddle[j / 4] >> sh) & 0xFFu) {
      const uint32_t c = e4m3x2(__fdiv_rn(v[j], s), 0.f) & 0xFFu;
      packed[j / 4] = (packed[j / 4] & ~(0xFFu << sh)) | (c << sh);
    }
  }
}

// Max |x|, and min / max of x, over a lane's raw pieces. 16-bit inputs are reduced as packed
// pairs (one HMNMX2 per two elements; f16 / bf16 -> f32 is exact and order-preserving, and like
// fminf / fmaxf the packed min / max ignore a NaN operand).
template <int XT, int P>
__device__ __forceinline__ float raw_amax(const uint32_t (&w)[P][raw_words<XT>()]) {
  if constexpr (XT == kF32) {
    float a = 0.f;
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int i = 0; i < raw_words<XT>(); ++i) a = fmaxf(a, fabsf(__uint_as_float(w[p][i])));
    return a;
  } else if constexpr (XT == kF16) {
    __half2 a = __half2(__ushort_as_half(0), __ushort_as_half(0));
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int i = 0; i < raw_words<XT>(); ++i)
        a = __hmax2(a, __habs2(*reinterpret_cast<const __half2*>(&w[p][i])));
    return fmaxf(__low2float(a), __high2float(a));
  } else {
    __nv_bfloat162 a = __nv_bfloat162(__ushort_as_bfloat16(0), __ushort_as_bfloat16(0));
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int i = 0; i < raw_words<XT>(); ++i)
        a = __hmax2(a, __habs2(*reinterpret_cast<const __nv_bfloat162*>(&w[p][i])));
    return fmaxf(__low2float(a), __high2float(a));
  }
}

template <int XT, int P>
__device__ __forceinline__ void raw_min_max(const uint32_t (&w)[P][raw_words<XT>()], float& lo,
                                            float& hi) {
  if constexpr (XT == kF32) {
    lo = hi = __uint_as_float(w[0][0]);
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int i = 0; i < raw_words<XT>(); ++i) {
        lo = fminf(lo, __uint_as_float(w[p][i]));
        hi = fmaxf(hi, __uint_as_float(w[p][i]));
      }
  } else {
    using T2 = std::conditional_t<XT == kF16, __half2, __nv_bfloat162>;
    T2 l = *reinterpret_cast<const T2*>(&w[0][0]), h = l;
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int i = 0; i < raw_words<XT>(); ++i) {
        l = __hmin2(l, *reinterpret_cast<const T2*>(&w[p][i]));
        h = __hmax2(h, *reinterpret_cast<const T2*>(&w[p][i]));
      }
    lo = fminf(__low2float(l), __high2float(l));
    hi = fmaxf(__low2float(h), __high2float(h));
  }
}

// One lane's task: group (row m, K block kb); the lane owns P pieces of 16 elements, piece p at
// column kb * BLOCK + (p * L + lane) * 16 with L = BLOCK / (16 P) lanes per group.
struct Task {
  int m, kb;
};

// Problem geometry, passed by value (kernel parameters live in constant memory, not registers).
// Groups are ordered in bands of 2^band_shift rows: inside a band, position q is block q >>
// band_shift of row band * 2^band_shift + (q & (2^band_shift - 1)), i.e. the rows of a band
// are adjacent for each block. The meta arrays are [kb][m] (M contiguous), so with 8-row bands
// the lanes that write a block's scale / offset / sum write 8 adjacent floats (one 32-byte
// sector) instead of 8 sectors of 4 bytes each; band_shift = 0 is plain row-major order.
struct Geom {
  int M, K, nb;            // rows, columns, K blocks per row
  int band_shift, bands;   // rows per band (log2), bands = ceil(M / rows per band)
  int dband, dq;           // one grid step = dband bands + dq positions (split by the host)
  int64_t ldx;             // x row stride in elements
  bool vec;                // 16-byte aligned rows: vector loads and stores
  uint32_t* clear;         // clear_n words zeroed after the wait: the next GEMM's tickets (or null)
  int clear_n;
};

// The words of Geom::clear, grid-strided: the dependent GEMM's tickets, zeroed here instead of by a
// memset node before this launch (a launch and its gap on a decode call's critical path). The
// GEMM's consumers wait for this grid before they touch them.
__device__ __forceinline__ void clear_words(const Geom& geo) {
  for (int i = int(blockIdx.x * kThreads + threadIdx.x); i < geo.clear_n; i += int(gridDim.x) * kThreads)
    geo.clear[i] = 0u;
}

// The persistent streaming loop shared by both quantizers (see the file comment). Virtual
// thread v = step * gridDim.x * 256 + blockIdx.x * 256 + threadIdx.x owns group v / L, lane
// v % L (constant: the stride is a multiple of L). process(task, lane, raw) is called by all 32
// lanes of a warp together (it shuffles); lanes past the end have m == M. Two register buffers
// alternate (the loop body is unrolled twice), so the prefetched raw data is never copied.
template <int XT, int BLOCK, int P, class Process>
__device__ __forceinline__ void stream_tasks(const void* __restrict__ x, const Geom& geo,
                                             Process&& process) {
  constexpr int L = BLOCK / (kChunk * P), W = raw_words<XT>();
  const int lane = static_cast<int>(threadIdx.x) % L;
  const auto load = [&](const Task& t, uint32_t (&w)[P][W]) {
    const void* row = static_cast<const char*>(x) +
                      (t.m < geo.M ? static_cast<int64_t>(t.m) : 0) * geo.ldx * elem_bytes<XT>();
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int c0 = t.kb * BLOCK + (p * L + lane) * kChunk;
      const int left = t.m < geo.M ? geo.K - c0 : 0;
      load_raw<XT>(row, c0, left >= kChunk ? kChunk : max(left, 0), geo.vec, w[p]);
    }
  };

  // this lane's cursor: band and position q in [0, per) inside it
  const int per = geo.nb << geo.band_shift, row_mask = (1 << geo.band_shift) - 1;
  int band, q;
  {
    const int64_t g = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / L;
    band = static_cast<int>(min(g / per, static_cast<int64_t>(geo.bands)));
    q = static_cast<int>(g % per);
  }
  const auto task = [&]() {
    Task t;
    t.m = band < geo.bands ? min((band << geo.band_shift) + (q & row_mask), geo.M) : geo.M;
    t.kb = q >> geo.band_shift;
    return t;
  };
  if (!__any_sync(kFull, band < geo.bands)) return;  // warp-uniform
  Task cur = task();

  const auto step = [&](const uint32_t(&now)[P][W], uint32_t(&next)[P][W]) {
    q += geo.dq;
    band += geo.dband;
    if (q >= per) {
      q -= per;
      ++band;
    }
    band = min(band, geo.bands);  // no overflow however long the tail
    const Task nxt = task();
    const bool more = __any_sync(kFull, band < geo.bands);
    if (more) load(nxt, next);  // the next step's loads go out before this step's arithmetic
    process(cur, lane, now);
    cur = nxt;
    return more;
  };
  uint32_t raw_a[P][W], raw_b[P][W];
  load(cur, raw_a);
  while (step(raw_a, raw_b) && step(raw_b, raw_a)) {
  }
}

// Elements of piece p inside [0, K) (0 for lanes past the last row).
template <int BLOCK, int P>
__device__ __forceinline__ int piece_valid(const Task& t, int lane, int p, int M, int K) {
  constexpr int L = BLOCK / (kChunk * P);
  const int left = K - (t.kb * BLOCK + (p * L + lane) * kChunk);
  return t.m >= M ? 0 : left >= kChunk ? kChunk : max(left, 0);
}

// Register caps: 3 CTAs (24 warps) per SM = at most 80 registers, for both quantizers (INT8 needed
// 2 CTAs while it carried a double-precision fix-up path). SASS checked: no local memory.
// scale and factors: either may be null (the FP8 block GEMMs take the scales, W4A8 the factors).
template <int XT, int P>
__global__ void __launch_bounds__(kThreads, kMinCtasPerSm)
    quantize_fp8_1x128_kernel(const void* __restrict__ x, const Geom geo, uint8_t* __restrict__ q,
                              int64_t ldq, float* __restrict__ scale, float2* __restrict__ factors,
                              int64_t ld_meta, float zero) {
  constexpr int L = 128 / (kChunk * P), W = raw_words<XT>();
  const int M = geo.M, K = geo.K;
  // Launched as a dependent (pdl): nothing is read or written before the previous grid is done.
  allow_dependent_launch();
  grid_dependency_wait();
  clear_words(geo);
  stream_tasks<XT, 128, P>(x, geo, [&](const Task& t, int lane,
                                                      const uint32_t(&w)[P][W]) {
    const float amax = group_max<L>(raw_amax<XT, P>(w));  // elements past K are 0
    const float s = __fdiv_rn(fmaxf(amax, 1e-10f), 448.0f);
    int units = 0;  // W4A8: the lane's code sum (every lane takes part in the group's shuffles)
    if (piece_valid<128, P>(t, lane, 0, M, K) > 0) {
      const float r_lo = __frcp_rd(s), r_hi = __frcp_ru(s);  // r_lo <= 1/s <= r_hi exactly
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int n_valid = piece_valid<128, P>(t, lane, p, M, K);
        if (n_valid <= 0) continue;
        float v[kChunk];
        to_float<XT>(w[p], v);
        uint32_t packed[4], straddle[4], diff = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float* e = v + 4 * i;
          packed[i] = e4m3x4(__fmul_rn(e[0], r_lo), __fmul_rn(e[1], r_lo), __fmul_rn(e[2], r_lo),
                             __fmul_rn(e[3], r_lo));
          straddle[i] = packed[i] ^ e4m3x4(__fmul_rn(e[0], r_hi), __fmul_rn(e[1], r_hi),
                                           __fmul_rn(e[2], r_hi), __fmul_rn(e[3], r_hi));
          diff |= straddle[i];
        }
        if (n_valid < kChunk) fp8_piece_exact(v, n_valid, s, packed);  // past K
        else if (diff != 0) fp8_fix_straddles(v, s, straddle, packed);  // rare: near a boundary
        store_chunk(q + static_cast<int64_t>(t.m) * ldq, t.kb * 128 + (p * L + lane) * kChunk, geo.vec,
                    packed);
        if (factors) units += e4m3_units16(packed);
      }
      if (scale && lane == 0) scale[t.kb * ld_meta + t.m] = s;
    }
    if (factors) {  // the same for the whole launch
      units = group_sum<L>(units);
      if (lane == 0 && t.m < M) factors[t.kb * ld_meta + t.m] = w4a8_factors(s, units, zero);
    }
  });
}

// W4A8 factors of codes quantized elsewhere (linear on QuantizedActivations): one 8-lane group per
// (row, 128-wide block), 16 codes per lane; codes at or past K count as zero.
__global__ void __launch_bounds__(kThreads)
    w4a8_factors_kernel(const uint8_t* __restrict__ q, int64_t ldq, const float* __restrict__ scale,
                        int64_t ld_scale, int M, int K, float2* __restrict__ factors, int64_t ld_meta,
                        float zero) {
  constexpr int L = 128 / kChunk;
  const int nb = (K + 127) / 128;
  const int64_t g = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / L;
  const int lane = static_cast<int>(threadIdx.x) % L;
  const bool live = g < static_cast<int64_t>(M) * nb;
  const int m = live ? static_cast<int>(g / nb) : 0, kb = live ? static_cast<int>(g % nb) : 0;
  const int c0 = kb * 128 + lane * kChunk;
  uint32_t packed[4] = {0, 0, 0, 0};
  if (live)
#pragma unroll
    for (int j = 0; j < kChunk; ++j)
      if (c0 + j < K) packed[j / 4] |= static_cast<uint32_t>(q[static_cast<int64_t>(m) * ldq + c0 + j]) << (8 * (j % 4));
  const int units = group_sum<L>(e4m3_units16(packed));
  if (live && lane == 0) factors[kb * ld_meta + m] = w4a8_factors(scale[kb * ld_scale + m], units, zero);
}

template <int XT, int BLOCK, int P>
__global__ void __launch_bounds__(kThreads, kMinCtasPerSm)
    quantize_int8_block_kernel(const void* __restrict__ x, const Geom geo, int8_t* __restrict__ q,
                               int64_t ldq, float* __restrict__ scale, float* __restrict__ offset,
                               int32_t* __restrict__ sums, int64_t ld_meta) {
  constexpr int L = BLOCK / (kChunk * P), W = raw_words<XT>();
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: t + kMagic = rint(t) in the low bits
  constexpr uint32_t kMagicBits = 0x4B400000u;
  const int M = geo.M, K = geo.K;
  // Launched as a dependent (pdl): nothing is read or written before the previous grid is done.
  allow_dependent_launch();
  grid_dependency_wait();
  clear_words(geo);
  stream_tasks<XT, BLOCK, P>(x, geo, [&](const Task& t, int lane,
                                                        const uint32_t(&w)[P][W]) {
    bool full = true;
#pragma unroll
    for (int p = 0; p < P; ++p) full = full && piece_valid<BLOCK, P>(t, lane, p, M, K) == kChunk;
    float lo = INFINITY, hi = -INFINITY;
    if (full) {
      raw_min_max<XT, P>(w, lo, hi);
    } else {  // tail of a row or past the last row: mask
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int n_valid = piece_valid<BLOCK, P>(t, lane, p, M, K);
        float v[kChunk];
        to_float<XT>(w[p], v);
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
          if (j < n_valid) {
            lo = fminf(lo, v[j]);
            hi = fmaxf(hi, v[j]);
          }
      }
    }
    lo = group_min<L>(lo);
    hi = group_max<L>(hi);
    // Same operation order as the host: no contraction into an FMA.
    const float s = __fdiv_rn(__fsub_rn(hi, lo), 255.0f);
    const bool ranged = s > 0.f;
    const float o = ranged ? __fadd_rn(lo, __fmul_rn(128.0f, s)) : lo;
    const float inv_s = ranged ? __frcp_rn(s) : 0.f;

    int sum = 0;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int n_valid = piece_valid<BLOCK, P>(t, lane, p, M, K);
      if (n_valid <= 0) continue;
      uint32_t packed[4] = {0, 0, 0, 0};
      if (ranged) {
        float v[kChunk];
        to_float<XT>(w[p], v);
        // int8_act_code: the clamped quotient plus 1.5 * 2^23 is rounded half to even and
        // leaves kMagicBits + code in the bits.
        uint32_t rb[kChunk];
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
          rb[j] = __float_as_uint(__fadd_rn(int8_act_quotient(v[j], o, inv_s), kMagic));
        if (n_valid < kChunk) {  // past K: code 0
#pragma unroll
          for (int j = 0; j < kChunk; ++j)
            if (j >= n_valid) rb[j] = kMagicBits;
        }
        uint32_t total = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint32_t* r = rb + 4 * i;
          packed[i] = __byte_perm(__byte_perm(r[0], r[1], 0x0040),
                                  __byte_perm(r[2], r[3], 0x0040), 0x5410);
          total += (r[0] + r[1]) + (r[2] + r[3]);
        }
        sum += static_cast<int>(total - kChunk * kMagicBits);  // exact modulo 2^32
      }
      store_chunk(reinterpret_cast<uint8_t*>(q) + static_cast<int64_t>(t.m) * ldq,
                  t.kb * BLOCK + (p * L + lane) * kChunk, geo.vec, packed);
    }
    sum = group_sum<L>(sum);
    if (lane == 0 && t.m < M) {
      const int64_t i = t.kb * ld_meta + t.m;
      scale[i] = s;
      offset[i] = o;
      sums[i] = sum;
    }
  });
}

}  // namespace mixq::cuda::act_quant
