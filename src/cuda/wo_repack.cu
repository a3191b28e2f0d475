// Prepare-time and helper kernels of the weight-only path: repacking canonical codes into the
// fragment-ordered layout, dequantizing that layout to 16-bit rows for cuBLAS, the bias/clamp
// epilogue after cuBLAS, and the act-order column gather.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/check.hpp"
#include "cuda/kernels/sm80_wo_stream.cuh"
#include "cuda/wo_kernels.hpp"

namespace mixq::cuda {

namespace {

// Row and column of byte/nibble slot s of the word a lane holds for one 16x16 tile.
__device__ __forceinline__ void u4_slot_coords(int s, int lane, int* dr, int* dk) {
  *dr = lane / 4 + ((s & 1) ? 8 : 0);
  *dk = (lane % 4) * 2 + (((s >> 1) & 1) ? 8 : 0) + (s >= 4 ? 1 : 0);
}
__device__ __forceinline__ void u8_slot_coords(int half_word, int b, int lane, int* dr, int* dk) {
  *dr = lane / 4 + (b >= 2 ? 8 : 0);
  *dk = (lane % 4) * 2 + (b & 1) + half_word * 8;
}

__global__ void repack_kernel(const uint8_t* __restrict__ src, int64_t row_bytes, bool signed_codes,
                              WoLayout L, uint32_t* __restrict__ dst, int64_t total_words) {
  const int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= total_words) return;
  const int64_t C = L.Kp / kChunkK;
  const int words_per_lane = L.bits == 4 ? 4 : 8;
  const int wi = int(w % words_per_lane);
  const int lane = int((w / words_per_lane) % 32);
  const int64_t tile = w / (words_per_lane * 32);
  const int64_t kc = tile % C, nt = tile / C;
  uint32_t out = 0;
  if (L.bits == 4) {
    for (int s = 0; s < 8; ++s) {
      int dr, dk;
      u4_slot_coords(s, lane, &dr, &dk);
      const int64_t row = nt * kTileRows + dr, col = kc * kChunkK + wi * 16 + dk;
      uint32_t u = 0;
      if (row < L.N && col < L.K) {
        u = (src[row * row_bytes + col / 2] >> ((col & 1) * 4)) & 0xF;
        if (signed_codes) u ^= 0x8;  // two's complement nibble q -> q + 8
      }
      out |= u << (4 * s);
    }
  } else {
    const int t = wi / 2, h = wi % 2;
    for (int b = 0; b < 4; ++b) {
      int dr, dk;
      u8_slot_coords(h, b, lane, &dr, &dk);
      const int64_t row = nt * kTileRows + dr, col = kc * kChunkK + t * 16 + dk;
      uint32_t u = 0;
      if (row < L.N && col < L.K) {
        u = src[row * row_bytes + col];
        if (signed_codes) u ^= 0x80;  // q -> q + 128
      }
      out |= u << (8 * b);
    }
  }
  dst[w] = out;
}

__device__ __forceinline__ float2 load_pair(const void* pairs, bool f32, int64_t i) {
  return f32 ? static_cast<const float2*>(pairs)[i]
             : __half22float2(static_cast<const half2*>(pairs)[i]);
}

// One thread per (row tile, chunk, lane): decodes the lane's words and writes its value pairs.
__global__ void dequant_kernel(const uint32_t* __restrict__ packed, const void* __restrict__ pairs,
                               WoLayout L, int64_t nt0, int64_t n_tiles, int out_type, void* out,
                               int64_t ld, int64_t row_limit) {
  const int64_t C = L.Kp / kChunkK;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n_tiles * C * 32) return;
  const int lane = int(idx % 32);
  const int64_t kc = (idx / 32) % C, nt = nt0 + idx / (32 * C);
  const int words_per_lane = L.bits == 4 ? 4 : 8;
  const uint32_t* wp = packed + ((nt * C + kc) * 32 + lane) * words_per_lane;
  for (int t = 0; t < 4; ++t) {
    // values of the 8 slots, as (row offset, col offset, code)
    int dr[8], dk[8];
    uint32_t u[8];
    if (L.bits == 4) {
      const uint32_t w = wp[t];
      for (int s = 0; s < 8; ++s) {
        u4_slot_coords(s, lane, &dr[s], &dk[s]);
        u[s] = (w >> (4 * s)) & 0xF;
      }
    } else {
      for (int h = 0; h < 2; ++h) {
        const uint32_t w = wp[2 * t + h];
        for (int b = 0; b < 4; ++b) {
          u8_slot_coords(h, b, lane, &dr[h * 4 + b], &dk[h * 4 + b]);
          u[h * 4 + b] = (w >> (8 * b)) & 0xFF;
        }
      }
    }
    for (int s = 0; s < 8; ++s) {
      const int64_t row = nt * kTileRows + dr[s];
      const int64_t col = kc * kChunkK + t * 16 + dk[s];
      const int64_t orow = row - nt0 * kTileRows;
      if (orow >= row_limit) continue;
      float v = 0.f;
      if (col < L.K && row < L.N) {
        const float2 so = load_pair(pairs, L.pair_f32, row * L.groups + (col / L.group));
        v = so.x * float(u[s]) + so.y;
      }
      const int64_t o = orow * ld + col;
      if (out_type == 0) static_cast<half*>(out)[o] = __float2half_rn(v);
      else if (out_type == 1) static_cast<__nv_bfloat16*>(out)[o] = __float2bfloat16_rn(v);
      else static_cast<float*>(out)[o] = v;
    }
  }
}

