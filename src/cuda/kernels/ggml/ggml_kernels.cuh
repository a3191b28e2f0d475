// The kernels of GGUF weights at their native width (ggml_gpu_format.hpp):
//   quantize_x   activations -> q8 per 32 columns (the integer path's X, GQ8), one warp per chunk
//   q8_gemv      Y = X Wᵀ for M <= 16 on dp4a: a warp owns RPW rows and walks K by chunks of 32
//                per lane; the chunk's codes are decoded once and reused for every token
//   dequant      W rows -> f16 / bf16 / f32, ggml's exact arithmetic (the cuBLAS path)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/kernels/common/float_io.cuh"
#include "cuda/kernels/common/grid_dependency.cuh"
#include "cuda/kernels/ggml/ggml_chunk.cuh"

namespace mixq::cuda::ggml {

// y[tok][row] = clamp(v + bias[row]) in y's type: the epilogue of every native kernel's finished
// sum (and of the split-K finalize pass).
__device__ __forceinline__ void store_output(const GemvParams& p, int64_t tok, int64_t row, float v) {
  if (p.bias) v += load_as_float(p.bias, p.bias_type, row);
  if (p.clamp_lo > -INFINITY) v = fmaxf(v, p.clamp_lo);
  if (p.clamp_hi < INFINITY) v = fminf(v, p.clamp_hi);
  store_float(p.y, p.y_type, tok * p.ldy + row, v);
}

// A tensor-core kernel's sum of K split `split` for (tok, row): its f32 partial where K is split
// (the finalize pass adds them), else the output.
__device__ __forceinline__ void store_sum(const MmaParams& p, int64_t split, int64_t tok, int64_t row, float v) {
  if (p.partial) p.partial[(split * p.M + tok) * p.N + row] = v;
  else store_output(p, tok, row, v);
}

constexpr int kGemvWarps = 4;

// One warp per (token, 32-column chunk): d = amax / 127, q = round(x / d) (ties away from zero,
// as the CPU integer path and its test reference round), the 16-column sums of x and of q.
// Launched with PDL on sm_90: it starts as the previous kernel of the stream ends, without the
// ordinary launch's wait for that kernel's memory flush, and waits for it before reading X or
// writing `out` (which the previous call's GEMV may still be reading). Measured on an H200, Q4_0
// at M = 1, quantizer + GEMV in CUDA graphs: 6.00 -> 5.84 us (4096 x 4096), 11.88 -> 11.56 us
// (14336 x 4096).
template <typename XT>
__global__ void __launch_bounds__(256) quantize_x_kernel(const XT* __restrict__ x, int64_t ldx,
                                                         int M, int64_t K, GQ8 out) {
  allow_dependent_launch();  // the GEMV may start loading its weights now
  grid_dependency_wait();    // X is the previous kernel's (a no-op without PDL)
  const int lane = threadIdx.x & 31;
  const int64_t chunks = K >> 5;
  const int64_t total = int64_t(M) * chunks;
  // lane e's code goes to word e / 4 of the token's 32 bytes, stored in the order 0 4 1 5 2 6 3 7
  const int word = lane >> 2;
  const int dst = ((word < 4 ? 2 * word : 2 * (word - 4) + 1) << 2) + (lane & 3);
  for (int64_t t = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; t < total;
       t += (int64_t(gridDim.x) * blockDim.x) >> 5) {
    const int64_t m = t / chunks, c = t - m * chunks;
    float v;
    if constexpr (sizeof(XT) == 4) v = x[m * ldx + 32 * c + lane];
    else if constexpr (std::is_same_v<XT, half>) v = __half2float(x[m * ldx + 32 * c + lane]);
    else v = __bfloat162float(x[m * ldx + 32 * c + lane]);
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = __fdiv_rn(amax, 127.f);
    const float id = d != 0.f ? __fdiv_rn(1.f, d) : 0.f;
    const int q = int(roundf(__fmul_rn(v, id)));
    out.q[m * K + 32 * c + dst] = int8_t(q);
    float fs = v;
    int is = q;
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) {
      fs += __shfl_xor_sync(0xffffffffu, fs, o);
      is += __shfl_xor_sync(0xffffffffu, is, o);
    }
    const float fs1 = __shfl_sync(0xffffffffu, fs, 16);
    const int is1 = __shfl_sync(0xffffffffu, is, 16);
    if (lane == 0) {
      const uint32_t packed = (uint32_t(is) & 0xFFFFu) | (uint32_t(is1) << 16);
      out.meta[m * chunks + c] = make_float4(d, fs, fs1, __uint_as_float(packed));
    }
  }
}

