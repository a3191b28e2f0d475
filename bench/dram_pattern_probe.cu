// DRAM access-pattern probe (experiment, not part of the library): does the order in which the
// weight-only wgmma kernel reads its packed weights cost DRAM throughput?
// Each CTA (2 per SM, stream-K-like equal ranges) reads "stages" of 8 KB: 16 tiles of 512 bytes
// (8 row tiles x 2 chunks), two per warp, 4 stages in flight per warp (64 KB per SM, the ring of
// the two-CTA kernel). Patterns:
//   tiles  - the packed layout [row tile][chunk][512 B]: a stage is 8 pieces of 1 KB, one per row
//            tile, K * 4 bytes apart (what the kernel's 3-D TMA box reads);
//   stage  - the same work with each stage's 8 KB contiguous (a [row group][stage][8 KB] layout);
//   linear - a grid-stride read of the whole buffer (the read ceiling's pattern).
//   dram_pattern_probe [--shapes KxN,...]
// Cold L2: rotation over copies covering >= 4x the L2, graph replay (bench_timing.cuh).
// Built on demand as the dram_pattern_probe target (or: nvcc -O3 -std=c++17 -Ibench
// -gencode=arch=compute_90a,code=sm_90a bench/dram_pattern_probe.cu). Results: bench/results/session19
// (call 3).
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_timing.cuh"
#include "linear_read_kernel.cuh"

using bench_timing::split;

constexpr int kWarps = 8;
constexpr int kDepth = 4;  // stages in flight per warp

template <int PATTERN>
__global__ void __launch_bounds__(kWarps * 32, 2)
    probe_kernel(const uint4* __restrict__ base, int stages, long long units, unsigned* sink) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const long long u0 = units * blockIdx.x / gridDim.x, u1 = units * (blockIdx.x + 1) / gridDim.x;
  uint32_t acc = 0;
  for (long long u = u0; u < u1; u += kDepth) {
    uint4 v[kDepth][2];
#pragma unroll
    for (int d = 0; d < kDepth; ++d)
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const long long unit = u + d;
        const int piece = 2 * warp + q;  // row tile piece / 2, chunk piece % 2
        long long tile;
        if (PATTERN == 0) {
          const long long g = unit / stages, s = unit % stages;
          tile = (g * 8 + piece / 2) * (2LL * stages) + 2 * s + piece % 2;
        } else {
          tile = unit * 16 + piece;
        }
        if (unit < u1)
          asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(v[d][q].x), "=r"(v[d][q].y), "=r"(v[d][q].z), "=r"(v[d][q].w)
                       : "l"(base + tile * 32 + lane));
        else
          v[d][q] = make_uint4(0, 0, 0, 0);
      }
#pragma unroll
    for (int d = 0; d < kDepth; ++d)
#pragma unroll
      for (int q = 0; q < 2; ++q) acc ^= v[d][q].x ^ v[d][q].y ^ v[d][q].z ^ v[d][q].w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

int main(int argc, char** argv) {
  std::string shapes = "28672x8192,14336x21504,8192x57344,4096x28672";
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--shapes" && i + 1 < argc) shapes = argv[++i];
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  bench_timing::g_l2 = size_t(prop.l2CacheSize);
  const int grid = prop.multiProcessorCount * 2;
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  std::printf("KxN           MB      tiles_us  stage_us  linear_us   tiles_TB/s stage_TB/s linear_TB/s\n");
  for (const auto& shp : split(shapes, ',')) {
    const auto kn = split(shp, 'x');
    const long long K = std::stoll(kn[0]), N = std::stoll(kn[1]);
    const int stages = int(K / 128), groups = int(N / 128);
    const long long units = (long long)groups * stages;
    const size_t bytes = size_t(units) * 8192;
    const int n_rot = bench_timing::rot_count(bytes, 2);
    std::vector<uint4*> bufs(n_rot);
    for (auto& b : bufs) {
      CK(cudaMalloc(&b, bytes));
      CK(cudaMemset(b, 1, bytes));
    }
    double us[3];
    us[0] = bench_timing::time_graph(
        [&](int i, cudaStream_t st) { probe_kernel<0><<<grid, kWarps * 32, 0, st>>>(bufs[i], stages, units, sink); },
        n_rot, s);
    us[1] = bench_timing::time_graph(
        [&](int i, cudaStream_t st) { probe_kernel<1><<<grid, kWarps * 32, 0, st>>>(bufs[i], stages, units, sink); },
        n_rot, s);
    us[2] = bench_timing::time_graph(
        [&](int i, cudaStream_t st) { linear_read_kernel<<<prop.multiProcessorCount * 4, 512, 0, st>>>(bufs[i], bytes / 16, sink); },
        n_rot, s);
    std::printf("%-12s %7.1f %9.1f %9.1f %9.1f   %9.2f %9.2f %9.2f\n", shp.c_str(), bytes / 1e6, us[0], us[1], us[2],
                bytes / us[0] / 1e6, bytes / us[1] / 1e6, bytes / us[2] / 1e6);
    for (auto& b : bufs) CK(cudaFree(b));
  }
  return 0;
}