__global__ void bias_clamp_kernel(void* y, int64_t ldy, IoType yt, int64_t M, int64_t N,
                                  const void* bias, IoType bt, float lo, float hi) {
  const int64_t total = M * N;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = i / N, n = i % N;
    float v = load_io(y, m * ldy + n, yt) + (bias ? load_io(bias, n, bt) : 0.f);
    store_io(y, m * ldy + n, yt, fminf(fmaxf(v, lo), hi));
  }
}

__global__ void gather_kernel(const uint8_t* x, int64_t ldx_bytes, int elem_bytes,
                              const int32_t* perm, int64_t M, int64_t K, uint8_t* out,
                              int64_t ldo_bytes) {
  const int64_t total = M * K;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = i / K, j = i % K;
    const uint8_t* s = x + m * ldx_bytes + int64_t(perm[j]) * elem_bytes;
    uint8_t* d = out + m * ldo_bytes + j * elem_bytes;
    if (elem_bytes == 2) *reinterpret_cast<uint16_t*>(d) = *reinterpret_cast<const uint16_t*>(s);
    else *reinterpret_cast<uint32_t*>(d) = *reinterpret_cast<const uint32_t*>(s);
  }
}

int grid_for(int64_t work, int threads) {
  const int64_t b = (work + threads - 1) / threads;
  return int(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

}  // namespace

void launch_wo_repack(const uint8_t* canonical, int64_t row_bytes, bool signed_codes,
                      const WoLayout& layout, uint32_t* packed, cudaStream_t stream) {
  const int64_t total = layout.packed_bytes() / 4;
  const int threads = 256;
  repack_kernel<<<int((total + threads - 1) / threads), threads, 0, stream>>>(
      canonical, row_bytes, signed_codes, layout, packed, total);
  MIXQ_CUDA_CHECK(cudaGetLastError());
}

void launch_wo_dequant(const uint32_t* packed, const void* pairs, const WoLayout& layout,
                       int64_t n0, int64_t rows, int out_type, void* out, int64_t ld,
                       cudaStream_t stream) {
  MIXQ_CHECK(n0 % kTileRows == 0, ErrorCode::Internal, "wo_dequant: n0 ", n0, " not tile aligned");
  const int64_t nt0 = n0 / kTileRows, n_tiles = (rows + kTileRows - 1) / kTileRows;
  const int64_t work = n_tiles * (layout.Kp / kChunkK) * 32;
  const int threads = 256;
  dequant_kernel<<<int((work + threads - 1) / threads), threads, 0, stream>>>(
      packed, pairs, layout, nt0, n_tiles, out_type, out, ld, rows);
  MIXQ_CUDA_CHECK(cudaGetLastError());
}

void launch_bias_clamp(void* y, int64_t ldy, int y_type, int64_t M, int64_t N, const void* bias,
                       int bias_type, float lo, float hi, cudaStream_t stream) {
  bias_clamp_kernel<<<grid_for(M * N, 256), 256, 0, stream>>>(
      y, ldy, IoType(y_type), M, N, bias, IoType(bias_type), lo, hi);
  MIXQ_CUDA_CHECK(cudaGetLastError());
}

void launch_gather_columns(const void* x, int64_t ldx, int elem_bytes, const int32_t* perm,
                           int64_t M, int64_t K, void* out, int64_t ldo, cudaStream_t stream) {
  gather_kernel<<<grid_for(M * K, 256), 256, 0, stream>>>(
      static_cast<const uint8_t*>(x), ldx * elem_bytes, elem_bytes, perm, M, K,
      static_cast<uint8_t*>(out), ldo * elem_bytes);
  MIXQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mixq::cuda
