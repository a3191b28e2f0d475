// The INT8 conv's stem input (conv_stem.hpp, ConvStemParams::requant): an int8 image, NCHW or NHWC,
// as the f16 NHWC copy the stem kernel reads, each element x - Z_I (an integer of magnitude at
// most 256: exact in f16, and 0 where the reference's padding holds Z_I, which is what the stem's
// zero-filled patch reads there).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace mixq::cuda::conv {

// NHWC: the image is one run of n elements in either form; 8 a thread (an 8-byte load, a 16-byte
// store) where x is 8-byte aligned, the tail and unaligned images one at a time.
__global__ void stem_i8_nhwc_to_f16_kernel(const int8_t* __restrict__ x, __half* __restrict__ xc,
                                           int64_t n, int zero) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool vec = reinterpret_cast<uintptr_t>(x) % 8 == 0;
  const int64_t groups = vec ? n / 8 : 0;
  for (int64_t i = first; i < groups; i += stride) {
    const uint2 v = *reinterpret_cast<const uint2*>(x + 8 * i);
    const uint32_t w[2] = {v.x, v.y};
    __half2 h[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int lo = int(int8_t(w[j / 2] >> (16 * (j % 2)))),
                hi = int(int8_t(w[j / 2] >> (16 * (j % 2) + 8)));
      h[j] = __halves2half2(__int2half_rn(lo - zero), __int2half_rn(hi - zero));
    }
    *reinterpret_cast<uint4*>(xc + 8 * i) = *reinterpret_cast<const uint4*>(h);
  }
  for (int64_t i = 8 * groups + first; i < n; i += stride) xc[i] = __int2half_rn(int(x[i]) - zero);
}

// NCHW [B][Ci][HW] into NHWC: a thread per pixel, its Ci channels (one coalesced byte load a
// plane, Ci adjacent f16 stores).
template <int CI>
__global__ void stem_i8_nchw_to_f16_kernel(const int8_t* __restrict__ x, __half* __restrict__ xc,
                                           int64_t batch, int64_t hw, int zero) {
  const int64_t pixels = batch * hw;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < pixels;
       p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = p / hw, r = p - b * hw;
    const int8_t* src = x + b * CI * hw + r;
#pragma unroll
    for (int c = 0; c < CI; ++c) xc[p * CI + c] = __int2half_rn(int(src[c * hw]) - zero);
  }
}

}  // namespace mixq::cuda::conv
