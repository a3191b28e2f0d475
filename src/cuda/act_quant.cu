// Run-time activation quantizers on the GPU: per-block INT8 (scale, offset, code sums) and
// per-token 1x128 FP8, writing the layout fixed in act_quant.hpp.
//
// Work split: a group of G = block / 16 consecutive lanes owns one (row, K block); each lane owns
// a 16-element chunk (32 bytes of f16/bf16 input, 64 of f32, 16 bytes of codes), so loads and
// the code store are 16-byte vector accesses and a warp reads 512-1024 contiguous bytes of one
// row. The block's min/max/amax and code sum are reduced with xor shuffles inside the group (no
// shared memory); the group's first lane writes the meta values. Groups are numbered with the K
// block fastest, so the grid streams the matrix in row-major order like a copy does. Each thread
// has all of its loads in flight at once; at full occupancy that is 64-128 KiB per SM, well over
// what HBM3 needs to reach its bandwidth.
//
// Bit-exactness with the CPU quantizers (src/core/quantize.cpp):
//  - FP8: s = max(amax, 1e-10f) / 448 and x / s are IEEE f32 divisions (__fdiv_rn), as on the
//    host; e4m3 rounding is RNE saturating (cvt.rn.satfinite on sm_89+, the shared numeric.hpp
//    routine below that).
//  - INT8: the host computes round((double(x) - o) / s) in double. Here the code is computed in
//    f32 as (x - o) * (1/s), whose relative error is below 3 * 2^-24 (< 2.3e-5 absolute for
//    |t| <= 128.5); whenever that value lies within 1e-4 of a rounding boundary (a half-integer),
//    or is not finite, the lane redoes the exact double computation. Codes are therefore
//    identical to the host's, at the cost of a double division for ~2e-4 of the elements.
//  - Non-finite inputs: the host quantizers reject them (INT8) or produce NaN codes (FP8); the
//    kernels cannot throw, so an INT8 block holding inf/NaN gets non-finite meta and meaningless
//    codes, and FP8 behaves like the host (amax ignores NaN; an inf gives s = inf and NaN codes).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/act_quant.hpp"
#include "cuda/check.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cuda {

namespace {

constexpr int kChunk = 16;     // elements per lane
constexpr int kThreads = 256;  // per CTA

enum XType : int { kF16 = 0, kBF16 = 1, kF32 = 2 };

__device__ __forceinline__ void unpack_f16x2(uint32_t w, float& lo, float& hi) {
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w));
  lo = f.x;
  hi = f.y;
}

__device__ __forceinline__ void unpack_bf16x2(uint32_t w, float& lo, float& hi) {
  lo = __uint_as_float(w << 16);
  hi = __uint_as_float(w & 0xFFFF0000u);
}

template <int XT>
__device__ __forceinline__ float load_scalar(const void* row, int64_t k) {
  if constexpr (XT == kF32) return __ldg(static_cast<const float*>(row) + k);
  const uint16_t h = __ldg(static_cast<const unsigned short*>(row) + k);
  if constexpr (XT == kF16) return __half2float(__ushort_as_half(h));
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

// Loads chunk [c0, c0 + 16) of one row as f32 (exact for every input type). Elements at or past
// K are set to 0 and must be masked by the caller (n_valid). `vec`: row start and c0 are 16-byte
// aligned, so whole chunks use 16-byte loads.
template <int XT>
__device__ __forceinline__ void load_chunk(const void* row, int64_t c0, int n_valid, bool vec,
                                           float (&v)[kChunk]) {
  if (vec && n_valid == kChunk) {
    if constexpr (XT == kF32) {
      const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(row) + c0);
      float4 r[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) r[i] = __ldg(p + i);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[4 * i + 0] = r[i].x;
        v[4 * i + 1] = r[i].y;
        v[4 * i + 2] = r[i].z;
        v[4 * i + 3] = r[i].w;
      }
    } else {
      const uint4* p = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(row) + c0);
      const uint4 a = __ldg(p), b = __ldg(p + 1);
      const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        if constexpr (XT == kF16) unpack_f16x2(w[i], v[2 * i], v[2 * i + 1]);
        else unpack_bf16x2(w[i], v[2 * i], v[2 * i + 1]);
      }
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < kChunk; ++j) v[j] = j < n_valid ? load_scalar<XT>(row, c0 + j) : 0.f;
}

