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

#include <cuda.h>

#include <cstdint>

#include "cuda/kernels/common/e4m3_convert.cuh"
#include "cuda/kernels/common/float_io.cuh"
#include "cuda/kernels/common/quant_out.hpp"
#include "cuda/kernels/common/sm90_sync.cuh"
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

// Byte `c_local` of box row `row` in the staging box: 128-byte rows with the 128-byte swizzle
// (16-byte chunk g of row r at chunk g ^ (r % 8)), so that the 8 rows of a warp's store land in 8
// different chunks (no bank conflicts) and a TMA store with a SWIZZLE_128B map unpermutes them.
__device__ __forceinline__ uint32_t staged_byte(uint32_t box, int row, int c_local) {
  return box + uint32_t(row) * 128u + ((uint32_t((c_local >> 4) ^ (row & 7))) << 4) +
         uint32_t(c_local & 15);
}
__device__ __forceinline__ void stage_pair(uint32_t box, int row, int c_local, uint32_t two) {
  asm volatile("st.shared.u16 [%0], %1;" ::"r"(staged_byte(box, row, c_local)),
               "h"(static_cast<unsigned short>(two)));
}

// A thread's tile outputs v = clamp(total + bias, lo, hi) (store_tile's operations), zero at
// columns past N. One branch on the bias and its type for the whole tile, not one per element
// (each would be a convergence barrier pair in the unrolled body); bias indices are clamped to
// N - 1 so that no load is conditional. BT: the bias type code, -1 none.
template <int BT, int R>
__device__ __forceinline__ void epilogue_values_as(const float (&total)[R], float (&v)[R], int c0,
                                                   int N, const void* bias, float lo, float hi) {
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const int c = c0 + 8 * j;
    float b0 = 0.f, b1 = 0.f;
    if constexpr (BT >= 0) {
      b0 = load_as_float(bias, BT, c < N ? c : N - 1);
      b1 = load_as_float(bias, BT, c + 1 < N ? c + 1 : N - 1);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float x = fminf(fmaxf(total[4 * j + e] + (e & 1 ? b1 : b0), lo), hi);
      v[4 * j + e] = c + (e & 1) < N ? x : 0.f;
    }
  }
}
template <int R>
__device__ __forceinline__ void epilogue_values(const float (&total)[R], float (&v)[R], int c0,
                                                int N, const void* bias, int bias_type, float lo,
                                                float hi) {
  if (bias == nullptr) epilogue_values_as<-1>(total, v, c0, N, bias, lo, hi);
  else if (bias_type == 0) epilogue_values_as<0>(total, v, c0, N, bias, lo, hi);
  else if (bias_type == 1) epilogue_values_as<1>(total, v, c0, N, bias, lo, hi);
  else epilogue_values_as<2>(total, v, c0, N, bias, lo, hi);
}

