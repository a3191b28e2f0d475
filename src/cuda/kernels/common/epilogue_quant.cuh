// The quantizing epilogue of the Hopper block GEMM (kernels/w8a8/sm90_block_gemm.cuh): instead of
// y, the tile's outputs leave as the next layer's quantized activations (QuantizedActivations,
// mixq/ops.hpp), the bytes quantize_activations_{fp8,int8}_block would write for the f32 output
// y = clamp(acc + bias, lo, hi). A chain of W8A8 / FP8 layers then quantizes each activation once,
// where it is produced, and never writes or re-reads it in 16 bits.
//
// Why it fits the wgmma fragment: a 128-wide N tile starting at a multiple of 128 holds whole
// quantization blocks (FP8: one 1x128 block a row; INT8: blocks of 32, 64 or 128), and an m64nN
// accumulator gives each row's N columns to the four lanes of one quad (registers 4j, 4j + 1 are
// row r0 at columns c0 + 8j, + 1; 4j + 2, 4j + 3 row r0 + 8). A block's amax / min / max / code
// sum is a reduction over the lane's own registers and two xor shuffles inside the quad: no
// shared memory, no barrier.
//
// Bits: the same float operations as the f32 output path (store_tile) give v; the codes and meta
// follow the host quantizers (src/core/act_quant.cpp) operation for operation, with every rounding
// explicit (__fdiv_rn, __fmul_rn, __fadd_rn: nvcc would otherwise contract lo + 128 s into an
// FMA). FP8 codes come from the reciprocal bracket of kernels/act_quant/act_quant.cuh: e4m3 of
// x * RD(1/s) and of x * RU(1/s); where the two differ (x / s within ~1 ulp of an e4m3 rounding
// boundary) the IEEE quotient decides. Non-finite outputs give meaningless INT8 meta (the host
// quantizer refuses them) and, as on the host, an FP8 amax that ignores NaN.
#pragma once

#include <cstdint>

#include "cuda/kernels/act_quant/act_quant.cuh"
#include "cuda/kernels/common/float_io.cuh"
#include "cuda/kernels/common/quant_out.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cuda::sm90 {

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_min(float v) {
  v = fminf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fminf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ int quad_sum(int v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Two adjacent FP8 codes (a in the low byte) of a / s and b / s, as the host computes them.
__device__ __forceinline__ uint32_t e4m3_quotients(float a, float b, float s, float r_lo,
                                                   float r_hi) {
  const uint32_t lo = act_quant::e4m3x2(__fmul_rn(a, r_lo), __fmul_rn(b, r_lo));
  const uint32_t hi = act_quant::e4m3x2(__fmul_rn(a, r_hi), __fmul_rn(b, r_hi));
  if (lo == hi) return lo;
  return act_quant::e4m3x2(__fdiv_rn(a, s), __fdiv_rn(b, s));  // rare: near a boundary
}

// One m64 sub-tile of a consumer warpgroup, 2R columns from n0 (a multiple of 128, R = 64: one
// 128-wide tile): rows r0 and r0 + 8 of this thread (m_end: rows from there are not written),
// columns c0 + 8j (+1). bias: [N] of bias_type, or null.
template <int R>
__device__ __forceinline__ void store_tile_quantized(const QuantOut& o, const float (&total)[R],
                                                     int64_t r0, int n0, int c0, int N,
                                                     int64_t m_end, const void* bias,
                                                     int bias_type, float clamp_lo,
                                                     float clamp_hi) {
  static_assert(R == 64, "a 128-wide tile holds whole quantization blocks");
  // v: the f32 outputs (store_tile's operations); columns past N are masked out of every block.
  float v[R];
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const int c = c0 + 8 * j;
    float b0 = 0.f, b1 = 0.f;
    if (bias) {
      if (c < N) b0 = load_as_float(bias, bias_type, c);
      if (c + 1 < N) b1 = load_as_float(bias, bias_type, c + 1);
    }
    v[4 * j] = fminf(fmaxf(total[4 * j] + b0, clamp_lo), clamp_hi);
    v[4 * j + 1] = fminf(fmaxf(total[4 * j + 1] + b1, clamp_lo), clamp_hi);
    v[4 * j + 2] = fminf(fmaxf(total[4 * j + 2] + b0, clamp_lo), clamp_hi);
    v[4 * j + 3] = fminf(fmaxf(total[4 * j + 3] + b1, clamp_lo), clamp_hi);
  }
  const bool row0 = r0 < m_end, row1 = r0 + 8 < m_end;
  const bool meta_lane = (threadIdx.x & 3) == 0;
  uint8_t* q0 = o.q + r0 * o.ld_q;
  uint8_t* q1 = q0 + 8 * o.ld_q;
  if (o.kind == 1) {
    float a0 = 0.f, a1 = 0.f;  // the rows' amax over valid columns (fmaxf ignores NaN, as the host)
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
      const int c = c0 + 8 * j;
      if (c < N) {
        a0 = fmaxf(a0, fabsf(v[4 * j]));
        a1 = fmaxf(a1, fabsf(v[4 * j + 2]));
      }
      if (c + 1 < N) {
        a0 = fmaxf(a0, fabsf(v[4 * j + 1]));
        a1 = fmaxf(a1, fabsf(v[4 * j + 3]));
      }
    }
    a0 = quad_max(a0);
    a1 = quad_max(a1);
    const float s0 = __fdiv_rn(fmaxf(a0, 1e-10f), 448.f), s1 = __fdiv_rn(fmaxf(a1, 1e-10f), 448.f);
    const float lo0 = __frcp_rd(s0), hi0 = __frcp_ru(s0), lo1 = __frcp_rd(s1), hi1 = __frcp_ru(s1);
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
      const int c = c0 + 8 * j;
      if (c >= o.pitch) break;  // c even, pitch a multiple of 16: c + 1 < pitch too
      // columns past N: zero codes (the quantizer's padding up to the row pitch)
      const float x0 = c < N ? v[4 * j] : 0.f, x1 = c + 1 < N ? v[4 * j + 1] : 0.f;
      const float x2 = c < N ? v[4 * j + 2] : 0.f, x3 = c + 1 < N ? v[4 * j + 3] : 0.f;
      if (row0) *reinterpret_cast<uint16_t*>(q0 + c) = uint16_t(e4m3_quotients(x0, x1, s0, lo0, hi0));
      if (row1) *reinterpret_cast<uint16_t*>(q1 + c) = uint16_t(e4m3_quotients(x2, x3, s1, lo1, hi1));
    }
    if (meta_lane) {
      float* sc = o.scale + int64_t(n0 / 128) * o.ld_meta;
      if (row0) sc[r0] = s0;
      if (row1) sc[r0 + 8] = s1;
    }
    return;
  }
  // INT8 per block of B columns: J = B / 8 register groups j of each row per block.
  const int J = o.block / 8;
