// INTERIM definition of launch_quantize_int8_block (act_quant.hpp) so that the int8 branch links
// and runs end to end before the real quantizer (src/cuda/act_quant.cu, branch `aq`) is merged.
// DELETE THIS FILE when merging `aq` (the two definitions would collide at link time).
// Simple and exact, not fast: one warp per (row, K block), the same float math as
// quantize_activations_int8_block (min/max in f32, codes from a double division, half to even).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/act_quant.hpp"
#include "cuda/check.hpp"

namespace mixq::cuda {

namespace {

__device__ __forceinline__ float load_x(const void* x, int t, int64_t i) {
  if (t == 0) return __half2float(static_cast<const __half*>(x)[i]);
  if (t == 1) return __bfloat162float(static_cast<const __nv_bfloat16*>(x)[i]);
  return static_cast<const float*>(x)[i];
}

__global__ void interim_quantize_int8_block_kernel(const void* x, int x_type, int64_t ldx,
                                                   int64_t M, int64_t K, int64_t block, int8_t* q,
                                                   int64_t ldq, float* scale, float* offset,
                                                   int32_t* sums, int64_t ld_meta) {
  const int64_t nb = (K + block - 1) / block;
  const int64_t wid = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (wid >= M * nb) return;
  const int64_t m = wid / nb, b = wid % nb;
  const int64_t k0 = b * block, k1 = min(K, k0 + block), kq = min(ldq, k0 + block);
  const void* row = static_cast<const char*>(x) + m * ldx * (x_type == 2 ? 4 : 2);
  float lo = INFINITY, hi = -INFINITY;
  for (int64_t k = k0 + lane; k < k1; k += 32) {
    const float v = load_x(row, x_type, k);
    lo = fminf(lo, v);
    hi = fmaxf(hi, v);
  }
  for (int o = 16; o; o >>= 1) {
    lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, o));
    hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, o));
  }
  const float s = __fdiv_rn(__fsub_rn(hi, lo), 255.0f);
  const float off = s > 0 ? __fadd_rn(lo, __fmul_rn(128.0f, s)) : lo;
  int32_t sum = 0;
  for (int64_t k = k0 + lane; k < kq; k += 32) {
    int32_t qv = 0;
    if (k < k1 && s > 0) {
      const double r = rint(__ddiv_rn(__dsub_rn(double(load_x(row, x_type, k)), double(off)), double(s)));
      qv = r < -128.0 ? -128 : r > 127.0 ? 127 : int32_t(r);
    }
    q[m * ldq + k] = int8_t(qv);
    sum += qv;
  }
  for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) {
    scale[b * ld_meta + m] = s;
    offset[b * ld_meta + m] = off;
    sums[b * ld_meta + m] = sum;
  }
}

}  // namespace

void launch_quantize_int8_block(const void* x, int x_type, int64_t ldx, int64_t M, int64_t K,
                                int64_t block, int8_t* q, int64_t ldq, float* scale,
                                float* offset, int32_t* sums, int64_t ld_meta,
                                cudaStream_t stream) {
  const int64_t warps = M * ((K + block - 1) / block);
  if (warps == 0) return;
  interim_quantize_int8_block_kernel<<<unsigned((warps + 7) / 8), 256, 0, stream>>>(
      x, x_type, ldx, M, K, block, q, ldq, scale, offset, sums, ld_meta);
  MIXQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mixq::cuda
