// Epilogues of the Hopper block-scaled 8-bit GEMM (sm90_block_gemm.cuh) that write 16- or 32-bit
// outputs: straight from the accumulator registers (store_tile) or staged in shared memory and
// written by TMA stores (store_tile_tma). The quantizing epilogue is in
// kernels/common/epilogue_quant.cuh.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/common/float_io.cuh"
#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/w8a8/sm90_block_params.cuh"

namespace mixq::cuda::sm90 {

template <int kYType>
struct OutT;
template <>
struct OutT<0> {
  using T = __half;
  using T2 = __half2;
};
template <>
struct OutT<1> {
  using T = __nv_bfloat16;
  using T2 = __nv_bfloat162;
};
template <>
struct OutT<2> {
  using T = float;
  using T2 = float2;
};

template <int kYType>
__device__ __forceinline__ typename OutT<kYType>::T to_out(float v) {
  if constexpr (kYType == 0)
    return __float2half_rn(v);
  else if constexpr (kYType == 1)
    return __float2bfloat16_rn(v);
  else
    return v;
}
template <int kYType>
__device__ __forceinline__ typename OutT<kYType>::T2 to_out2(float a, float b) {
  if constexpr (kYType == 0)
    return __floats2half2_rn(a, b);
  else if constexpr (kYType == 1)
    return __floats2bfloat162_rn(a, b);
  else
    return make_float2(a, b);
}

// Epilogue straight from the accumulator registers: + bias, clamp, convert, guarded stores.
// Registers 4j, 4j+1 are (row r0, columns c, c+1), 4j+2, 4j+3 the same columns of row r0 + 8.
// Rows from m_end on are not written (M, or the end of the unit's expert); bias: the unit's.
template <int kYType, int R>
__device__ __forceinline__ void store_tile(const BlockGemmParams& p, const float (&total)[R],
                                           int64_t r0, int c0, int64_t m_end, const void* bias) {
  using T = typename OutT<kYType>::T;
  using T2 = typename OutT<kYType>::T2;
  T* y = static_cast<T*>(p.y);
  const bool row0 = r0 < m_end, row1 = r0 + 8 < m_end;
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const int c = c0 + 8 * j;
    if (c >= p.N) break;
    const bool two = c + 1 < p.N;
    float b0 = 0.f, b1 = 0.f;
    if (bias) {
      b0 = load_as_float(bias, p.bias_type, c);
      if (two) b1 = load_as_float(bias, p.bias_type, c + 1);
    }
    float v[4] = {total[4 * j] + b0, total[4 * j + 1] + b1, total[4 * j + 2] + b0,
                  total[4 * j + 3] + b1};
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = fminf(fmaxf(v[i], p.clamp_lo), p.clamp_hi);
    T* y0 = y + r0 * p.ldy + c;
    T* y1 = y0 + 8 * p.ldy;
    if (two && p.y_pairs) {
      if (row0) *reinterpret_cast<T2*>(y0) = to_out2<kYType>(v[0], v[1]);
      if (row1) *reinterpret_cast<T2*>(y1) = to_out2<kYType>(v[2], v[3]);
    } else {
      if (row0) y0[0] = to_out<kYType>(v[0]);
      if (row1) y1[0] = to_out<kYType>(v[2]);
      if (two && row0) y0[1] = to_out<kYType>(v[1]);
      if (two && row1) y1[1] = to_out<kYType>(v[3]);
    }
  }
}

// TMA-store epilogue (16-bit outputs). store_tile writes each pair of outputs as its own 4-byte
// store (8 rows x 16 bytes per warp store, plus the bias loads), from every consumer thread at the
// end of every tile, while the tensor cores idle. Here each consumer warpgroup converts its 64
// rows of a sub-tile into a staging box in shared memory (stmatrix: four 8x8 matrices, 16-byte
// rows, per instruction) and one thread hands the box to a TMA store, which clips it at M and N
// and drains while the next tile's MMAs run. A box is 64 rows x 64 columns (128-byte rows: the
// widest box the 128-byte swizzle allows, which keeps stmatrix free of bank conflicts); a BN-wide
// sub-tile is BN / 64 rounds through the warpgroup's single box. A round rewrites the box only
// after the issuing thread's previous store has read it (bulk_wait_group_read, then the
// warpgroup's named barrier); the staging writes are ordered before the TMA engine's reads by
// fence.proxy.async and the barrier that precedes the store.
template <int kYType>
__device__ __forceinline__ uint32_t pack_out2(float a, float b) {
  static_assert(kYType == 0 || kYType == 1, "16-bit outputs");
  const typename OutT<kYType>::T2 v = to_out2<kYType>(a, b);  // a at the lower address
  return *reinterpret_cast<const uint32_t*>(&v);
}

