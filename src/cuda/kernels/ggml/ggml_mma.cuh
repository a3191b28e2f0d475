// The q8 tensor-core kernel of GGUF weights at native width (M above the GEMV's few tokens): int8
// mma.sync with the weights as the A operand, decoded from the planes straight into fragments
// (a thread needs code words t and t + 4 of rows g and g + 8 of its warp's 16 rows: the planes'
// word order is the fragment's), and the q8 activations as B. Each k32 chunk's int32 tile is
// promoted to f32 with the chunk's sub-block scales (two k16 MMAs where the scales are per 16)
// and the activations' per-32 scale, so the arithmetic is the GEMV's: same results within f32
// rounding. A CTA is 4 warps x 16 rows by 8 NT tokens; blockIdx.z splits K, the splits' f32
// partials summed in a fixed order by finalize_kernel (deterministic, no atomics).
#pragma once

#include "cuda/kernels/ggml/ggml_kernels.cuh"

namespace mixq::cuda::ggml {

constexpr int kMmaWarps = 4;
constexpr int kMmaRows = 16 * kMmaWarps;

__device__ __forceinline__ void mma_k32(const uint32_t (&a)[4], uint32_t b0, uint32_t b1, int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_k16(uint32_t a0, uint32_t a1, uint32_t b0, int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

__device__ __forceinline__ int xi_lo(const float4& m) { return int(int16_t(__float_as_int(m.w) & 0xFFFF)); }
__device__ __forceinline__ int xi_hi(const float4& m) { return __float_as_int(m.w) >> 16; }

template <GType T, int NT>
__global__ void __launch_bounds__(kMmaWarps * 32) q8_mma_kernel(const MmaParams p) {
  constexpr GFormat F = gformat(T);
  constexpr int D = 2;  // chunks in flight per thread beyond the one being multiplied
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t rbase = int64_t(blockIdx.x) * kMmaRows + warp * 16;
  const int64_t rowA = rbase + g < p.N ? rbase + g : p.N - 1;
  const int64_t rowB = rbase + g + 8 < p.N ? rbase + g + 8 : p.N - 1;
  const int tok0 = int(blockIdx.y) * 8 * NT;
  const int64_t chunks = p.K >> 5;
  const int64_t cb = int64_t(blockIdx.z) * p.split_chunks;
  const int64_t ce = cb + p.split_chunks < chunks ? cb + p.split_chunks : chunks;

  // token rows this thread reads: B fragments (token 8j + g), promotion (tokens 8j + 2t, + 1)
  const int8_t* xb[NT];
  const float4* xm0[NT];
  const float4* xm1[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int tb = min(tok0 + 8 * j + g, p.M - 1);
    const int t0 = min(tok0 + 8 * j + 2 * t, p.M - 1), t1 = min(tok0 + 8 * j + 2 * t + 1, p.M - 1);
    xb[j] = p.xq + int64_t(tb) * p.ldxq;
    xm0[j] = p.xmeta + int64_t(t0) * p.ldxmeta;
    xm1[j] = p.xmeta + int64_t(t1) * p.ldxmeta;
  }
  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int v = 0; v < 4; ++v) acc[j][v] = 0.f;

  RawPair<T> ra[D], rb[D];
#pragma unroll
  for (int s = 0; s < D; ++s)
    if (cb + s < ce) {
      load_pair<T>(p.w, rowA, cb + s, t, ra[s]);
      load_pair<T>(p.w, rowB, cb + s, t, rb[s]);
    }
  grid_dependency_wait();  // X is the quantizer's output (a no-op without PDL)
  for (int64_t c0 = cb; c0 < ce; c0 += D) {
#pragma unroll
    for (int s = 0; s < D; ++s) {
      const int64_t c = c0 + s;
      if (c >= ce) break;
      uint32_t a[4];
      decode_pair<T>(ra[s], t, a[0], a[2]);
      decode_pair<T>(rb[s], t, a[1], a[3]);
      const ChunkScales SA = decode_scales<T>(ra[s].d, ra[s].sc);
      const ChunkScales SB = decode_scales<T>(rb[s].d, rb[s].sc);
      if (c + D < ce) {
        load_pair<T>(p.w, rowA, c + D, t, ra[s]);
        load_pair<T>(p.w, rowB, c + D, t, rb[s]);
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const unsigned int* xw = reinterpret_cast<const unsigned int*>(xb[j] + 32 * c);
        const uint32_t b0 = xw[t], b1 = xw[t + 4];
        const float4 m0 = xm0[j][c], m1 = xm1[j][c];
        if constexpr (F.halves()) {
          int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
          mma_k16(a[0], a[1], b0, lo);
          mma_k16(a[2], a[3], b1, hi);
          if constexpr (F.bias != 0) {
            lo[0] -= F.bias * xi_lo(m0); lo[2] -= F.bias * xi_lo(m0);
            lo[1] -= F.bias * xi_lo(m1); lo[3] -= F.bias * xi_lo(m1);
            hi[0] -= F.bias * xi_hi(m0); hi[2] -= F.bias * xi_hi(m0);
            hi[1] -= F.bias * xi_hi(m1); hi[3] -= F.bias * xi_hi(m1);
          }
          float v0 = SA.s0 * float(lo[0]) + SA.s1 * float(hi[0]);
          float v1 = SA.s0 * float(lo[1]) + SA.s1 * float(hi[1]);
          float v2 = SB.s0 * float(lo[2]) + SB.s1 * float(hi[2]);
          float v3 = SB.s0 * float(lo[3]) + SB.s1 * float(hi[3]);
          acc[j][0] = fmaf(m0.x, v0, acc[j][0]);
          acc[j][1] = fmaf(m1.x, v1, acc[j][1]);
          acc[j][2] = fmaf(m0.x, v2, acc[j][2]);
          acc[j][3] = fmaf(m1.x, v3, acc[j][3]);
          if constexpr (F.has_min()) {
            acc[j][0] += SA.o0 * m0.y + SA.o1 * m0.z;
            acc[j][1] += SA.o0 * m1.y + SA.o1 * m1.z;
            acc[j][2] += SB.o0 * m0.y + SB.o1 * m0.z;
            acc[j][3] += SB.o0 * m1.y + SB.o1 * m1.z;
          }
        } else {
          int q[4] = {0, 0, 0, 0};
          mma_k32(a, b0, b1, q);
          if constexpr (F.bias != 0) {
            const int x0 = F.bias * (xi_lo(m0) + xi_hi(m0)), x1 = F.bias * (xi_lo(m1) + xi_hi(m1));
            q[0] -= x0; q[2] -= x0;
            q[1] -= x1; q[3] -= x1;
          }
          acc[j][0] = fmaf(m0.x, SA.s0 * float(q[0]), acc[j][0]);
          acc[j][1] = fmaf(m1.x, SA.s0 * float(q[1]), acc[j][1]);
          acc[j][2] = fmaf(m0.x, SB.s0 * float(q[2]), acc[j][2]);
          acc[j][3] = fmaf(m1.x, SB.s0 * float(q[3]), acc[j][3]);
          if constexpr (F.has_min()) {
            acc[j][0] += SA.o0 * (m0.y + m0.z);
            acc[j][1] += SA.o0 * (m1.y + m1.z);
            acc[j][2] += SB.o0 * (m0.y + m0.z);
            acc[j][3] += SB.o0 * (m1.y + m1.z);
          }
        }
      }
    }
  }
  // epilogue: the whole sum (bias, clamp, the output type) or this split's f32 partial
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const int64_t row = rbase + g + (v >= 2 ? 8 : 0);
      const int tok = tok0 + 8 * j + 2 * t + (v & 1);
      if (row >= p.N || tok >= p.M) continue;
      float y = acc[j][v];
      if (p.partial) {
        p.partial[(int64_t(blockIdx.z) * p.M + tok) * p.N + row] = y;
      } else {
        if (p.bias) y += load_as_float(p.bias, p.bias_type, row);
        if (p.clamp_lo > -INFINITY) y = fmaxf(y, p.clamp_lo);
        if (p.clamp_hi < INFINITY) y = fminf(y, p.clamp_hi);
        store_float(p.y, p.y_type, tok * p.ldy + row, y);
      }
    }
}

}  // namespace mixq::cuda::ggml
