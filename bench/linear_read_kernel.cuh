// The streaming-read ceiling's kernel for the bench harnesses (cuda_wo_sweep, dram_pattern_probe):
// a grid-stride read of n 16-byte words, 4 loads in flight per thread, L1 bypassed; the XOR keeps
// the loads alive. (The library's own copy, for `mixq bench`, is src/cuda/read_ceiling.cu.)
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

__global__ void linear_read_kernel(const uint4* __restrict__ p, size_t n, unsigned* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x * 4) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const size_t j = i + size_t(u) * gridDim.x * blockDim.x;
      if (j < n)
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                     : "l"(p + j));
      else
        v[u] = make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) *sink = acc;
}
