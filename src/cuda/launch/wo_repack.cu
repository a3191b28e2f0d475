// Prepare-time and helper kernels of the weight-only path: repacking canonical codes into the
// fragment-ordered layout, dequantizing that layout to 16-bit rows for cuBLAS, the bias/clamp
// epilogue after cuBLAS, and the act-order column gather.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "cuda/runtime/check.hpp"
#include "cuda/kernels/wo/sm80_wo_stream.cuh"
#include "cuda/launch/wo_kernels.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cuda {

namespace {

// Row and column of byte/nibble slot s of the word a lane holds for one 16x16 tile.
__device__ __forceinline__ void u4_slot_coords(int s, int lane, int* dr, int* dk) {
  *dr = lane / 4 + ((s & 1) ? 8 : 0);
  *dk = (lane % 4) * 2 + (((s >> 1) & 1) ? 8 : 0) + (s >= 4 ? 1 : 0);
}
// W4A8 (WoLayout::fp8_act): word j of a lane's 16 bytes holds, for rows r = lane / 4 (even
// slots) and r + 8 (odd slots), the four bytes b of register (j & 1) * 2 + row of the e4m3 MMA's
// k32 step j / 2 (columns 32 (j / 2) + 16 (j & 1) + 4 (lane % 4) + b), byte b in slot 2 b + row:
// masking the word (shifted by 4 for r + 8) with 0x0F0F0F0F gives the register, each code in its
// byte (kernels/common/sm90_wgmma_dequant.cuh: u4_bytes_k32).
__device__ __forceinline__ void u4f8_slot_coords(int s, int word, int lane, int* dr, int* dk) {
  *dr = lane / 4 + ((s & 1) ? 8 : 0);
  *dk = 32 * (word >> 1) + 16 * (word & 1) + 4 * (lane % 4) + (s >> 1);
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
      if (L.fp8_act) {
        u4f8_slot_coords(s, wi, lane, &dr, &dk);
      } else {
        u4_slot_coords(s, lane, &dr, &dk);
        dk += wi * 16;
      }
      const int64_t row = nt * kTileRows + dr, col = kc * kChunkK + dk;
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

// ---- 16-bit dequantization (f16 / bf16 rows for cuBLAS), without shared memory ----
// The kernel above parks every value in a shared-memory tile to transpose it: with its scalar
// stores and row-major pair loads it ran at 93% of L1 throughput and 22% of DRAM bandwidth
// (27.4 us on 4096x4096 W4, ncu: docs/decisions/wo-dequantize-cublas.md). Here a lane packs its fragment
// values into 16-bit pairs in registers and the four lanes of a quad, which hold the same rows,
// transpose their words with two rounds of shuffles; each lane then owns two 8-column segments of
// its two rows and writes them with 16-byte stores (a quad covers a 128-byte row segment, 64
// contiguous bytes per store instruction).
// The pairs come from the lane-order copy (stream_pair_index: rows r and r + 8 adjacent, one load),
// and the next tile's words and pairs are requested before the current one is decoded.

// Lane q of a quad holds v[j] = word q of segment j; afterwards it holds word j of segment q.
__device__ __forceinline__ void quad_transpose(uint32_t (&v)[4], int q) {
  const bool b1 = (q & 2) != 0, b0 = (q & 1) != 0;
  uint32_t s0 = b1 ? v[0] : v[2], s1 = b1 ? v[1] : v[3];
  uint32_t r0 = __shfl_xor_sync(0xffffffffu, s0, 2), r1 = __shfl_xor_sync(0xffffffffu, s1, 2);
  if (b1) { v[0] = r0; v[1] = r1; } else { v[2] = r0; v[3] = r1; }
  s0 = b0 ? v[0] : v[1];
  s1 = b0 ? v[2] : v[3];
  r0 = __shfl_xor_sync(0xffffffffu, s0, 1);
  r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
  if (b0) { v[0] = r0; v[2] = r1; } else { v[1] = r0; v[3] = r1; }
}

// (s, o') of rows r and r + 8 of tile nt, group gi, from the lane-order copy
__device__ __forceinline__ void load_stream_pairs(const void* pairs_stream, bool f32, int64_t nt, int lane,
                                                  int64_t gi, int64_t groups, float2* pa, float2* pb) {
  const int64_t i = stream_pair_index(nt * kTileRows + lane / 4, gi, groups);  // rows r, r + 8: i, i + 1
  if (f32) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(static_cast<const float2*>(pairs_stream) + i));
    *pa = make_float2(v.x, v.y);
    *pb = make_float2(v.z, v.w);
  } else {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(static_cast<const half2*>(pairs_stream) + i));
    *pa = __half22float2(*reinterpret_cast<const half2*>(&v.x));
    *pb = __half22float2(*reinterpret_cast<const half2*>(&v.y));
  }
}

constexpr int kDequant16Warps = 8;

