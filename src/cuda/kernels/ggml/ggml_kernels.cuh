// The kernels of GGUF weights at their native width (ggml_gpu_format.hpp):
//   quantize_x   activations -> q8 per 32 columns (the integer path's X, GQ8), one warp per chunk
//   q8_gemv      Y = X Wᵀ for M <= 16 on dp4a: a warp owns RPW rows and walks K by chunks of 32
//                per lane; the chunk's codes are decoded once and reused for every token. Two
//                ways to keep the weight stream in flight: a per-warp shared-memory ring filled
//                by cp.async (q8_gemv_staged, 1-4 tokens) or a few chunks in registers (5-16)
//   dequant      W rows -> f16 / bf16 / f32, ggml's exact arithmetic (the cuBLAS path)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/kernels/common/float_io.cuh"
#include "cuda/kernels/common/grid_dependency.cuh"
#include "cuda/kernels/common/mma_sm80.cuh"
#include "cuda/kernels/ggml/ggml_chunk.cuh"

namespace mixq::cuda::ggml {

constexpr int kGemvWarps = 4;

// One warp per (token, 32-column chunk): d = amax / 127, q = round(x / d) (ties away from zero,
// as the CPU integer path and its test reference round), the 16-column sums of x and of q.
template <typename XT>
__global__ void __launch_bounds__(256) quantize_x_kernel(const XT* __restrict__ x, int64_t ldx,
                                                         int M, int64_t K, GQ8 out) {
  allow_dependent_launch();  // the GEMV may start loading its weights now
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

// One chunk c of each of the warp's RPW rows (codes W, scales S) against the MR tokens' q8 chunk.
template <GType T, int MR, int RPW>
__device__ __forceinline__ void gemv_chunk(const GemvParams& p, const uint32_t (&W)[RPW][8],
                                           const ChunkScales (&S)[RPW], int64_t c, float (&acc)[RPW][MR]) {
  constexpr GFormat F = gformat(T);
  const int64_t chunks = p.K >> 5;
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    const int mm = m < p.M ? m : p.M - 1;
    // the token's words in the GQ8 order 0 4 1 5 | 2 6 3 7
    const int8_t* xr = p.xq + mm * p.K + 32 * c;
    const int4 a = *reinterpret_cast<const int4*>(xr);
    const int4 b = *reinterpret_cast<const int4*>(xr + 16);
    const float4 mt = p.xmeta[mm * chunks + c];
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

// The warp's sums over its lanes, stored with the epilogue (bias, clamp, the output type).
template <int MR, int RPW>
__device__ __forceinline__ void gemv_store(const GemvParams& p, int64_t row0, int lane, float (&acc)[RPW][MR]) {
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int m = 0; m < MR; ++m) {
      float v = acc[r][m];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      const int64_t row = row0 + r;
      if (lane == ((r * MR + m) & 31) && m < p.M && row < p.N) {
        if (p.bias) v += load_as_float(p.bias, p.bias_type, row);
        if (p.clamp_lo > -INFINITY) v = fmaxf(v, p.clamp_lo);
        if (p.clamp_hi < INFINITY) v = fminf(v, p.clamp_hi);
        store_float(p.y, p.y_type, m * p.ldy + row, v);
      }
    }
}

// The register-ring GEMV (5-16 tokens): each lane keeps DEPTH chunks of its rows in flight in
// registers.
template <GType T, int MR, int RPW>
__global__ void __launch_bounds__(kGemvWarps * 32) q8_gemv_kernel(const GemvParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t row0 = (int64_t(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5)) * RPW;
  if (row0 >= p.N) return;
  int64_t rows[RPW];
#pragma unroll
  for (int r = 0; r < RPW; ++r) rows[r] = row0 + r < p.N ? row0 + r : p.N - 1;
  const int64_t chunks = p.K >> 5;
  float acc[RPW][MR];
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int m = 0; m < MR; ++m) acc[r][m] = 0.f;

  // A ring of DEPTH chunks per lane in flight; the first ones are requested before waiting on
  // the quantizer (PDL).
  constexpr int DEPTH = RPW == 1 ? 4 : 2;
  RawChunk<T> raw[DEPTH][RPW];
#pragma unroll
  for (int s = 0; s < DEPTH; ++s)
    if (lane + 32 * s < chunks) {
#pragma unroll
      for (int r = 0; r < RPW; ++r) load_chunk<T>(p.w, rows[r], lane + 32 * s, raw[s][r]);
    }
  grid_dependency_wait();  // X is the quantizer's output (a no-op without PDL)
  for (int64_t c0 = lane; c0 < chunks; c0 += 32 * DEPTH) {
#pragma unroll
    for (int s = 0; s < DEPTH; ++s) {
      const int64_t c = c0 + 32 * s;
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
        for (int r = 0; r < RPW; ++r) load_chunk<T>(p.w, rows[r], c + 32 * DEPTH, raw[s][r]);
      }
      gemv_chunk<T, MR, RPW>(p, W, S, c, acc);
    }
  }
  gemv_store<MR, RPW>(p, row0, lane, acc);
}