// One sub-tile of a consumer warpgroup (64 rows from m0, columns n0 .. n0 + 2R - 1; the caller
// skips sub-tiles past M). total, c0 as in store_tile; the bias and clamp are store_tile's float
// operations in the same order, so both epilogues write the same bits. box: the warpgroup's
// staging box (1024-byte aligned); warp: the warp in the warpgroup (rows 16 warp .. + 15).
template <int kYType, int R>
__device__ __forceinline__ void store_tile_tma(const BlockGemmParams& p, const CUtensorMap* tm_y,
                                               const float (&total)[R], int m0, int n0, int c0,
                                               uint32_t box, int warp, int lane, bool issuer,
                                               int bar, const void* bias_row) {
  static_assert(R % (kYBox / 2) == 0, "whole 64-column boxes");
  // Lane 8i + k addresses row k of matrix i of a stmatrix.x4 that stores column groups q, q + 1
  // (8 columns, 16 bytes each): matrix i = rows 8 (i & 1) .. + 7 of the warp's 16, column group
  // q + (i >> 1). The 128-byte swizzle puts 16-byte chunk g of box row r at chunk g ^ (r % 8), and
  // r % 8 = k: the 8 rows of a matrix land in 8 different chunks (all 32 banks).
  const int i = lane >> 3, k = lane & 7;
  const uint32_t row_addr = box + uint32_t(16 * warp + 8 * (i & 1) + k) * 128u;
#pragma unroll
  for (int b = 0; b < R / (kYBox / 2); ++b) {
    if (n0 + kYBox * b >= p.N) break;  // the box lies past N (the same for the whole warpgroup)
    // This round's bias, loaded before the wait for the box so that the two latencies overlap.
    float bias[8][2];
#pragma unroll
    for (int g = 0; g < 8; ++g) {
      const int c = c0 + 8 * (8 * b + g);
      bias[g][0] = bias[g][1] = 0.f;
      if (bias_row && c < p.N) {
        bias[g][0] = load_as_float(bias_row, p.bias_type, c);
        if (c + 1 < p.N) bias[g][1] = load_as_float(bias_row, p.bias_type, c + 1);
      }
    }
    if (issuer) bulk_wait_group_read<0>();  // the previous store has read the box
    named_barrier_sync(bar, 128);
#pragma unroll
    for (int q = 0; q < 8; q += 2) {
      uint32_t v[4];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const float* t = &total[4 * (8 * b + q + u)];
        const float b0 = bias[q + u][0], b1 = bias[q + u][1];
        float x[4] = {t[0] + b0, t[1] + b1, t[2] + b0, t[3] + b1};
#pragma unroll
        for (int e = 0; e < 4; ++e) x[e] = fminf(fmaxf(x[e], p.clamp_lo), p.clamp_hi);
        v[2 * u] = pack_out2<kYType>(x[0], x[1]);      // row r0
        v[2 * u + 1] = pack_out2<kYType>(x[2], x[3]);  // row r0 + 8
      }
      stmatrix_x4(row_addr + (uint32_t((q + (i >> 1)) ^ k) << 4), v[0], v[1], v[2], v[3]);
    }
    fence_proxy_async_shared();  // the staging writes, before the TMA engine reads them
    named_barrier_sync(bar, 128);
    if (issuer) {
      tma_store_2d(tm_y, box, n0 + kYBox * b, m0);
      bulk_commit_group();
    }
  }
}

}  // namespace mixq::cuda::sm90
