// Element i of a buffer of the kernels' float type codes (0 f16, 1 bf16, 2 f32), read as or
// written from f32: for bias vectors, outputs and activations whose type is a runtime argument.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace mixq::cuda {

__device__ __forceinline__ float load_as_float(const void* p, int type, int64_t i) {
  switch (type) {
    case 0: return __half2float(static_cast<const half*>(p)[i]);
    case 1: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_float(void* p, int type, int64_t i, float v) {
  switch (type) {
    case 0: static_cast<half*>(p)[i] = __float2half_rn(v); break;
    case 1: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

}  // namespace mixq::cuda