// One row's 32 chunks of every plane, as a slot of the staged GEMV's per-warp ring holds them: the
// planes' bytes in file order (so the slot is a GPlanes view whose chunk index is the lane).
template <GType T>
struct GemvSlot {
  static constexpr GFormat F = gformat(T);
  static constexpr int kLo = 32 * F.lo_chunk();
  static constexpr int kHi = 32 * F.hi_chunk();
  static constexpr int kD = F.qk == 32 ? 32 * F.d_bytes() : 4 * F.d_bytes();  // 4 super-blocks
  static constexpr int kSc = F.qk == 32 ? 0 : 4 * F.sc_bytes();
  static constexpr int kDPiece = kD >= 16 ? 16 : 8;  // the 2-byte scales of 4 super-blocks: 8 bytes
  static constexpr int kHiOff = kLo, kDOff = kHiOff + kHi, kScOff = kDOff + (kD + 15) / 16 * 16;
  static constexpr int kBytes = kScOff + kSc;
  static_assert(kBytes % 16 == 0, "slot not 16-byte aligned");

  __device__ static GPlanes view(const uint8_t* slot) {
    GPlanes v;
    v.lo = slot;
    v.hi = slot + kHiOff;
    v.d = slot + kDOff;
    v.sc = slot + kScOff;
    return v;  // pitches unused: row 0
  }
};

// Bytes [off, off + len) of a plane's row into a slot, in pieces of V bytes spread over the warp's
// lanes; pieces that start past len are skipped (the plane pitches are padded to 16 bytes, so a
// piece that starts inside a row's bytes ends inside its pitch).
template <int BYTES, int V>
__device__ __forceinline__ void copy_plane_piece(uint32_t dst, const uint8_t* src, int len, int lane) {
  constexpr int kPieces = BYTES / V;
#pragma unroll
  for (int u = 0; u < (kPieces + 31) / 32; ++u) {
    const int i = lane + 32 * u;
    if ((kPieces % 32 == 0 || i < kPieces) && i * V < len) {
      if constexpr (V == 16) cp_async_16_l2_256(dst + i * 16, src + i * 16);
      else cp_async_8_u32(dst + i * 8, src + i * 8);
    }
  }
}

// Chunks [c0, c0 + n) (n <= 32, c0 a multiple of 32) of row `row` into the slot at `dst`.
template <GType T>
__device__ __forceinline__ void copy_gemv_slot(uint32_t dst, const GPlanes& w, int64_t row, int64_t c0,
                                               int n, int lane) {
  using S = GemvSlot<T>;
  constexpr GFormat F = S::F;
  copy_plane_piece<S::kLo, 16>(dst, w.lo + row * w.lo_pitch + c0 * F.lo_chunk(), n * F.lo_chunk(), lane);
  if constexpr (F.hb > 0)
    copy_plane_piece<S::kHi, 16>(dst + S::kHiOff, w.hi + row * w.hi_pitch + c0 * F.hi_chunk(),
                                 n * F.hi_chunk(), lane);
  if constexpr (F.qk == 32) {
    copy_plane_piece<S::kD, S::kDPiece>(dst + S::kDOff, w.d + row * w.d_pitch + c0 * F.d_bytes(),
                                        n * F.d_bytes(), lane);
  } else {
    const int64_t sb = c0 >> 3;
    const int nb = (n + 7) >> 3;  // super-blocks present
    copy_plane_piece<S::kD, S::kDPiece>(dst + S::kDOff, w.d + row * w.d_pitch + sb * F.d_bytes(),
                                        nb * F.d_bytes(), lane);
    copy_plane_piece<S::kSc, 16>(dst + S::kScOff, w.sc + row * w.sc_pitch + sb * F.sc_bytes(),
                                 nb * F.sc_bytes(), lane);
  }
}