#pragma unroll
  for (int b = 0; b < 4; ++b) {  // at most 4 blocks (of 32) in the tile
    if (b * o.block >= 128) break;
    const int blk_c0 = n0 + b * o.block;
    if (blk_c0 >= N) break;  // no block of the next layer's K starts here
    float lo0 = INFINITY, hi0 = -INFINITY, lo1 = INFINITY, hi1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
      if (j < b * J || j >= (b + 1) * J) continue;
      const int c = c0 + 8 * j;
      if (c < N) {
        lo0 = fminf(lo0, v[4 * j]);
        hi0 = fmaxf(hi0, v[4 * j]);
        lo1 = fminf(lo1, v[4 * j + 2]);
        hi1 = fmaxf(hi1, v[4 * j + 2]);
      }
      if (c + 1 < N) {
        lo0 = fminf(lo0, v[4 * j + 1]);
        hi0 = fmaxf(hi0, v[4 * j + 1]);
        lo1 = fminf(lo1, v[4 * j + 3]);
        hi1 = fmaxf(hi1, v[4 * j + 3]);
      }
    }
    lo0 = quad_min(lo0);
    hi0 = quad_max(hi0);
    lo1 = quad_min(lo1);
    hi1 = quad_max(hi1);
    // scale, offset, 1 / scale: the host's f32 operations, each rounded on its own
    const float s0 = __fdiv_rn(__fsub_rn(hi0, lo0), 255.f), s1 = __fdiv_rn(__fsub_rn(hi1, lo1), 255.f);
    const float o0 = s0 > 0.f ? __fadd_rn(lo0, __fmul_rn(128.f, s0)) : lo0;
    const float o1 = s1 > 0.f ? __fadd_rn(lo1, __fmul_rn(128.f, s1)) : lo1;
    const float i0 = s0 > 0.f ? __fdiv_rn(1.f, s0) : 0.f, i1 = s1 > 0.f ? __fdiv_rn(1.f, s1) : 0.f;
    int sum0 = 0, sum1 = 0;
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
      if (j < b * J || j >= (b + 1) * J) continue;
      const int c = c0 + 8 * j;
      if (c >= o.pitch) break;
      int k0 = 0, k1 = 0, k2 = 0, k3 = 0;
      if (c < N) {
        if (s0 > 0.f) k0 = int8_act_code(v[4 * j], o0, i0);
        if (s1 > 0.f) k2 = int8_act_code(v[4 * j + 2], o1, i1);
      }
      if (c + 1 < N) {
        if (s0 > 0.f) k1 = int8_act_code(v[4 * j + 1], o0, i0);
        if (s1 > 0.f) k3 = int8_act_code(v[4 * j + 3], o1, i1);
      }
      sum0 += k0 + k1;
      sum1 += k2 + k3;
      if (row0) *reinterpret_cast<uint16_t*>(q0 + c) = uint16_t((k0 & 0xFF) | ((k1 & 0xFF) << 8));
      if (row1) *reinterpret_cast<uint16_t*>(q1 + c) = uint16_t((k2 & 0xFF) | ((k3 & 0xFF) << 8));
    }
    sum0 = quad_sum(sum0);
    sum1 = quad_sum(sum1);
    if (meta_lane) {
      const int64_t at = int64_t(blk_c0 / o.block) * o.ld_meta;
      if (row0) {
        o.scale[at + r0] = s0;
        o.offset[at + r0] = o0;
        o.sums[at + r0] = sum0;
      }
      if (row1) {
        o.scale[at + r0 + 8] = s1;
        o.offset[at + r0 + 8] = o1;
        o.sums[at + r0 + 8] = sum1;
      }
    }
  }
}

}  // namespace mixq::cuda::sm90