// CTAs an SM the single-token instance is compiled for (0: the compiler's choice). Eight caps it
// at 64 registers: 32 warps an SM with 4 chunks a lane in flight. Measured on an H200 at M = 1
// against the compiler's choice: Q4_0 (56 registers) 1.03-1.15x, Q5_K (96) 1.08-1.23x, IQ4_XS
// (72) 1.00-1.19x; Q4_K 0.99-1.03x, and Q6_K (72) 0.81-1.13x and Q8_0 (86) 0.88-1.13x, which
// keep the compiler's. At 2-4 tokens a cap (5 CTAs, 96 registers) was 0.7-1.1x: none there.
template <GType T>
constexpr int gemv_min_ctas(int MR) {
  return MR == 1 && (T == GType::Q4_0 || T == GType::Q5_K || T == GType::IQ4_XS) ? 8 : 0;
}

// A lane's pointers into one row's planes at its chunk c (c = lane + 32 k): chunk c + 32 u is
// then every pointer plus a compile-time multiple of u, so that inside the unrolled ring the loads
// take immediate offsets and a lane spends no instructions on addresses per chunk. The scale
// fields of the super-block types also depend on c & 7, which is lane & 7 for every c.
template <GType T>
struct LanePlanes {
  static constexpr GFormat F = gformat(T);
  const uint8_t *lo = nullptr, *hi = nullptr, *d = nullptr, *sc = nullptr;

  LanePlanes() = default;
  __device__ __forceinline__ LanePlanes(const GPlanes& w, int64_t row, int c) {
    lo = w.lo + row * w.lo_pitch + c * F.lo_chunk();
    hi = w.hi + row * w.hi_pitch + c * F.hi_chunk();
    d = w.d + row * w.d_pitch + (F.qk == 32 ? c : c >> 3) * F.d_bytes();
    const int j = c & 7;
    sc = w.sc + row * w.sc_pitch + (c >> 3) * F.sc_bytes() +
         (F.sk == GScale::S16 || F.sk == GScale::Q2K ? 2 * j : j);
  }
  // bytes between the chunk c + 32 u and chunk c, per plane
  static constexpr int lo_step(int u) { return u * 32 * F.lo_chunk(); }
  static constexpr int hi_step(int u) { return u * 32 * F.hi_chunk(); }
  static constexpr int d_step(int u) { return u * (F.qk == 32 ? 32 : 4) * F.d_bytes(); }
  static constexpr int sc_step(int u) { return u * 4 * F.sc_bytes(); }
  __device__ __forceinline__ void advance(int u) {
    lo += lo_step(u);
    hi += hi_step(u);
    d += d_step(u);
    sc += sc_step(u);
  }

  // chunk c + 32 u (u a constant once the ring is unrolled): load_chunk on a view whose row 0,
  // chunk 0 is that chunk
  __device__ __forceinline__ void load(int u, RawChunk<T>& r) const {
    GPlanes v;
    v.lo = lo + lo_step(u);
    v.hi = hi + hi_step(u);
    v.d = d + d_step(u);
    v.sc = sc + sc_step(u);
    load_chunk<T>(v, 0, 0, r);
  }
};

