// Routing kernels: top-k ids -> the contiguous layout (a stable counting sort by expert), the
// gather of X's rows into it, the weighted scatter-add back to tokens, and act(gate) * up.
// All bounds come from host-known sizes; ids are checked here (the host cannot read them without
// a synchronisation): an id outside [0, E) sets the error bit and the routing lists no pair.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/common/float_io.cuh"

namespace mixq::cuda {

constexpr int kMoeRouteThreads = 1024;

// One block. counts: E + 1 ints of global scratch (the workspace), zeroed here. Pass 1 counts the
// pairs per expert (shared-memory-free atomics on the scratch: E may be large), a scan turns them
// into offsets, and one warp places the pairs in pair order, 32 at a time: lanes with the same
// expert take consecutive slots in lane order (match_any + popc), so the sort is stable and the
// layout a function of the ids alone.
__global__ void __launch_bounds__(kMoeRouteThreads)
    moe_route_kernel(const int32_t* ids, int R, int E, int32_t* offsets, int32_t* sorted,
                     int32_t* position, int32_t* counts, int32_t* error) {
  __shared__ int bad;
  const int tid = int(threadIdx.x), nt = int(blockDim.x);
  if (tid == 0) bad = 0;
  for (int e = tid; e <= E; e += nt) counts[e] = 0;
  __syncthreads();
  for (int i = tid; i < R; i += nt) {
    const int e = ids[i];
    if (e < 0 || e >= E) bad = 1;
    else atomicAdd(&counts[e + 1], 1);
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
  __threadfence_block();
  if (tid == 0) {  // E is at most a few thousand: a serial scan is shorter than the launch
    int run = 0;
    for (int e = 0; e <= E; ++e) {
      run += counts[e];
      counts[e] = run;
      offsets[e] = run;
    }
  }
  __syncthreads();
  if (tid >= 32) return;
  const int lane = tid;
  for (int base = 0; base < R; base += 32) {
    const int i = base + lane;
    const int e = i < R ? ids[i] : -1 - lane;  // absent lanes match nobody
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(same & ((1u << lane) - 1u));
    const int leader = __ffs(same) - 1;
    int slot = 0;
    if (i < R && lane == leader) slot = atomicAdd(&counts[e], __popc(same));
    slot = __shfl_sync(0xffffffffu, slot, leader);
    if (i < R) {
      sorted[slot + rank] = i;
      position[i] = slot + rank;
    }
    __syncwarp();
  }
}

// xs[p] = x[sorted[p] / k]: one block row per sorted position, 16-byte copies where aligned.
__global__ void moe_gather_kernel(const char* x, int64_t ldx_bytes, const int32_t* sorted, int R,
                                  int k, int64_t row_bytes, char* xs, int64_t ldxs_bytes) {
  const int p = int(blockIdx.x);
  if (p >= R) return;
  const int i = sorted[p];
  if (i < 0 || i >= R) return;  // only a refused routing leaves such values; rows stay as they are
  const char* src = x + int64_t(i / k) * ldx_bytes;
  char* dst = xs + int64_t(p) * ldxs_bytes;
  const bool vec = (reinterpret_cast<uintptr_t>(src) % 16) == 0 &&
                   (reinterpret_cast<uintptr_t>(dst) % 16) == 0 && row_bytes % 16 == 0;
  if (vec) {
    for (int64_t b = int64_t(threadIdx.x) * 16; b < row_bytes; b += int64_t(blockDim.x) * 16)
      *reinterpret_cast<uint4*>(dst + b) = *reinterpret_cast<const uint4*>(src + b);
  } else {
    for (int64_t b = threadIdx.x; b < row_bytes; b += blockDim.x) dst[b] = src[b];
  }
}

// y[t][n] = sum_j w[t][j] * ys[position[t * k + j]][n] (+ y[t][n]), in f32, j in order.
__global__ void moe_scatter_add_kernel(const void* ys, int64_t ldys, int ys_type,
                                       const int32_t* position, const float* w, int T, int k,
                                       int N, void* y, int64_t ldy, int y_type, bool accumulate) {
  const int t = int(blockIdx.x);
  if (t >= T) return;
  const int R = T * k;
  for (int n = int(threadIdx.x); n < N; n += int(blockDim.x)) {
    float acc = accumulate ? load_as_float(y, y_type, int64_t(t) * ldy + n) : 0.f;
    for (int j = 0; j < k; ++j) {
      const int p = position[t * k + j];
      if (p < 0 || p >= R) continue;
      acc += w[t * k + j] * load_as_float(ys, ys_type, int64_t(p) * ldys + n);
    }
    store_float(y, y_type, int64_t(t) * ldy + n, acc);
  }
}

// out[r][i] = act(h[r][i]) * h[r][I + i] (act 0: SiLU, 1: GELU tanh form), in f32.
__global__ void moe_activation_mul_kernel(const void* h, int64_t ldh, void* out, int64_t ldo,
                                          int type, int R, int I, int act) {
  const int r = int(blockIdx.x);
  if (r >= R) return;
  for (int i = int(threadIdx.x); i < I; i += int(blockDim.x)) {
  const float g = load_as_float(h, type, int64_t(r) * ldh + i);
  const float u = load_as_float(h, type, int64_t(r) * ldh + I + i);
  float a;
  if (act == 0) {
    a = g / (1.f + expf(-g));
  } else {
    const float c = 0.7978845608028654f;
    a = 0.5f * g * (1.f + tanhf(c * (g + 0.044715f * g * g * g)));
  }
  store_float(out, type, int64_t(r) * ldo + i, a * u);
  }
}

}  // namespace mixq::cuda
