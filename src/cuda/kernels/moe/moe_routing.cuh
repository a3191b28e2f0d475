// Routing kernels: top-k ids -> the contiguous layout (a stable counting sort by expert), the
// gather of X's rows into it, the weighted scatter-add back to tokens, and act(gate) * up.
// All bounds come from host-known sizes; ids are checked here (the host cannot read them without
// a synchronisation): an id outside [0, E) sets the error bit and the routing lists no pair.
// Each may be a programmatic dependent launch (grid_dependency.cuh; the launchers' pdl): it lets
// the next launch of the stream start at once, and waits for the previous kernel before it reads
// or writes anything. At decode these kernels are a few microseconds each, so the launch latency
// they hide is a large part of their cost. (The tile schedule, launch/moe_routing.cu, is not.)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/kernels/common/block_scan.cuh"
#include "cuda/kernels/common/float_io.cuh"
#include "cuda/kernels/common/grid_dependency.cuh"

namespace mixq::cuda {

constexpr int kMoeRouteThreads = 1024;
constexpr int kMoeRouteWarps = kMoeRouteThreads / 32;

// Per-warp expert counters the routing kernel keeps in shared memory when they fit this budget
// (E <= 351), else in the workspace.
constexpr int kMoeRouteSharedHistBytes = 44 * 1024;
__host__ __device__ constexpr int64_t moe_route_hist_ints(int64_t E) { return int64_t(kMoeRouteWarps) * (E + 1); }

// One block, a stable counting sort of the pairs by expert. Warp w owns the w-th of 32 contiguous
// segments of the pairs and a row of counters hist[w][E + 1] (shared memory, or the workspace for
// many experts). Pass 1 counts the segment's pairs per expert (one atomic per expert present in a
// 32-pair step: lanes of one expert are grouped); the offsets are the exclusive scan of the
// experts' totals, and each warp's row becomes the first slot of its segment's pairs of each
// expert; pass 2 places the segment 32 pairs at a time (lanes of one expert take consecutive slots
// in lane order), so pairs keep their order within an expert and the layout is a function of the
// ids alone. (Before: one warp placed all pairs, a dependent global atomic per 32 pairs: ~1 ms at
// 32768 pairs, more than the grouped GEMMs of a Qwen3-30B-A3B layer.)
//
// The block runs on one SM, so what a step costs that SM bounds the kernel. Lanes are grouped by
// one ballot per bit of the expert id (7 for 128 experts), not by __match_any_sync: with the
// match instruction, 32768 pairs took 72 us on an H200 (~60 SM cycles a warp-step), and unrolled
// steps past the segment's end added 15-19 us at 512 pairs.
constexpr int kMoeRouteBatch = 8;
// ids[base + 32 u + lane] for the batch's steps u (-1 past hi), all loads issued before any is used
// (one memory round trip a batch, not a step)
__device__ __forceinline__ void load_route_ids(const int32_t* __restrict__ ids, int base, int hi,
                                               int lane, int (&e)[kMoeRouteBatch]) {
#pragma unroll
  for (int u = 0; u < kMoeRouteBatch; ++u) {
    const int i = base + 32 * u + lane;
    e[u] = i < hi ? __ldg(ids + i) : -1;
  }
}

// The lanes of `active` whose key (< 2^bits) equals this lane's: one ballot per key bit.
__device__ __forceinline__ unsigned lanes_with_key(unsigned key, int bits, unsigned active) {
  unsigned same = active;
  for (int b = 0; b < bits; ++b) {
    const bool one = (key >> b) & 1u;
    const unsigned m = __ballot_sync(0xffffffffu, one);
    same &= one ? m : ~m;
  }
  return same;
}

__global__ void __launch_bounds__(kMoeRouteThreads)
    moe_route_kernel(const int32_t* ids, int R, int E, int32_t* offsets, int32_t* sorted,
                     int32_t* position, int32_t* scratch, bool hist_shared, int32_t* error) {
  extern __shared__ int32_t shared_hist[];
  __shared__ int bad;
  __shared__ int scan[kMoeRouteThreads];
  allow_dependent_launch();
  grid_dependency_wait();
  const int tid = int(threadIdx.x), nt = int(blockDim.x), lane = tid & 31, warp = tid >> 5;
  const int stride = E + 1;
  const int bits = E > 1 ? 32 - __clz(E - 1) : 0;  // of the largest id, E - 1
  int32_t* hist = hist_shared ? shared_hist : scratch;
  if (tid == 0) bad = 0;
  for (int64_t i = tid; i < moe_route_hist_ints(E); i += nt) hist[i] = 0;
  __syncthreads();
  const int seg = (R + kMoeRouteWarps - 1) / kMoeRouteWarps;
  const int lo = min(R, warp * seg), hi = min(R, lo + seg);
  int32_t* mine = hist + int64_t(warp) * stride;
  int e[kMoeRouteBatch];
  for (int base = lo; base < hi; base += 32 * kMoeRouteBatch) {
    load_route_ids(ids, base, hi, lane, e);
#pragma unroll
    for (int u = 0; u < kMoeRouteBatch; ++u) {
      if (base + 32 * u >= hi) break;  // (warp-uniform)
      const int i = base + 32 * u + lane;
      const bool valid = i < hi && e[u] >= 0 && e[u] < E;
      if (i < hi && !valid) bad = 1;
      const unsigned same = lanes_with_key(unsigned(e[u]), bits, __ballot_sync(0xffffffffu, valid));
      if (valid && lane == __ffs(same) - 1) atomicAdd(&mine[e[u]], __popc(same));
    }
  }
  __syncthreads();
  if (bad) {
    // No pair is routed: the gather copies nothing, the scatter-add adds nothing, and a grouped
    // call on these offsets (0 .. 0, not the row count) refuses itself.
    for (int e = tid; e <= E; e += nt) offsets[e] = 0;
    for (int i = tid; i < R; i += nt) {
      sorted[i] = -1;
      position[i] = -1;
    }
    if (tid == 0 && error) atomicOr(error, 4);
    return;
  }
  // Each thread a contiguous run of experts: their totals, an inclusive block scan of the runs,
  // then the offsets and the warps' first slots.
  const int per = (E + nt - 1) / nt, e0 = min(E, tid * per), e1 = min(E, e0 + per);
  int total = 0;
  for (int e = e0; e < e1; ++e)
    for (int w = 0; w < kMoeRouteWarps; ++w) total += hist[int64_t(w) * stride + e];
  scan[tid] = total;
  block_inclusive_scan(scan, tid, nt);
  int run = scan[tid] - total;
  for (int e = e0; e < e1; ++e) {
    offsets[e] = run;
    for (int w = 0; w < kMoeRouteWarps; ++w) {
      int32_t& h = hist[int64_t(w) * stride + e];
      const int c = h;
      h = run;
      run += c;
    }
  }
  if (tid == nt - 1) offsets[E] = scan[nt - 1];
  __syncthreads();
  for (int base = lo; base < hi; base += 32 * kMoeRouteBatch) {
    load_route_ids(ids, base, hi, lane, e);
#pragma unroll
    for (int u = 0; u < kMoeRouteBatch; ++u) {
      if (base + 32 * u >= hi) break;  // (warp-uniform)
      const int i = base + 32 * u + lane;
      const bool valid = i < hi;  // every id is in range here
      const unsigned same = lanes_with_key(unsigned(e[u]), bits, __ballot_sync(0xffffffffu, valid));
      const int rank = __popc(same & ((1u << lane) - 1u));
      const int leader = __ffs(same) - 1;  // (0 for absent lanes: their shuffle reads lane 0)
      int slot = 0;
      if (valid && lane == leader) slot = atomicAdd(&mine[e[u]], __popc(same));
      slot = __shfl_sync(0xffffffffu, slot, leader < 0 ? 0 : leader);
      if (valid) {
        sorted[slot + rank] = i;
        position[i] = slot + rank;
      }
    }
  }
}

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
// rows in one sequence, kMoeGatherUnroll a thread (loaded before any is stored), so short rows
// still fill every thread (a 4 KB row of Qwen3-30B-A3B used half of a row block's 8 KB; 32768 such
// rows took 48 us on an H200, a write floor of ~31).
__global__ void __launch_bounds__(kMoeGatherThreads)
    moe_gather_pieces_kernel(const char* __restrict__ x, int64_t ldx_bytes, const int32_t* __restrict__ sorted,
                             int R, int k, int64_t row_pieces, char* __restrict__ xs, int64_t ldxs_bytes) {
  allow_dependent_launch();
  grid_dependency_wait();
  const int64_t total = int64_t(R) * row_pieces;
  const int64_t q0 = int64_t(blockIdx.x) * kMoeGatherThreads * kMoeGatherUnroll + threadIdx.x;
  uint4 v[kMoeGatherUnroll];
  int64_t dst[kMoeGatherUnroll];
#pragma unroll
  for (int u = 0; u < kMoeGatherUnroll; ++u) {
    const int64_t q = q0 + int64_t(u) * kMoeGatherThreads;
    dst[u] = -1;
    if (q >= total) continue;
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