// FP8 1x128: the rows' amax (quad reduction), s = max(amax, 1e-10) / 448, codes by the reciprocal
// bracket into the staging box, the scales stored. The rare pairs whose bracket straddles an e4m3
// boundary are redone by IEEE division after the loop, behind one warp-uniform test, so that the
// divisions never sit in the executed path.
template <int R>
__device__ __forceinline__ void quantize_fp8_subtile(const QuantOut& o, const float (&v)[R],
                                                     int64_t r0, int64_t m_end, int n0, int c0,
                                                     uint32_t box, int box_row, int lane) {
  float a0 = 0.f, a1 = 0.f;  // the rows' amax (fmaxf ignores NaN, as the host)
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    a0 = fmaxf(a0, fmaxf(fabsf(v[4 * j]), fabsf(v[4 * j + 1])));
    a1 = fmaxf(a1, fmaxf(fabsf(v[4 * j + 2]), fabsf(v[4 * j + 3])));
  }
  a0 = quad_max(a0);
  a1 = quad_max(a1);
  const float s0 = __fdiv_rn(fmaxf(a0, 1e-10f), 448.f), s1 = __fdiv_rn(fmaxf(a1, 1e-10f), 448.f);
  const float l0 = __frcp_rd(s0), h0 = __frcp_ru(s0), l1 = __frcp_rd(s1), h1 = __frcp_ru(s1);
  const int cl = c0 - n0;
  uint32_t straddle = 0;  // bit 2j + row: the pair's bracket ends differ
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const float* x = &v[4 * j];
    const uint32_t p0 = e4m3x2(__fmul_rn(x[0], l0), __fmul_rn(x[1], l0));
    const uint32_t q0 = e4m3x2(__fmul_rn(x[0], h0), __fmul_rn(x[1], h0));
    const uint32_t p1 = e4m3x2(__fmul_rn(x[2], l1), __fmul_rn(x[3], l1));
    const uint32_t q1 = e4m3x2(__fmul_rn(x[2], h1), __fmul_rn(x[3], h1));
    straddle |= (p0 != q0 ? 1u : 0u) << (2 * j);
    straddle |= (p1 != q1 ? 1u : 0u) << (2 * j + 1);
    stage_pair(box, box_row, cl + 8 * j, p0);
    stage_pair(box, box_row + 8, cl + 8 * j, p1);
  }
  if (__any_sync(0xffffffffu, straddle != 0)) {  // rare: x / s within ~1 ulp of a boundary
#pragma unroll
    for (int j = 0; j < R / 4; ++j)
#pragma unroll
      for (int row = 0; row < 2; ++row)
        if ((straddle >> (2 * j + row)) & 1u) {
          const float s = row ? s1 : s0;
          stage_pair(box, box_row + 8 * row, cl + 8 * j,
                     e4m3x2(__fdiv_rn(v[4 * j + 2 * row], s), __fdiv_rn(v[4 * j + 2 * row + 1], s)));
        }
  }
  if ((lane & 3) == 0) {
    float* sc = o.scale + int64_t(n0 / 128) * o.ld_meta;
    if (r0 < m_end) sc[r0] = s0;
    if (r0 + 8 < m_end) sc[r0 + 8] = s1;
  }
}

// INT8 per block of B columns (B / 8 register groups j of each row per block): min / max (quad
// reductions) over the columns before N, scale, offset and 1 / scale as the host computes them,
// codes int8_act_code (zero past N), the code sums (quad reductions).
template <int B, int R>
__device__ __forceinline__ void quantize_int8_subtile(const QuantOut& o, const float (&v)[R],
                                                      int64_t r0, int64_t m_end, int n0, int c0,
                                                      int N, uint32_t box, int box_row, int lane) {
  constexpr int J = B / 8;
  const int cl = c0 - n0;
#pragma unroll
  for (int b = 0; b < 128 / B; ++b) {
    float lo0 = INFINITY, hi0 = -INFINITY, lo1 = INFINITY, hi1 = -INFINITY;
#pragma unroll
    for (int j = b * J; j < (b + 1) * J; ++j) {
      const int c = c0 + 8 * j;
      // columns past N hold 0 in v: replace them by a value of the block that cannot move the
      // min / max (the first element of the row's pair, or +-inf for a pair wholly past N)
      const bool in0 = c < N, in1 = c + 1 < N;
      lo0 = fminf(lo0, fminf(in0 ? v[4 * j] : INFINITY, in1 ? v[4 * j + 1] : INFINITY));
      hi0 = fmaxf(hi0, fmaxf(in0 ? v[4 * j] : -INFINITY, in1 ? v[4 * j + 1] : -INFINITY));
      lo1 = fminf(lo1, fminf(in0 ? v[4 * j + 2] : INFINITY, in1 ? v[4 * j + 3] : INFINITY));
      hi1 = fmaxf(hi1, fmaxf(in0 ? v[4 * j + 2] : -INFINITY, in1 ? v[4 * j + 3] : -INFINITY));
    }
    lo0 = quad_min(lo0);
    hi0 = quad_max(hi0);
    lo1 = quad_min(lo1);
    hi1 = quad_max(hi1);
    // each rounded on its own (a block wholly past N gets -inf here: zero codes, no meta)
    const float s0 = __fdiv_rn(__fsub_rn(hi0, lo0), 255.f);
    const float s1 = __fdiv_rn(__fsub_rn(hi1, lo1), 255.f);
    const float o0 = s0 > 0.f ? __fadd_rn(lo0, __fmul_rn(128.f, s0)) : lo0;
    const float o1 = s1 > 0.f ? __fadd_rn(lo1, __fmul_rn(128.f, s1)) : lo1;
    const float i0 = s0 > 0.f ? __frcp_rn(s0) : 0.f, i1 = s1 > 0.f ? __frcp_rn(s1) : 0.f;
    int sum0 = 0, sum1 = 0;
#pragma unroll
    for (int j = b * J; j < (b + 1) * J; ++j) {
      const int c = c0 + 8 * j;
      int k[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool valid = c + (e & 1) < N && (e < 2 ? s0 : s1) > 0.f;
        const int code = int(int8_act_code(v[4 * j + e], e < 2 ? o0 : o1, e < 2 ? i0 : i1));
        k[e] = valid ? code : 0;
      }
      sum0 += k[0] + k[1];
      sum1 += k[2] + k[3];
      stage_pair(box, box_row, cl + 8 * j, uint32_t((k[0] & 0xFF) | ((k[1] & 0xFF) << 8)));
      stage_pair(box, box_row + 8, cl + 8 * j, uint32_t((k[2] & 0xFF) | ((k[3] & 0xFF) << 8)));
    }
    sum0 = quad_sum(sum0);
    sum1 = quad_sum(sum1);
    const int blk_c0 = n0 + b * B;
    if ((lane & 3) == 0 && blk_c0 < N) {  // a block of the next layer's K starts here
      const int64_t at = int64_t(blk_c0 / B) * o.ld_meta;
      if (r0 < m_end) {
        o.scale[at + r0] = s0;
        o.offset[at + r0] = o0;
        o.sums[at + r0] = sum0;
      }
      if (r0 + 8 < m_end) {
        o.scale[at + r0 + 8] = s1;
        o.offset[at + r0 + 8] = o1;
        o.sums[at + r0 + 8] = sum1;
      }
    }
  }
}