// How the GEMV's lanes address their chunks. Recomputing each chunk's addresses from (row, c) is
// what the compiler schedules best for most types; for IQ4_XS, whose codebook decode leaves the
// fewest issue slots, walking per-lane pointers (LanePlanes: ~25 % fewer instructions a chunk)
// measured 1.19-1.23x at M = 1 on its large shapes on an H200, where Q4_0 / Q5_K / Q6_K lost
// 12-19 % with it (their loads issue later) and M = 2-4 lost up to 16 %.
template <GType T>
constexpr bool gemv_walks_pointers(int MR) { return MR == 1 && T == GType::IQ4_XS; }

template <GType T, int MR, int RPW>
__global__ void __launch_bounds__(kGemvWarps * 32, gemv_min_ctas<T>(MR)) q8_gemv_kernel(const GemvParams p) {
  constexpr GFormat F = gformat(T);
  constexpr bool kWalk = gemv_walks_pointers<T>(MR);
  const int lane = threadIdx.x & 31;
  const int64_t row0 = (int64_t(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5)) * RPW;
  if (row0 >= p.N) return;
  int64_t rows[RPW];
#pragma unroll
  for (int r = 0; r < RPW; ++r) rows[r] = row0 + r < p.N ? row0 + r : p.N - 1;
  // (the walking instance counts chunks in 32 bits, K < 2^30, as it was measured)
  using Idx = std::conditional_t<kWalk, int, int64_t>;
  const Idx chunks = Idx(p.K >> 5);
  float acc[RPW][MR];
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int m = 0; m < MR; ++m) acc[r][m] = 0.f;

  // A ring of DEPTH chunks per lane in flight (the stream needs ~32 KB in flight per SM); the
  // first ones are requested before waiting on the quantizer (PDL). Chunk c0 + 32 s sits in slot s.
  constexpr int DEPTH = RPW == 1 ? 4 : 2;
  LanePlanes<T> w[RPW] = {};
  if constexpr (kWalk) {
#pragma unroll
    for (int r = 0; r < RPW; ++r) w[r] = LanePlanes<T>(p.w, row0 + r < p.N ? row0 + r : p.N - 1, lane);
  }
  RawChunk<T> raw[DEPTH][RPW];
#pragma unroll
  for (int s = 0; s < DEPTH; ++s)
    if (lane + 32 * s < chunks) {
#pragma unroll
      for (int r = 0; r < RPW; ++r) {
        if constexpr (kWalk) w[r].load(s, raw[s][r]);
        else load_chunk<T>(p.w, rows[r], lane + 32 * s, raw[s][r]);
      }
    }
  const int8_t* xq = p.xq + 32 * lane;  // the walking lane's q8 chunk and meta, token 0
  const float4* xm = p.xmeta + lane;
  grid_dependency_wait();  // X is the quantizer's output (a no-op without PDL)
  for (Idx c0 = lane; c0 < chunks; c0 += 32 * DEPTH) {
#pragma unroll
    for (int s = 0; s < DEPTH; ++s) {
      const Idx c = c0 + 32 * s;
      if (c >= chunks) break;
      uint32_t W[RPW][8];
      ChunkScales S[RPW];
#pragma unroll
      for (int r = 0; r < RPW; ++r) {
        decode_codes<T>(raw[s][r], W[r]);
        S[r] = decode_scales<T>(raw[s][r]);
      }
      // refill the slot: chunk c + 32 DEPTH is in flight while this one is multiplied
      if (c + 32 * DEPTH < chunks) {
#pragma unroll
        for (int r = 0; r < RPW; ++r) {
          if constexpr (kWalk) w[r].load(s + DEPTH, raw[s][r]);
          else load_chunk<T>(p.w, rows[r], c + 32 * DEPTH, raw[s][r]);
        }
      }
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        const int mm = m < p.M ? m : p.M - 1;
        // the token's words in the GQ8 order 0 4 1 5 | 2 6 3 7
        const int8_t* xr = kWalk ? xq + mm * p.K + 32 * 32 * s : p.xq + mm * p.K + 32 * c;
        const int4 a = *reinterpret_cast<const int4*>(xr);
        const int4 b = *reinterpret_cast<const int4*>(xr + 16);
        const float4 mt = kWalk ? xm[mm * int64_t(chunks) + 32 * s] : p.xmeta[mm * chunks + c];
        const int packed = __float_as_int(mt.w);
        const int xi0 = int(int16_t(packed & 0xFFFF)), xi1 = packed >> 16;
#pragma unroll
        for (int r = 0; r < RPW; ++r) {
          int t0 = __dp4a(int(W[r][0]), a.x, 0);
          t0 = __dp4a(int(W[r][1]), a.z, t0);
          t0 = __dp4a(int(W[r][2]), b.x, t0);
          t0 = __dp4a(int(W[r][3]), b.z, t0);
          int t1 = __dp4a(int(W[r][4]), a.y, 0);
          t1 = __dp4a(int(W[r][5]), a.w, t1);
          t1 = __dp4a(int(W[r][6]), b.y, t1);
          t1 = __dp4a(int(W[r][7]), b.w, t1);
          if constexpr (F.bias != 0) {
            t0 -= F.bias * xi0;
            t1 -= F.bias * xi1;
          }
          float v;
          if constexpr (F.halves()) v = S[r].s0 * float(t0) + S[r].s1 * float(t1);
          else v = S[r].s0 * float(t0 + t1);
          float a_rm = fmaf(mt.x, v, acc[r][m]);
          if constexpr (F.has_min()) {
            if constexpr (F.halves()) a_rm += S[r].o0 * mt.y + S[r].o1 * mt.z;
            else a_rm += S[r].o0 * (mt.y + mt.z);
          }
          acc[r][m] = a_rm;
        }
      }
    }
    if constexpr (kWalk) {
#pragma unroll
      for (int r = 0; r < RPW; ++r) w[r].advance(DEPTH);
      xq += 32 * 32 * DEPTH;
      xm += 32 * DEPTH;
    }
  }
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int m = 0; m < MR; ++m) {
      float v = acc[r][m];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      const int64_t row = row0 + r;
      if (lane == ((r * MR + m) & 31) && m < p.M && row < p.N) store_output(p, m, row, v);
    }
}