// Stores 16 code bytes (already zero past K) at q_row + c0.
__device__ __forceinline__ void store_chunk(uint8_t* q_row, int64_t c0, bool vec,
                                            const uint32_t (&packed)[4]) {
  if (vec) {
    *reinterpret_cast<uint4*>(q_row + c0) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    return;
  }
#pragma unroll
  for (int j = 0; j < kChunk; ++j) q_row[c0 + j] = static_cast<uint8_t>(packed[j / 4] >> (8 * (j % 4)));
}

// f32 pair -> e4m3 pair (lo in the low byte), RNE, saturating to +-448, NaN -> NaN.
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  unsigned short r;
  // operand a goes to the upper byte, b to the lower one
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return static_cast<uint32_t>(f32_to_e4m3(lo)) | (static_cast<uint32_t>(f32_to_e4m3(hi)) << 8);
#endif
}

// The INT8 code of x: clamp(rint((double(x) - o) / s), -128, 127), computed in f32 unless the
// f32 value is too close to a rounding boundary (see the file comment).
__device__ __forceinline__ int int8_code(float x, float o, float s, float inv_s) {
  const float t = __fmul_rn(__fsub_rn(x, o), inv_s);
  const float r = rintf(t);
  const float frac = fabsf(__fsub_rn(t, r));  // exact (Sterbenz)
  if (fabsf(__fsub_rn(frac, 0.5f)) > 1e-4f) {  // false for NaN / inf
    return static_cast<int>(fminf(fmaxf(r, -128.0f), 127.0f));
  } else {
    const double td = __ddiv_rn(__dsub_rn(static_cast<double>(x), static_cast<double>(o)),
                                static_cast<double>(s));
    const double rd = rint(td);  // half to even, like std::nearbyint
    if (!(rd >= -128.0)) return -128;  // also NaN
    if (rd > 127.0) return 127;
    return static_cast<int>(rd);
  }
}

template <int G>
__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}
template <int G>
__device__ __forceinline__ float group_min(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}
template <int G>
__device__ __forceinline__ int group_sum(int v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

struct Task {
  bool active;
  int64_t m, kb, c0;
  int n_valid;  // elements of this lane's chunk inside [0, K)
  int lane;     // lane within the group
};

template <int G>
__device__ __forceinline__ Task task_of_thread(int64_t M, int64_t K, int64_t nb, int64_t block) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t gid = t / G;
  Task tk;
  tk.lane = static_cast<int>(t % G);
  tk.m = gid / nb;
  tk.kb = gid % nb;
  tk.c0 = tk.kb * block + static_cast<int64_t>(tk.lane) * kChunk;
  tk.active = tk.m < M;
  const int64_t left = K - tk.c0;
  tk.n_valid = !tk.active ? 0 : left >= kChunk ? kChunk : left > 0 ? static_cast<int>(left) : 0;
  return tk;
}

template <int XT>
__global__ void __launch_bounds__(kThreads)
    quantize_fp8_1x128_kernel(const void* __restrict__ x, int64_t ldx, int64_t M, int64_t K,
                              int64_t nb, uint8_t* __restrict__ q, int64_t ldq,
                              float* __restrict__ scale, int64_t ld_meta, bool vec) {
  constexpr int G = 128 / kChunk;
  const Task tk = task_of_thread<G>(M, K, nb, 128);
  const int64_t esize = XT == kF32 ? 4 : 2;
  const void* row = static_cast<const char*>(x) + (tk.active ? tk.m : 0) * ldx * esize;

  float v[kChunk];
  load_chunk<XT>(row, tk.c0, tk.n_valid, vec, v);
  float amax = 0.f;
#pragma unroll
  for (int j = 0; j < kChunk; ++j) amax = fmaxf(amax, fabsf(v[j]));  // padding is 0
  amax = group_max<G>(amax);
  const float s = __fdiv_rn(fmaxf(amax, 1e-10f), 448.0f);

  if (tk.n_valid > 0) {
    uint32_t packed[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t word = 0;
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        const int e = 4 * i + j;
        const float a = e < tk.n_valid ? __fdiv_rn(v[e], s) : 0.f;
        const float b = e + 1 < tk.n_valid ? __fdiv_rn(v[e + 1], s) : 0.f;
        word |= e4m3x2(a, b) << (8 * j);
      }
      packed[i] = word;
    }
    store_chunk(q + tk.m * ldq, tk.c0, vec, packed);
  }
  if (tk.active && tk.lane == 0) scale[tk.kb * ld_meta + tk.m] = s;
}

