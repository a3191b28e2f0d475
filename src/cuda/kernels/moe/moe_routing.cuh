// Routing kernels after the sort (moe_route.cuh: top-k ids -> the contiguous layout): the gather
// of X's rows into it, the weighted scatter-add back to tokens, and act(gate) * up. All bounds
// come from host-known sizes; a pair the routing refused (an id outside [0, E)) is skipped.
// Each may be a programmatic dependent launch (grid_dependency.cuh; the launchers' pdl): it lets
// the next launch of the stream start at once, and waits for the previous kernel before it reads
// or writes anything. At decode these kernels are a few microseconds each, so the launch latency
// they hide is a large part of their cost. (The tile schedule, launch/moe_routing.cu, is not.)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/kernels/common/float_io.cuh"
#include "cuda/kernels/common/grid_dependency.cuh"

namespace mixq::cuda {

// xs[p] = x[sorted[p] / k]: block (p, c) copies bytes [c * kMoeGatherChunk, + kMoeGatherChunk) of
// row p, each thread up to kMoeGatherUnroll 16-byte pieces loaded before any is stored (one memory
// round trip per thread, not one per piece: at decode a row is a few KB and the copy is latency).
constexpr int kMoeGatherThreads = 128;
constexpr int kMoeGatherUnroll = 4;
constexpr int64_t kMoeGatherChunk = int64_t(kMoeGatherThreads) * kMoeGatherUnroll * 16;
__global__ void __launch_bounds__(kMoeGatherThreads)
    moe_gather_kernel(const char* __restrict__ x, int64_t ldx_bytes, const int32_t* __restrict__ sorted,
                      int R, int k, int64_t row_bytes, char* __restrict__ xs, int64_t ldxs_bytes) {
  allow_dependent_launch();
  grid_dependency_wait();
  const int p = int(blockIdx.x);
  if (p >= R) return;
  const int i = sorted[p];
  if (i < 0 || i >= R) return;  // only a refused routing leaves such values; rows stay as they are
  const char* src = x + int64_t(i / k) * ldx_bytes;
  char* dst = xs + int64_t(p) * ldxs_bytes;
  const int64_t b0 = int64_t(blockIdx.y) * kMoeGatherChunk;
  const int64_t b1 = b0 + kMoeGatherChunk < row_bytes ? b0 + kMoeGatherChunk : row_bytes;
  const bool vec = (reinterpret_cast<uintptr_t>(src) % 16) == 0 &&
                   (reinterpret_cast<uintptr_t>(dst) % 16) == 0 && row_bytes % 16 == 0;
  if (vec) {
    uint4 v[kMoeGatherUnroll];
#pragma unroll
    for (int u = 0; u < kMoeGatherUnroll; ++u) {
      const int64_t b = b0 + (int64_t(u) * kMoeGatherThreads + threadIdx.x) * 16;
      if (b < b1) v[u] = *reinterpret_cast<const uint4*>(src + b);
    }
#pragma unroll
    for (int u = 0; u < kMoeGatherUnroll; ++u) {
      const int64_t b = b0 + (int64_t(u) * kMoeGatherThreads + threadIdx.x) * 16;
      if (b < b1) *reinterpret_cast<uint4*>(dst + b) = v[u];
    }
  } else {
    for (int64_t b = b0 + threadIdx.x; b < b1; b += kMoeGatherThreads) dst[b] = src[b];
  }
}

// The same copy where every row is a whole number of aligned 16-byte pieces: the pieces of all
// rows in one sequence, `per_thread` (<= kMoeGatherUnroll) a thread, loaded before any is stored,
// so short rows still fill every thread (a 4 KB row of Qwen3-30B-A3B used half of a row block's
// 8 KB). Block b, thread t: pieces (b * per_thread + u) * kMoeGatherThreads + t.
__global__ void __launch_bounds__(kMoeGatherThreads)
    moe_gather_pieces_kernel(const char* __restrict__ x, int64_t ldx_bytes, const int32_t* __restrict__ sorted,
                             int R, int k, int64_t row_pieces, char* __restrict__ xs, int64_t ldxs_bytes,
                             int per_thread) {
  allow_dependent_launch();
  grid_dependency_wait();
  const int64_t total = int64_t(R) * row_pieces;
  const int64_t q0 = int64_t(blockIdx.x) * kMoeGatherThreads * per_thread + threadIdx.x;
  uint4 v[kMoeGatherUnroll];
  int64_t dst[kMoeGatherUnroll];
#pragma unroll
  for (int u = 0; u < kMoeGatherUnroll; ++u) {
    const int64_t q = q0 + int64_t(u) * kMoeGatherThreads;
    dst[u] = -1;
    if (u >= per_thread || q >= total) continue;
    const int p = int(q / row_pieces);
    const int64_t b = (q - int64_t(p) * row_pieces) * 16;
    const int i = sorted[p];
    if (i < 0 || i >= R) continue;  // only a refused routing leaves such values; rows stay as they are
    v[u] = *reinterpret_cast<const uint4*>(x + int64_t(i / k) * ldx_bytes + b);
    dst[u] = int64_t(p) * ldxs_bytes + b;
  }
#pragma unroll
  for (int u = 0; u < kMoeGatherUnroll; ++u)
    if (dst[u] >= 0) *reinterpret_cast<uint4*>(xs + dst[u]) = v[u];
}

// y[t][n] = sum_j w[t][j] * ys[position[t * k + j]][n] (+ y[t][n]), in f32, j in order. Block
// (t, c) sums columns [c * V * kMoeScatterThreads, + V * kMoeScatterThreads) of token t, V per
// thread. VT is ys's element type where rows are read as 16-byte vectors (V = 4 f32 or 8 f16 /
// bf16: 16-byte aligned rows, N % V == 0), or MoeScalarElems for element loads of the runtime
// ys_type (V = 1);
// y_vec: y has ys's 16-bit type and aligned rows, so a thread's V outputs are one 16-byte store.
// The sums are the same in every form. The k rows' loads are independent (restrict: no store may
// feed them), so they are in flight together (one block per token, looping over N, took 29 us at
// one token of DeepSeek-V3: N = 7168, k = 8, one dependent round trip after another).
constexpr int kMoeScatterThreads = 128;
struct MoeScalarElems {};

// V consecutive elements of a 16-byte aligned row as f32
template <typename VT, int V>
__device__ __forceinline__ void load_vec_f32(const VT* __restrict__ src, float (&out)[V]) {
  static_assert(sizeof(VT) * V == 16, "one 16-byte load");
  const uint4 raw = *reinterpret_cast<const uint4*>(src);
  const VT* e = reinterpret_cast<const VT*>(&raw);
#pragma unroll
  for (int v = 0; v < V; ++v) {
    if constexpr (std::is_same_v<VT, float>) out[v] = e[v];
    else if constexpr (std::is_same_v<VT, half>) out[v] = __half2float(e[v]);
    else out[v] = __bfloat162float(e[v]);
  }
}

template <typename VT, int V>
__global__ void __launch_bounds__(kMoeScatterThreads)
    moe_scatter_add_kernel(const void* __restrict__ ys, int64_t ldys, int ys_type,
                           const int32_t* __restrict__ position, const float* __restrict__ w, int T,
                           int k, int N, void* __restrict__ y, int64_t ldy, int y_type, bool accumulate,
                           bool y_vec) {
  allow_dependent_launch();
  grid_dependency_wait();
  const int t = int(blockIdx.x);
  const int n = (int(blockIdx.y) * kMoeScatterThreads + int(threadIdx.x)) * V;
  if (t >= T || n >= N) return;
  const int R = T * k;
  constexpr bool kVec = !std::is_same_v<VT, MoeScalarElems>;
  float acc[V];
  if constexpr (kVec && sizeof(VT) == 2) {
    if (y_vec) {
      if (accumulate) load_vec_f32<VT, V>(static_cast<const VT*>(y) + int64_t(t) * ldy + n, acc);
      else
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = 0.f;
    }
  }
  if (!(kVec && sizeof(VT) == 2 && y_vec))
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = accumulate ? load_as_float(y, y_type, int64_t(t) * ldy + n + v) : 0.f;
#pragma unroll 8
  for (int j = 0; j < k; ++j) {
    const int p = position[t * k + j];
    if (p < 0 || p >= R) continue;
    const float wj = w[t * k + j];
    float q[V];
    if constexpr (kVec) load_vec_f32<VT, V>(static_cast<const VT*>(ys) + int64_t(p) * ldys + n, q);
    else q[0] = load_as_float(ys, ys_type, int64_t(p) * ldys + n);
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] += wj * q[v];
  }
  if constexpr (kVec && sizeof(VT) == 2) {
    if (y_vec) {
      uint4 raw;
      VT* e = reinterpret_cast<VT*>(&raw);
#pragma unroll
      for (int v = 0; v < V; ++v) {
        if constexpr (std::is_same_v<VT, half>) e[v] = __float2half_rn(acc[v]);
        else e[v] = __float2bfloat16_rn(acc[v]);
      }
      *reinterpret_cast<uint4*>(static_cast<VT*>(y) + int64_t(t) * ldy + n) = raw;
      return;
    }
  }
#pragma unroll
  for (int v = 0; v < V; ++v) store_float(y, y_type, int64_t(t) * ldy + n + v, acc[v]);
}

