// Prepare-time and helper kernels of the weight-only path: repacking canonical codes into the
// fragment-ordered layout, dequantizing that layout to 16-bit rows for cuBLAS, the bias/clamp
// epilogue after cuBLAS, and the act-order column gather.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "cuda/check.hpp"
#include "cuda/kernels/sm80_wo_stream.cuh"
#include "cuda/wo_kernels.hpp"
#include "mixq/numeric.hpp"

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

// One warp per 16x64 tile: each lane decodes the codes of its fragment slots (the layout puts
// them in that lane's words), applies its rows' (scale, offset) pairs, and parks the values in a
// shared-memory tile; the warp then writes the tile back row by row with 16-byte stores.
constexpr int kDequantWarps = 8;
constexpr int kTileLd = kChunkK + 4;  // floats; padding spreads the fragment writes over banks

template <typename OutT>
__device__ __forceinline__ void store8(OutT* dst, const float* v);
template <>
__device__ __forceinline__ void store8<half>(half* dst, const float* v) {
  uint4 o;
  half2* h = reinterpret_cast<half2*>(&o);
  for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<uint4*>(dst) = o;
}
template <>
__device__ __forceinline__ void store8<__nv_bfloat16>(__nv_bfloat16* dst, const float* v) {
  uint4 o;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&o);
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<uint4*>(dst) = o;
}
template <>
__device__ __forceinline__ void store8<float>(float* dst, const float* v) {
  *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
  *reinterpret_cast<float4*>(dst + 4) = make_float4(v[4], v[5], v[6], v[7]);
}

template <typename OutT, int BITS>
__global__ void __launch_bounds__(kDequantWarps * 32)
    dequant_kernel(const uint32_t* __restrict__ packed, const void* __restrict__ pairs, WoLayout L,
                   int64_t nt0, int64_t n_tiles, OutT* __restrict__ out, int64_t ld, int64_t row_limit) {
  __shared__ float tile[kDequantWarps][kTileRows * kTileLd];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* t = tile[warp];
  const int64_t C = L.Kp / kChunkK;
  constexpr int words_per_lane = BITS == 4 ? 4 : 8;
  const int64_t total = n_tiles * C;
  for (int64_t tw = int64_t(blockIdx.x) * kDequantWarps + warp; tw < total;
       tw += int64_t(gridDim.x) * kDequantWarps) {
    const int64_t nt = nt0 + tw / C, kc = tw % C;
    const uint32_t* wp = packed + ((nt * C + kc) * 32 + lane) * words_per_lane;
    // registers indexed only by unrolled constants (a run-time index would spill to local memory)
    uint32_t words[words_per_lane];
#pragma unroll
    for (int i = 0; i < words_per_lane; ++i) words[i] = __ldg(wp + i);
    const int64_t r0 = nt * kTileRows + lane / 4;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t col0 = kc * kChunkK + j * 16;
      // A 16-wide tile never straddles a group. A tile wholly in the K padding (K a multiple of
      // the group, Kp > K) would index one group past the row (past the pairs for the last row):
      // its values are zeros (`valid` below), so the row's last pair serves.
      const int64_t gi = std::min<int64_t>(col0 / L.group, L.groups - 1);
      const float2 pa = load_pair(pairs, L.pair_f32, r0 * L.groups + gi);
      const float2 pb = load_pair(pairs, L.pair_f32, (r0 + 8) * L.groups + gi);
#pragma unroll
      for (int sl = 0; sl < 8; ++sl) {
        int dr, dk;
        uint32_t u;
        if constexpr (BITS == 4) {
          u4_slot_coords(sl, lane, &dr, &dk);
          u = (words[j] >> (4 * sl)) & 0xF;
        } else {
          u8_slot_coords(sl / 4, sl % 4, lane, &dr, &dk);
          u = (words[2 * j + sl / 4] >> (8 * (sl % 4))) & 0xFF;
        }
        const float2 so = dr >= 8 ? pb : pa;
        const bool valid = col0 + dk < L.K;
        // e4m3 layouts: the byte is an e4m3 value (pairs are (s, 0))
        const float val = BITS == 8 && L.e4m3 ? e4m3_to_f32(uint8_t(u)) : float(u);
        t[dr * kTileLd + j * 16 + dk] = valid ? so.x * val + so.y : 0.f;
      }
    }
    __syncwarp();
    // 16 rows x 8 segments of 8 values: 4 segments per lane
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int seg = lane + 32 * q, row = seg / 8, cs = seg % 8;
      const int64_t orow = (nt - nt0) * kTileRows + row;
      if (orow < row_limit) store8<OutT>(out + orow * ld + kc * kChunkK + cs * 8, t + row * kTileLd + cs * 8);
    }
    __syncwarp();
  }
}

// dst[m][n] = clamp(src[m][n] + bias[n]); src and dst may be the same matrix (in place).
__global__ void epilogue_kernel(const void* src, int64_t lds, IoType st, void* dst, int64_t ldd,
                                IoType dt, int64_t M, int64_t N, const void* bias, IoType bt,
                                float lo, float hi) {
  const int64_t total = M * N;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = i / N, n = i % N;
    const float v = load_io(src, m * lds + n, st) + (bias ? load_io(bias, n, bt) : 0.f);
    store_io(dst, m * ldd + n, dt, fminf(fmaxf(v, lo), hi));
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
  const int64_t warps = n_tiles * (layout.Kp / kChunkK);
  const int blocks = int(std::min<int64_t>((warps + kDequantWarps - 1) / kDequantWarps, 132 * 16));
  const int threads = kDequantWarps * 32;
  auto launch = [&](auto* typed_out) {
    using OutT = std::remove_pointer_t<decltype(typed_out)>;
    if (layout.bits == 4)
      dequant_kernel<OutT, 4><<<blocks, threads, 0, stream>>>(packed, pairs, layout, nt0, n_tiles, typed_out, ld, rows);
    else
      dequant_kernel<OutT, 8><<<blocks, threads, 0, stream>>>(packed, pairs, layout, nt0, n_tiles, typed_out, ld, rows);
  };
  if (out_type == 0) launch(static_cast<half*>(out));
  else if (out_type == 1) launch(static_cast<__nv_bfloat16*>(out));
  else launch(static_cast<float*>(out));
  MIXQ_CUDA_CHECK(cudaGetLastError());
}

void launch_epilogue(const void* src, int64_t lds, int src_type, void* dst, int64_t ldd,
                     int dst_type, int64_t M, int64_t N, const void* bias, int bias_type, float lo,
                     float hi, cudaStream_t stream) {
  epilogue_kernel<<<grid_for(M * N, 256), 256, 0, stream>>>(
      src, lds, IoType(src_type), dst, ldd, IoType(dst_type), M, N, bias, IoType(bias_type), lo, hi);
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