// ~62 registers, 4 blocks of 256 threads per SM: 1024 threads x 32-64 bytes in flight (capping
// at 40 registers for 6 blocks spilled the chunk to local memory).
template <int XT, int BLOCK>
__global__ void __launch_bounds__(kThreads)
    quantize_int8_block_kernel(const void* __restrict__ x, int64_t ldx, int64_t M, int64_t K,
                               int64_t nb, int8_t* __restrict__ q, int64_t ldq,
                               float* __restrict__ scale, float* __restrict__ offset,
                               int32_t* __restrict__ sums, int64_t ld_meta, bool vec) {
  constexpr int G = BLOCK / kChunk;
  const Task tk = task_of_thread<G>(M, K, nb, BLOCK);
  const int64_t esize = XT == kF32 ? 4 : 2;
  const void* row = static_cast<const char*>(x) + (tk.active ? tk.m : 0) * ldx * esize;

  float v[kChunk];
  load_chunk<XT>(row, tk.c0, tk.n_valid, vec, v);
  float lo = INFINITY, hi = -INFINITY;
#pragma unroll
  for (int j = 0; j < kChunk; ++j)
    if (j < tk.n_valid) {
      lo = fminf(lo, v[j]);
      hi = fmaxf(hi, v[j]);
    }
  lo = group_min<G>(lo);
  hi = group_max<G>(hi);
  // Same operation order as the host: no contraction into an FMA.
  const float s = __fdiv_rn(__fsub_rn(hi, lo), 255.0f);
  const bool ranged = s > 0.f;
  const float o = ranged ? __fadd_rn(lo, __fmul_rn(128.0f, s)) : lo;
  const float inv_s = ranged ? __frcp_rn(s) : 0.f;

  int sum = 0;
  uint32_t packed[4] = {0, 0, 0, 0};
  if (ranged) {
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      const int c = j < tk.n_valid ? int8_code(v[j], o, s, inv_s) : 0;
      sum += c;
      packed[j / 4] |= (static_cast<uint32_t>(c) & 0xFFu) << (8 * (j % 4));
    }
  }
  if (tk.n_valid > 0) store_chunk(reinterpret_cast<uint8_t*>(q) + tk.m * ldq, tk.c0, vec, packed);
  sum = group_sum<G>(sum);
  if (tk.active && tk.lane == 0) {
    const int64_t i = tk.kb * ld_meta + tk.m;
    scale[i] = s;
    offset[i] = o;
    sums[i] = sum;
  }
}

int64_t x_elem_bytes(int x_type) { return x_type == kF32 ? 4 : 2; }

void check_common(const char* op, const void* x, int x_type, int64_t ldx, int64_t M, int64_t K,
                  const void* q, int64_t ldq, int64_t ld_meta) {
  MIXQ_CHECK_ARG(x_type == kF16 || x_type == kBF16 || x_type == kF32, op, ": x_type ", x_type,
                 " is not 0 (f16), 1 (bf16) or 2 (f32)");
  MIXQ_CHECK_ARG(M >= 1 && K >= 1, op, ": empty problem M = ", M, ", K = ", K);
  MIXQ_CHECK_ARG(x != nullptr && q != nullptr, op, ": null x or q");
  MIXQ_CHECK_ARG(ldx >= K, op, ": ldx (", ldx, ") < K (", K, ")");
  MIXQ_CHECK_ARG(ldq >= act_row_pitch(K), op, ": ldq (", ldq, ") < act_row_pitch(K) (",
                 act_row_pitch(K), ")");
  MIXQ_CHECK_ARG(ld_meta >= M, op, ": ld_meta (", ld_meta, ") < M (", M, ")");
}

// 16-byte vector accesses need 16-byte aligned row starts for x and q.
bool vector_ok(const void* x, int x_type, int64_t ldx, const void* q, int64_t ldq) {
  const auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return a16(x) && a16(q) && (ldx * x_elem_bytes(x_type)) % 16 == 0 && ldq % 16 == 0;
}

unsigned grid_for(int64_t groups, int G) {
  const int64_t threads = groups * G;
  const int64_t blocks = (threads + kThreads - 1) / kThreads;
  MIXQ_CHECK(blocks <= 0x7FFFFFFF, ErrorCode::Unsupported, "activation quantizer: ", groups,
             " blocks is too many for one launch");
  return static_cast<unsigned>(blocks);
}