// One thread per 32-element chunk of rows [n0, n0 + rows): w = s * float(u - bias) + o in f32
// with ggml's operation order (no contraction), converted to OT. out is [rows][ld].
template <GType T, typename OT>
__global__ void __launch_bounds__(256) dequant_kernel(const GPlanes w, int64_t n0, int64_t rows,
                                                      int64_t K, OT* __restrict__ out, int64_t ld) {
  constexpr GFormat F = gformat(T);
  const int64_t chunks = K >> 5;
  const int64_t total = rows * chunks;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = t / chunks, c = t - r * chunks;
    RawChunk<T> raw;
    load_chunk<T>(w, n0 + r, c, raw);
    uint32_t W[8];
    decode_codes<T>(raw, W);
    const ChunkScales S = decode_scales<T>(raw);
    float f[32];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float v[4];
      word_values<T>(W[j], j < 4 ? S.s0 : S.s1, j < 4 ? S.o0 : S.o1, v);
#pragma unroll
      for (int i = 0; i < 4; ++i) f[4 * j + i] = v[i];
    }
    // two values per conversion instruction (cvt.rn.f16x2.f32 / bf16x2), packed in registers
    // (no local-memory staging) and stored 16 bytes at a time
    uint32_t packed[sizeof(OT) == 4 ? 32 : 16];
#pragma unroll
    for (int e = 0; e < 32; e += 2) {
      if constexpr (sizeof(OT) == 4) {
        packed[e] = __float_as_uint(f[e]);
        packed[e + 1] = __float_as_uint(f[e + 1]);
      } else {
        packed[e / 2] = pack2<OT>(f[e], f[e + 1]);
      }
    }
    uint4* dst = reinterpret_cast<uint4*>(out + r * ld + 32 * c);
#pragma unroll
    for (int v = 0; v < int(sizeof(packed) / 16); ++v)
      dst[v] = make_uint4(packed[4 * v], packed[4 * v + 1], packed[4 * v + 2], packed[4 * v + 3]);
  }
}

}  // namespace mixq::cuda::ggml
