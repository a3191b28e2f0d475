// Tensor-core throughput probe: wgmma m64nNk32 e4m3, operands from shared memory (SS) or A from
// registers loaded with ldmatrix per group (RS), 1 or 2 consumer warpgroups, one or two
// accumulator sets (wait_group 0 / 1), with or without a promotion (1 FFMA per accumulator).
// Prints cycles per group (64 x N x 128 per warpgroup) measured with clock64 on every SM.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include "cuda/kernels/sm90_sync.cuh"
#include "cuda/kernels/sm90_wgmma.cuh"
using namespace mixq::cuda::sm90;
#include "mma_gen.inc"

template <int N, int RS, int WGS, int SETS, int PROMOTE>
__global__ void __launch_bounds__(256, 1) probe(int groups, unsigned long long* cycles, float* sink) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  constexpr int R = N / 2;
  const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  // A: 2 x (128 rows x 128 B) ring of 2 stages (16 KB each: both warpgroups), B: 2 x N x 128
  uint8_t* a_t = smem;
  uint8_t* b_t = smem + 2 * 16384;
  for (int i = threadIdx.x; i < (2 * 16384 + 2 * N * 128) / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem)[i] = (i * 2654435761u) & 0x3B3B3B3Bu;
  __syncthreads();
  if (wg >= WGS) return;
  float acc0[R], acc1[R], total[R];
  for (int i = 0; i < R; ++i) total[i] = 0.f;
  uint32_t afr[16];
  auto issue = [&](float (&acc)[R], int g) {
    const int st = g & 1;
    const uint32_t abase = smem_u32(a_t + st * 16384 + wg * 64 * 128);
    const uint32_t da = desc_lo_kmajor_sw128(abase);
    const uint32_t db = desc_lo_kmajor_sw128(smem_u32(b_t + st * N * 128));
    if constexpr (RS) {
      // the warp's 16 rows: ldmatrix.x4 per k32 step, swizzled chunk addresses
      const int r = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const int chunk = 2 * kk + (lane >> 4);
        const uint32_t addr = abase + r * 128 + ((chunk ^ (r & 7)) * 16);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(afr[4 * kk]), "=r"(afr[4 * kk + 1]), "=r"(afr[4 * kk + 2]), "=r"(afr[4 * kk + 3])
                     : "r"(addr));
      }
    }
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (RS) {
        const uint32_t (&a4)[4] = *reinterpret_cast<const uint32_t(*)[4]>(&afr[4 * k]);
        M<N, 1>::mma(acc, a4, desc_from_lo_sw128(db + 2 * k), k);
      } else {
        M<N, 0>::mma(acc, desc_from_lo_sw128(da + 2 * k), desc_from_lo_sw128(db + 2 * k), k);
      }
    }
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
}

template <int N, int RS, int WGS, int SETS, int PROMOTE>
void run(const char* name, int groups, int sms) {
  auto k = probe<N, RS, WGS, SETS, PROMOTE>;
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
  std::printf("%-28s N=%3d %s wgs=%d sets=%d promote=%d  cycles/group %7.1f  ideal %6.1f  eff %5.1f%%  %7.1f TFLOP/s  %s\n",
              name, N, RS ? "RS" : "SS", WGS, SETS, PROMOTE, per, ideal, 100 * ideal / per,
              flops / (ms * 1e-3) * 1e-12, cudaGetErrorString(cudaGetLastError()));
  cudaFree(cyc); cudaFree(sink);
}

int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int G = 20000;
#define RUN(N, RS, W, S, P) run<N, RS, W, S, P>(#N "_" #RS "_" #W "_" #S "_" #P, G, sms)
  RUN(128, 0, 1, 2, 0); RUN(128, 0, 2, 2, 0); RUN(128, 0, 2, 2, 1); RUN(128, 0, 2, 1, 1);
  RUN(128, 1, 2, 2, 0); RUN(128, 1, 2, 2, 1);
  RUN(192, 0, 1, 1, 0); RUN(192, 0, 2, 1, 0); RUN(192, 0, 2, 1, 1);
  RUN(192, 1, 2, 1, 0); RUN(192, 1, 2, 1, 1);
  RUN(96, 0, 2, 2, 0); RUN(96, 0, 2, 2, 1); RUN(96, 1, 2, 2, 0); RUN(96, 1, 2, 2, 1);
  RUN(256, 0, 1, 1, 0); RUN(256, 0, 2, 1, 0); RUN(256, 1, 2, 1, 0);
  RUN(64, 0, 2, 2, 0); RUN(64, 0, 2, 2, 1);
  return 0;
}