// The staged GEMV's ring depth (slots of RPW rows each) per warp: about 6 KB a warp, 2..8 slots.
// Its weights wait in shared memory rather than registers, so the bytes in flight an SM holds are
// not capped by the register file: ~24 KB a CTA, 8-9 CTAs an SM, ~200 KB in flight.
template <GType T>
__host__ __device__ constexpr int gemv_ring_depth(int rpw) {
  const int d = 6144 / (rpw * GemvSlot<T>::kBytes);
  return d < 2 ? 2 : d > 8 ? 8 : d;
}
template <GType T, int RPW>
__host__ __device__ constexpr int gemv_staged_smem_bytes() {
  return kGemvWarps * gemv_ring_depth<T>(RPW) * RPW * GemvSlot<T>::kBytes;
}

// The staged GEMV (1-4 tokens): each warp streams its RPW rows 32 chunks (one a lane) a step
// through a ring of shared-memory slots filled by cp.async; a lane multiplies its chunk of the
// step from the slot. The register-ring kernel above holds ~90 KB an SM in flight for the 4-bit
// types (4 chunks a lane, occupancy capped by its registers), short of what the HBM stream needs.
template <GType T, int MR, int RPW>
__global__ void __launch_bounds__(kGemvWarps * 32) q8_gemv_staged_kernel(const GemvParams p) {
  using S = GemvSlot<T>;
  constexpr int D = gemv_ring_depth<T>(RPW);
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row0 = (int64_t(blockIdx.x) * kGemvWarps + warp) * RPW;
  if (row0 >= p.N) return;  // (no block-wide barrier below)
  int64_t rows[RPW];
#pragma unroll
  for (int r = 0; r < RPW; ++r) rows[r] = row0 + r < p.N ? row0 + r : p.N - 1;
  const int64_t chunks = p.K >> 5;
  const int steps = int((chunks + 31) >> 5);
  uint8_t* ring = smem + warp * (D * RPW * S::kBytes);
  const uint32_t ring_s = smem_addr(ring);
  // step k into slot k % D: one cp.async group a step (empty past the last), so that the wait
  // below counts steps
  auto issue = [&](int k) {
    if (k < steps) {
      const int64_t c0 = int64_t(k) * 32;
      const int n = int(chunks - c0 < 32 ? chunks - c0 : 32);
#pragma unroll
      for (int r = 0; r < RPW; ++r)
        copy_gemv_slot<T>(ring_s + uint32_t(((k % D) * RPW + r) * S::kBytes), p.w, rows[r], c0, n, lane);
    }
    cp_async_commit();
  };
  // the weights of the first D - 1 steps are requested before waiting on the quantizer (PDL)
#pragma unroll
  for (int k = 0; k < D - 1; ++k) issue(k);
  grid_dependency_wait();

  float acc[RPW][MR];
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int m = 0; m < MR; ++m) acc[r][m] = 0.f;
  for (int k = 0; k < steps; ++k) {
    cp_async_wait<D - 2>();  // this lane's copies of step k have landed ...
    __syncwarp();            // ... and every lane's; every lane is done with slot (k - 1) % D
    issue(k + D - 1);
    const int64_t c = int64_t(k) * 32 + lane;
    if (c < chunks) {
      uint32_t W[RPW][8];
      ChunkScales CS[RPW];
#pragma unroll
      for (int r = 0; r < RPW; ++r) {
        RawChunk<T> raw;
        load_chunk<T>(S::view(ring + ((k % D) * RPW + r) * S::kBytes), 0, lane, raw, PlainLoad{});
        decode_codes<T>(raw, W[r]);
        CS[r] = decode_scales<T>(raw);
      }
      gemv_chunk<T, MR, RPW>(p, W, CS, c, acc);
    }
  }
  cp_async_wait<0>();  // no copy outstanding at exit (the trailing groups are empty)
  gemv_store<MR, RPW>(p, row0, lane, acc);
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