// out[r][i] = act(h[r][i]) * h[r][I + i] (act 0: SiLU, 1: GELU tanh form), in f32. V > 1: 16-byte
// loads and stores of V 16-bit elements (aligned rows, I % V == 0); T the element type.
// Block (r, c): columns [c * V * kMoeActThreads, + V * kMoeActThreads) of row r, one pack a thread.
constexpr int kMoeActThreads = 256;
template <typename T, int V>
__global__ void __launch_bounds__(kMoeActThreads)
    moe_activation_mul_kernel(const T* __restrict__ h, int64_t ldh, T* __restrict__ out, int64_t ldo,
                              int R, int I, int act) {
  allow_dependent_launch();
  grid_dependency_wait();
  const int r = int(blockIdx.x);
  if (r >= R) return;
  struct alignas(sizeof(T) * V) Pack {
    T v[V];
  };
  const int i = (int(blockIdx.y) * kMoeActThreads + int(threadIdx.x)) * V;
  if (i >= I) return;
  const Pack g = *reinterpret_cast<const Pack*>(h + int64_t(r) * ldh + i);
  const Pack u = *reinterpret_cast<const Pack*>(h + int64_t(r) * ldh + I + i);
  Pack o;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const float gv = float(g.v[v]), uv = float(u.v[v]);
    float a;
    if (act == 0) {
      a = gv / (1.f + expf(-gv));
    } else {
      const float c = 0.7978845608028654f;
      a = 0.5f * gv * (1.f + tanhf(c * (gv + 0.044715f * gv * gv * gv)));
    }
    o.v[v] = T(a * uv);
  }
  *reinterpret_cast<Pack*>(out + int64_t(r) * ldo + i) = o;
}

}  // namespace mixq::cuda
