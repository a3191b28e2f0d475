// The GEMV's weight-access pattern without math, shared by the diagnostics cuda_stream_pattern.cu
// and cuda_small_read_probe.cu: each warp streams RT 16-row tiles of the packed W4 layout
// (wo_layout.hpp: 512-byte chunks, one tile's chunks contiguous) through a D-chunk register ring,
// like kernels/sm80_wo_stream.cuh, and only XORs the words. INTERLEAVED places the RT tiles of a
// warp next to each other chunk by chunk; PDL: launched with programmatic dependent launch, the
// warp waits for the previous grid after its first loads, as the GEMV does.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "bench_timing.cuh"

#include "cuda/kernels/grid_dependency.cuh"

template <int RT, int D, bool INTERLEAVED, bool PDL>
__global__ void __launch_bounds__(128) stream_tiles(const uint4* w, int n_tiles, int kc, int chunks_per_split,
                                                    unsigned* sink) {
  if (PDL) mixq::cuda::allow_dependent_launch();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt0 = (blockIdx.x * 4 + warp) * RT;
  const int c0 = blockIdx.y * chunks_per_split;
  const int chunks = min(chunks_per_split, kc - c0);
  auto addr = [&](int rt, int c) -> const uint4* {
    const int64_t cc = c0 + c;
    if (INTERLEAVED) return w + ((int64_t(nt0 / RT) * kc + cc) * RT + rt) * 32 + lane;
    return w + (int64_t(nt0 + rt) * kc + cc) * 32 + lane;
  };
  const bool active = nt0 < n_tiles;
  uint4 buf[D][RT];
  unsigned acc = 0;
  if (active) {
#pragma unroll
    for (int d = 0; d < D; ++d)
      if (d < chunks)
#pragma unroll
        for (int rt = 0; rt < RT; ++rt) buf[d][rt] = __ldcs(addr(rt, d));
  }
  if (PDL) mixq::cuda::grid_dependency_wait();
  if (!active) return;
  for (int c = 0; c < chunks; c += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      if (c + d < chunks) {
#pragma unroll
        for (int rt = 0; rt < RT; ++rt) acc ^= buf[d][rt].x ^ buf[d][rt].y ^ buf[d][rt].z ^ buf[d][rt].w;
        if (c + d + D < chunks)
#pragma unroll
          for (int rt = 0; rt < RT; ++rt) buf[d][rt] = __ldcs(addr(rt, c + d + D));
      }
    }
  }
  if (acc == 0x9E3779B9u) sink[0] = acc;  // never true for the zero-filled input: keeps the loads
}

// n zero-filled device copies of a `bytes` weight layout (rotated for a cold L2; zero never matches
// the kernels' sink test).
inline std::vector<uint4*> zeroed_copies(size_t bytes, int n) {
  std::vector<uint4*> copies(static_cast<size_t>(n), nullptr);
  for (auto& p : copies) {
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, 0, bytes));
  }
  return copies;
}