// One m64 sub-tile of a consumer warpgroup, 2R columns from n0 (a multiple of 128, R = 64: one
// 128-wide tile): rows r0 and r0 + 8 of this thread (m_end: rows from there are not written),
// columns c0 + 8j (+1); m0 the sub-tile's first row, warp the warp in the warpgroup (its rows
// 16 warp .. + 15 of the sub-tile). bias: [N] of bias_type, or null.
// The codes go through the warpgroup's 8 KB staging box (64 rows x 128 bytes) and leave by one
// TMA store (tm_q: u8 [M][pitch] in 128 x 64 boxes, SWIZZLE_128B), which clips rows past M and
// columns past the pitch and drains while the next tile's MMAs run; written from the registers,
// each warp store would put 8 bytes in each of 8 rows' sectors. The meta values (one per row and
// block) are stored by the quad's first lane. The box is rewritten only after the issuing
// thread's previous store has read it (bulk_wait_group_read, then the warpgroup's named barrier),
// as in store_tile_tma.
// Branches per element (a bias test, a column test, the rare exact division) each cost a
// convergence barrier pair in the unrolled body: the body here has none in its executed path.
template <int R>
__device__ __forceinline__ void store_tile_quantized(const QuantOut& o, const CUtensorMap* tm_q,
                                                     const float (&total)[R], int64_t r0, int m0,
                                                     int n0, int c0, int N, int64_t m_end,
                                                     const void* bias, int bias_type,
                                                     float clamp_lo, float clamp_hi, uint32_t box,
                                                     int warp, int lane, bool issuer, int bar) {
  static_assert(R == 64, "a 128-wide tile holds whole quantization blocks");
  float v[R];
  epilogue_values(total, v, c0, N, bias, bias_type, clamp_lo, clamp_hi);
  const int box_row = 16 * warp + lane / 4;
  if (issuer) bulk_wait_group_read<0>();  // the previous store has read the box
  named_barrier_sync(bar, 128);
  if (o.kind == 1) quantize_fp8_subtile(o, v, r0, m_end, n0, c0, box, box_row, lane);
  else if (o.block == 32) quantize_int8_subtile<32>(o, v, r0, m_end, n0, c0, N, box, box_row, lane);
  else if (o.block == 64) quantize_int8_subtile<64>(o, v, r0, m_end, n0, c0, N, box, box_row, lane);
  else quantize_int8_subtile<128>(o, v, r0, m_end, n0, c0, N, box, box_row, lane);
  fence_proxy_async_shared();  // the staging writes, before the TMA engine reads them
  named_barrier_sync(bar, 128);
  if (issuer) {
    tma_store_2d(tm_q, box, n0, m0);
    bulk_commit_group();
  }
}

}  // namespace mixq::cuda::sm90
