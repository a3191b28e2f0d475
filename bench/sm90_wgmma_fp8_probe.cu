// Tensor-core throughput probe for the FP8 block GEMM's consumer loop (no TMA, no global memory):
// every SM runs 1 or 2 warpgroups that issue wgmma m64nNk32 e4m3 groups (4 per 128-wide K block,
// operands in 128-byte-swizzled shared memory) with one or two accumulator sets (wait_group 0 /
// 1), with or without the per-block promotion (1 FFMA per accumulator). Prints clock64 cycles per
// group and the fraction of the tensor-core peak (8192 e4m3 FLOP per clock per SM).
//   cmake --build build-gpu --target sm90_wgmma_fp8_probe   (CUDA builds with sm_90a), or
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc -Iinclude \
//     --expt-relaxed-constexpr bench/sm90_wgmma_fp8_probe.cu -o wgmma_fp8_probe
// Session 17 (H100): 97-100% of the peak for N = 128 (two sets) and N = 192 (one set, two
// warpgroups) with the promotion: the block GEMM's gap to the peak is not in its MMA loop.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include "cuda/kernels/sm90_sync.cuh"
#include "cuda/kernels/sm90_wgmma.cuh"
using namespace mixq::cuda::sm90;

template <int N, int WGS, int SETS, int PROMOTE>
__global__ void __launch_bounds__(256, 1) probe(int groups, unsigned long long* cycles, float* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  constexpr int R = N / 2;
  const int wg = threadIdx.x / 128;
  // A: 2 x (128 rows x 128 B) ring of 2 stages (16 KB each: both warpgroups), B: 2 x N x 128
  uint8_t* a_t = smem;
  uint8_t* b_t = smem + 2 * 16384;
  for (int i = threadIdx.x; i < (2 * 16384 + 2 * N * 128) / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem)[i] = (i * 2654435761u) & 0x3B3B3B3Bu;  // varied, never NaN
  __syncthreads();
  if (wg >= WGS) return;
  float acc0[R], acc1[R], total[R];
  for (int i = 0; i < R; ++i) total[i] = 0.f;
  auto issue = [&](float (&acc)[R], int g) {
    const int st = g & 1;
    const uint32_t abase = smem_u32(a_t + st * 16384 + wg * 64 * 128);
    const uint32_t da = desc_lo_kmajor_sw128(abase);
    const uint32_t db = desc_lo_kmajor_sw128(smem_u32(b_t + st * N * 128));
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k)
      WgmmaE4M3<N>::mma(acc, desc_from_lo_sw128(da + 2 * k), desc_from_lo_sw128(db + 2 * k), k);
    wgmma_commit();
  };
  auto retire = [&](float (&acc)[R], int g) {
#pragma unroll
    for (int i = 0; i < R; ++i) reg_fence(acc[i]);
    if constexpr (PROMOTE) {
      const float s = __uint_as_float(lds32(smem_u32(a_t) + 4 * (g & 63)) | 0x3F000000u);
#pragma unroll
      for (int i = 0; i < R; ++i) total[i] = fmaf(acc[i], s, total[i]);
    } else {
#pragma unroll
      for (int i = 0; i < R; i += 16) total[i] += acc[i];
    }
  };
  const unsigned long long t0 = clock64();
  if constexpr (SETS == 1) {
    for (int g = 0; g < groups; ++g) {
      issue(acc0, g);
      wgmma_wait<0>();
      retire(acc0, g);
    }
  } else {
    issue(acc0, 0);
    int g = 0;
    for (; g + 2 < groups; g += 2) {
      issue(acc1, g + 1);
      wgmma_wait<1>();
      retire(acc0, g);
      issue(acc0, g + 2);
      wgmma_wait<1>();
      retire(acc1, g + 1);
    }
    // The tail as in sm90_block_gemm.cuh: with a plain `wait_group 0; retire(acc0)` after the loop
    // ptxas serialized every wgmma of the kernel (C7514, accumulators read inside the pipeline).
    if (g + 1 < groups) {
      issue(acc1, g + 1);
      wgmma_wait<1>();
      retire(acc0, g);
      wgmma_wait<0>();
      retire(acc1, g + 1);
    } else {
      wgmma_wait<0>();
      retire(acc0, g);
    }
  }
  const unsigned long long t1 = clock64();
  if (threadIdx.x % 128 == 0) atomicAdd(cycles, t1 - t0);
  float s = 0.f;
  for (int i = 0; i < R; ++i) s += total[i];
  if (s == 1.2345f) sink[threadIdx.x] = s;
#else
  __trap();  // wgmma needs sm_90a
#endif
}

template <int N, int WGS, int SETS, int PROMOTE>
void run(const char* name, int groups, int sms) {
  auto k = probe<N, WGS, SETS, PROMOTE>;
  const int smem = 1024 + 2 * 16384 + 2 * N * 128;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  unsigned long long* cyc; float* sink;
  cudaMalloc(&cyc, 8); cudaMalloc(&sink, 4096);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  k<<<sms, 256, smem>>>(groups, cyc, sink);  // warm up
  cudaMemset(cyc, 0, 8);
  cudaEventRecord(e0);
  k<<<sms, 256, smem>>>(groups, cyc, sink);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  unsigned long long c; cudaMemcpy(&c, cyc, 8, cudaMemcpyDeviceToHost);
  const double per = double(c) / (sms * WGS) / groups;  // cycles per group per warpgroup
  const double ideal = 64.0 * N * 128 * 2 / 8192 * WGS;  // all warpgroups share the tensor cores
  const double flops = 2.0 * 64 * N * 128 * groups * WGS * sms;
  std::printf("%-16s N=%3d wgs=%d sets=%d promote=%d  cycles/group %7.1f  ideal %6.1f  eff %5.1f%%  %7.1f TFLOP/s  %s\n",
              name, N, WGS, SETS, PROMOTE, per, ideal, 100 * ideal / per,
              flops / (ms * 1e-3) * 1e-12, cudaGetErrorString(cudaGetLastError()));
  cudaEventDestroy(e0); cudaEventDestroy(e1);
  cudaFree(cyc); cudaFree(sink);
}

int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int G = 20000;
#define RUN(N, W, S, P) run<N, W, S, P>(#N "_" #W "_" #S "_" #P, G, sms)
  // N, warpgroups, accumulator sets, promotion
  RUN(128, 1, 2, 0); RUN(128, 2, 2, 0); RUN(128, 2, 2, 1); RUN(128, 2, 1, 1);
  RUN(192, 1, 1, 0); RUN(192, 2, 1, 0); RUN(192, 2, 1, 1);
  RUN(256, 1, 1, 0); RUN(256, 2, 1, 0);
  RUN(64, 2, 2, 0); RUN(64, 2, 2, 1);
#undef RUN
  return 0;
}