template <typename OutT, int BITS>
__global__ void __launch_bounds__(kDequant16Warps * 32)
    dequant16_kernel(const uint32_t* __restrict__ packed, const void* __restrict__ pairs_stream, WoLayout L,
                     int64_t nt0, int64_t n_tiles, OutT* __restrict__ out, int64_t ld, int64_t row_limit) {
  constexpr int kWords = BITS == 4 ? 4 : 8;  // per lane and 16x64 tile
  const int lane = threadIdx.x % 32, q = lane % 4, g = lane / 4;
  // 32-bit tile coordinates, advanced by the grid stride without a division per tile (the host
  // checks that n_tiles * C fits)
  const int C = int(L.Kp / kChunkK);
  const int total = int(n_tiles) * C;
  const int stride = int(gridDim.x) * kDequant16Warps;
  const int d_nt = stride / C, d_kc = stride % C;
  auto advance = [&](int& nt, int& kc) {
    nt += d_nt;
    kc += d_kc;
    if (kc >= C) {
      kc -= C;
      ++nt;
    }
  };
  const int group = int(std::min<int64_t>(L.group, int64_t(1) << 30)), groups = int(L.groups), K = int(L.K);
  const bool fine_groups = group < kChunkK;  // 16 / 32: a group per 16-wide K tile or pair of them
  // a tile's words and, for groups of 64 and more, its one pair of (s, o') pairs: the next tile's
  // are requested before the current one is decoded (the pairs are a dependent DRAM round trip
  // otherwise: rows r and r + 8 of a tile are a new line for every other chunk)
  uint32_t cur[kWords], nxt[kWords];
  float2 cur_pa = make_float2(0.f, 0.f), cur_pb = cur_pa, nxt_pa = cur_pa, nxt_pb = cur_pa;
  auto load_tile = [&](int nt, int kc, uint32_t (&w)[kWords], float2& pa, float2& pb) {
    const uint4* wp =
        reinterpret_cast<const uint4*>(packed + (((nt0 + nt) * C + kc) * 32 + lane) * int64_t(kWords));
#pragma unroll
    for (int i = 0; i < kWords / 4; ++i) {
      const uint4 v = ld_stream_u4(wp + i, 0);
      w[4 * i + 0] = v.x;
      w[4 * i + 1] = v.y;
      w[4 * i + 2] = v.z;
      w[4 * i + 3] = v.w;
    }
    if (!fine_groups)
      load_stream_pairs(pairs_stream, L.pair_f32, nt0 + nt, lane, min(kc * kChunkK / group, groups - 1), groups,
                        &pa, &pb);
  };
  int tw = int(blockIdx.x) * kDequant16Warps + int(threadIdx.x) / 32;
  int nt = tw / C, kc = tw % C;  // this warp's tile (relative to nt0) and chunk
  int n_nt = nt, n_kc = kc;      // the next one's
  advance(n_nt, n_kc);
  if (tw < total) load_tile(nt, kc, cur, cur_pa, cur_pb);
  for (; tw < total; tw += stride) {
    if (tw + stride < total) load_tile(n_nt, n_kc, nxt, nxt_pa, nxt_pb);
    // R[h][s][i]: row g + 8h, word i of the quad's 8-column segment s * 4 + i / 2 (the lane's
    // columns 2q, 2q + 1 of 16-wide tile j are in segment 2j, its columns 2q + 8, 2q + 9 in 2j + 1)
    uint32_t R[2][2][4];
    // CHECK: the chunk reaches past K (its columns there are zeros); every other chunk skips the test
    auto decode = [&](auto check) {
      float2 pa = cur_pa, pb = cur_pb;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col0 = kc * kChunkK + j * 16;
        if (fine_groups)  // groups of 16 / 32: the 16-wide tile's own group
          load_stream_pairs(pairs_stream, L.pair_f32, nt0 + nt, lane, min(col0 / group, groups - 1), groups, &pa, &pb);
        // codes u[row half][column]: columns 2q, 2q + 1, 2q + 8, 2q + 9 of this 16-wide tile
        uint32_t u[2][4];
        if constexpr (BITS == 4) {
          // nibble slot s: row + 8 if s odd, column + 8 if bit 1, column + 1 if s >= 4 (u4_slot_coords)
          const uint32_t w = cur[j];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            u[h][0] = (w >> (4 * (0 + h))) & 0xF;
            u[h][1] = (w >> (4 * (4 + h))) & 0xF;
            u[h][2] = (w >> (4 * (2 + h))) & 0xF;
            u[h][3] = (w >> (4 * (6 + h))) & 0xF;
          }
        } else {
          // byte b of half-word h: row + 8 if b >= 2, column + 1 if b odd, column + 8 for h = 1
          const uint32_t w0 = cur[2 * j], w1 = cur[2 * j + 1];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            u[h][0] = (w0 >> (16 * h)) & 0xFF;
            u[h][1] = (w0 >> (16 * h + 8)) & 0xFF;
            u[h][2] = (w1 >> (16 * h)) & 0xFF;
            u[h][3] = (w1 >> (16 * h + 8)) & 0xFF;
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float2 so = h ? pb : pa;
          float v[4];
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int dk = 2 * q + (c & 1) + (c >= 2 ? 8 : 0);
            // the exact integer u without an I2F (2^23 + u as a float, minus 2^23)
            const float val = BITS == 8 && L.e4m3 ? e4m3_to_f32(uint8_t(u[h][c]))
                                                  : __uint_as_float(0x4B000000u | u[h][c]) - 8388608.f;
            v[c] = !decltype(check)::value || col0 + dk < K ? fmaf(so.x, val, so.y) : 0.f;
          }
          R[h][j / 2][(j % 2) * 2 + 0] = pack2<OutT>(v[0], v[1]);
          R[h][j / 2][(j % 2) * 2 + 1] = pack2<OutT>(v[2], v[3]);
        }
      }
    };
    if ((kc + 1) * kChunkK <= K) decode(std::false_type{});
    else decode(std::true_type{});
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int s = 0; s < 2; ++s) quad_transpose(R[h][s], q);
    // lane q: 8-column segments q and q + 4 of rows g and g + 8; each store instruction writes
    // 64 contiguous bytes of a row per quad (whole 32-byte sectors)
    const int64_t orow = int64_t(nt) * kTileRows + g;
    OutT* dst = out + orow * ld + kc * kChunkK + 8 * q;
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (orow + 8 * h < row_limit) {
        *reinterpret_cast<uint4*>(dst + 8 * h * ld) = make_uint4(R[h][0][0], R[h][0][1], R[h][0][2], R[h][0][3]);
        *reinterpret_cast<uint4*>(dst + 8 * h * ld + 32) = make_uint4(R[h][1][0], R[h][1][1], R[h][1][2], R[h][1][3]);
      }