template <int XT>
void launch_int8_typed(int64_t block, unsigned grid, cudaStream_t stream, const void* x,
                       int64_t ldx, int64_t M, int64_t K, int64_t nb, int8_t* q, int64_t ldq,
                       float* scale, float* offset, int32_t* sums, int64_t ld_meta, bool vec) {
  switch (block) {
    case 32:
      quantize_int8_block_kernel<XT, 32><<<grid, kThreads, 0, stream>>>(
          x, ldx, M, K, nb, q, ldq, scale, offset, sums, ld_meta, vec);
      break;
    case 64:
      quantize_int8_block_kernel<XT, 64><<<grid, kThreads, 0, stream>>>(
          x, ldx, M, K, nb, q, ldq, scale, offset, sums, ld_meta, vec);
      break;
    case 128:
      quantize_int8_block_kernel<XT, 128><<<grid, kThreads, 0, stream>>>(
          x, ldx, M, K, nb, q, ldq, scale, offset, sums, ld_meta, vec);
      break;
    default:
      quantize_int8_block_kernel<XT, 256><<<grid, kThreads, 0, stream>>>(
          x, ldx, M, K, nb, q, ldq, scale, offset, sums, ld_meta, vec);
      break;
  }
}

}  // namespace

void launch_quantize_fp8_1x128(const void* x, int x_type, int64_t ldx, int64_t M, int64_t K,
                               uint8_t* q, int64_t ldq, float* scale, int64_t ld_meta,
                               cudaStream_t stream) {
  check_common("launch_quantize_fp8_1x128", x, x_type, ldx, M, K, q, ldq, ld_meta);
  MIXQ_CHECK_ARG(scale != nullptr, "launch_quantize_fp8_1x128: null scale");
  const int64_t nb = (K + 127) / 128;
  const unsigned grid = grid_for(M * nb, 128 / kChunk);
  const bool vec = vector_ok(x, x_type, ldx, q, ldq);
  switch (x_type) {
    case kF16:
      quantize_fp8_1x128_kernel<kF16><<<grid, kThreads, 0, stream>>>(x, ldx, M, K, nb, q, ldq,
                                                                     scale, ld_meta, vec);
      break;
    case kBF16:
      quantize_fp8_1x128_kernel<kBF16><<<grid, kThreads, 0, stream>>>(x, ldx, M, K, nb, q, ldq,
                                                                      scale, ld_meta, vec);
      break;
    default:
      quantize_fp8_1x128_kernel<kF32><<<grid, kThreads, 0, stream>>>(x, ldx, M, K, nb, q, ldq,
                                                                     scale, ld_meta, vec);
      break;
  }
  MIXQ_CUDA_CHECK_LAUNCH("quantize_fp8_1x128_kernel");
}

void launch_quantize_int8_block(const void* x, int x_type, int64_t ldx, int64_t M, int64_t K,
                                int64_t block, int8_t* q, int64_t ldq, float* scale,
                                float* offset, int32_t* sums, int64_t ld_meta,
                                cudaStream_t stream) {
  check_common("launch_quantize_int8_block", x, x_type, ldx, M, K, q, ldq, ld_meta);
  MIXQ_CHECK_ARG(block == 32 || block == 64 || block == 128 || block == 256,
                 "launch_quantize_int8_block: block (", block, ") must be 32, 64, 128 or 256");
  MIXQ_CHECK_ARG(scale != nullptr && offset != nullptr && sums != nullptr,
                 "launch_quantize_int8_block: null scale, offset or sums");
  const int64_t nb = (K + block - 1) / block;
  const unsigned grid = grid_for(M * nb, static_cast<int>(block / kChunk));
  const bool vec = vector_ok(x, x_type, ldx, q, ldq);
  switch (x_type) {
    case kF16:
      launch_int8_typed<kF16>(block, grid, stream, x, ldx, M, K, nb, q, ldq, scale, offset, sums,
                              ld_meta, vec);
      break;
    case kBF16:
      launch_int8_typed<kBF16>(block, grid, stream, x, ldx, M, K, nb, q, ldq, scale, offset, sums,
                               ld_meta, vec);
      break;
    default:
      launch_int8_typed<kF32>(block, grid, stream, x, ldx, M, K, nb, q, ldq, scale, offset, sums,
                              ld_meta, vec);
      break;
  }
  MIXQ_CUDA_CHECK_LAUNCH("quantize_int8_block_kernel");
}

}  // namespace mixq::cuda
