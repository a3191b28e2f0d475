// Diagnostic: how fast can the GEMV's weight-access pattern stream, with no math at all?
// The kernel (stream_read_kernel.cuh) streams each warp's RT row tiles through a D-chunk register
// ring and only XORs the words; "interleaved" places a warp's RT tiles next to each other chunk by
// chunk (one 2 KB run per chunk instead of four 512-byte runs).
// Built as the cuda_stream_pattern target (or: nvcc -O3 -std=c++17 -I bench -I src
// -gencode=arch=compute_90a,code=sm_90a bench/cuda_stream_pattern.cu -o pat). Results:
// bench/results/cuda_weight_only_gemv_h100.txt (section 5).
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "bench_timing.cuh"
#include "stream_read_kernel.cuh"

using bench_timing::time_graph;

template <int RT, int D, bool IL>
void run(const char* name, std::vector<uint4*>& copies, int n_tiles, int kc, int blocks_per_sm,
         int sms, unsigned* sink, size_t bytes, cudaStream_t s) {
  const int bx = (n_tiles / RT + 3) / 4;
  int splits = std::max(1, sms * blocks_per_sm / bx);
  splits = std::min(splits, kc / 4);
  const int cps = (kc + splits - 1) / splits;
  splits = (kc + cps - 1) / cps;
  const dim3 grid(bx, splits);
  // residency capped at blocks_per_sm through shared memory, as the GEMV's registers cap it
  const size_t smem = (227u * 1024u) / blocks_per_sm - 1024;
  CK(cudaFuncSetAttribute(stream_tiles<RT, D, IL, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const double us = time_graph(
      [&](int i, cudaStream_t st) {
        stream_tiles<RT, D, IL, false><<<grid, 128, smem, st>>>(copies[i], n_tiles, kc, cps, sink);
      },
      int(copies.size()), s);
  std::printf("%-28s grid %4dx%-3d  %7.1f us  %6.0f GB/s\n", name, grid.x, grid.y, us, bytes / us * 1e-3);
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  bench_timing::g_l2 = prop.l2CacheSize;
  const int N = 21504, K = 14336;  // W4 g128 14336x21504 of the benchmark
  const int n_tiles = N / 16, kc = K / 64;
  const size_t bytes = size_t(n_tiles) * kc * 512;
  const int n_rot = bench_timing::rot_count(bytes);
  std::vector<uint4*> copies = zeroed_copies(bytes, n_rot);
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const int sms = prop.multiProcessorCount;
  std::printf("%s: %zu MB of int4 tiles, %d copies\n", prop.name, bytes >> 20, n_rot);
  run<4, 2, false>("RT4 D2 (the GEMV) 4 blk/SM", copies, n_tiles, kc, 4, sms, sink, bytes, s);
  run<4, 2, false>("RT4 D2 8 blk/SM", copies, n_tiles, kc, 8, sms, sink, bytes, s);
  run<4, 2, true>("RT4 D2 interleaved 4 blk/SM", copies, n_tiles, kc, 4, sms, sink, bytes, s);
  run<4, 2, true>("RT4 D2 interleaved 8 blk/SM", copies, n_tiles, kc, 8, sms, sink, bytes, s);
  run<2, 2, false>("RT2 D2 8 blk/SM", copies, n_tiles, kc, 8, sms, sink, bytes, s);
  run<1, 4, false>("RT1 D4 8 blk/SM", copies, n_tiles, kc, 8, sms, sink, bytes, s);
  run<4, 4, false>("RT4 D4 4 blk/SM", copies, n_tiles, kc, 4, sms, sink, bytes, s);
  run<4, 4, true>("RT4 D4 interleaved 4 blk/SM", copies, n_tiles, kc, 4, sms, sink, bytes, s);
  run<1, 2, false>("RT1 D2 16 blk/SM", copies, n_tiles, kc, 16, sms, sink, bytes, s);
  return 0;
}