#pragma unroll
    for (int i = 0; i < kWords; ++i) cur[i] = nxt[i];
    cur_pa = nxt_pa;
    cur_pb = nxt_pb;
    nt = n_nt;
    kc = n_kc;
    advance(n_nt, n_kc);
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
    const int32_t src = perm[j];  // < 0: a hole of an act-order shard's layout, zero
    const uint8_t* s = x + m * ldx_bytes + int64_t(src) * elem_bytes;
    uint8_t* d = out + m * ldo_bytes + j * elem_bytes;
    if (elem_bytes == 2) *reinterpret_cast<uint16_t*>(d) = src < 0 ? 0 : *reinterpret_cast<const uint16_t*>(s);
    else *reinterpret_cast<uint32_t*>(d) = src < 0 ? 0 : *reinterpret_cast<const uint32_t*>(s);
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

void launch_wo_dequant(const uint32_t* packed, const void* pairs, const void* pairs_stream,
                       const WoLayout& layout, int64_t n0, int64_t rows, int out_type, void* out,
                       int64_t ld, int sm_count, cudaStream_t stream) {
  MIXQ_CHECK(n0 % kTileRows == 0, ErrorCode::Internal, "wo_dequant: n0 ", n0, " not tile aligned");
  const int64_t nt0 = n0 / kTileRows, n_tiles = (rows + kTileRows - 1) / kTileRows;
  const int64_t warps = n_tiles * (layout.Kp / kChunkK);
  if (out_type != 2) {
    MIXQ_CHECK(warps < (int64_t(1) << 30), ErrorCode::Internal, "wo_dequant: ", warps,
               " tiles overflow the kernel's 32-bit tile index");
    // 16-bit rows: the register-transpose kernel, one resident wave of blocks striding over the
    // tiles (each warp keeps its next tile's words in flight)
    auto launch16 = [&](auto* typed_out, auto bits) {
      using OutT = std::remove_pointer_t<decltype(typed_out)>;
      const auto kernel = dequant16_kernel<OutT, decltype(bits)::value>;
      static const int per_sm = [&] {  // one per instantiation (OutT, bits)
        int b = 0;
        return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, kDequant16Warps * 32, 0) == cudaSuccess && b > 0
                   ? b : 1;
      }();
      const int blocks =
          int(std::min<int64_t>((warps + kDequant16Warps - 1) / kDequant16Warps, int64_t(sm_count) * per_sm));
      kernel<<<blocks, kDequant16Warps * 32, 0, stream>>>(packed, pairs_stream, layout, nt0, n_tiles, typed_out, ld,
                                                          rows);
    };
    using B4 = std::integral_constant<int, 4>;
    using B8 = std::integral_constant<int, 8>;
    if (out_type == 0) {
      if (layout.bits == 4) launch16(static_cast<half*>(out), B4{});
      else launch16(static_cast<half*>(out), B8{});
    } else {
      if (layout.bits == 4) launch16(static_cast<__nv_bfloat16*>(out), B4{});
      else launch16(static_cast<__nv_bfloat16*>(out), B8{});
    }
    MIXQ_CUDA_CHECK(cudaGetLastError());
    return;
  }
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
