// The launchers of the native kernels for one GGUF type: the q8 GEMV's token instances (MR) and
// rows per warp, the q8 tensor-core kernel's token tiles (8 NT), the dequantizing tensor-core
// kernel's X types and token tiles. Included by the ggml_gemv_*.cu files, each
// instantiating a few types so a parallel build compiles them side by side.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda/kernels/ggml/ggml_kernels.cuh"
#include "cuda/kernels/ggml/ggml_hmma.cuh"
#include "cuda/kernels/ggml/ggml_mma.cuh"
#include "cuda/kernels/ggml/ggml_stream.cuh"
#include "cuda/launch/ggml_native.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/launch_config.hpp"

namespace mixq::cuda::ggml {

template <GType T, int MR, int RPW>
void launch_gemv_instance(const GemvParams& p, cudaStream_t stream) {
  const int64_t warps = (p.N + RPW - 1) / RPW;
  const dim3 grid(unsigned((warps + kGemvWarps - 1) / kGemvWarps));
  WoLaunchConfig lc(grid, kGemvWarps * 32, 0, stream, p.pdl);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, q8_gemv_kernel<T, MR, RPW>, p));
}

// One token: a row a warp (the most warps in flight), unless that grid spills a second, partial
// wave over the GPU's block slots where two rows a warp fit in one. Then the two-token instance
// runs it (its second token reads the first's row of X again and is not stored). Measured on an
// H200, K x N = 4096 x 4096 / 14336 x 4096 / 4096 x 6144 / 4096 x 14336 at M = 1 against M = 2:
// Q8_0 (5 blocks an SM of either) at N = 4096, K = 4096 / 14336: 9.4 / 21.8 us one row a warp,
// 8.0 / 18.8 two; Q6_K (7 / 4 blocks) 8.6 / 19.7 against 7.0 / 15.4; Q4_0 (8 / 6) at N = 6144
// 9.1 against 7.8. In the 19 other cases of six types one row a warp was faster (by 0.3-2.9 us),
// and the rule picks it there (docs/decisions/cuda-ggml-native.md).
template <GType T>
bool gemv_one_token_in_pairs(int64_t N, int sm_count) {
  const int64_t one = (N + kGemvWarps - 1) / kGemvWarps;
  const int64_t two = (N + 2 * kGemvWarps - 1) / (2 * kGemvWarps);
  const int64_t sms = std::max(sm_count, 1);
  return one > sms * resident_blocks_per_sm<q8_gemv_kernel<T, 1, 1>, kGemvWarps * 32>() &&
         two <= sms * resident_blocks_per_sm<q8_gemv_kernel<T, 2, 2>, kGemvWarps * 32>();
}

// Rows per warp by token instance: one at M = 1 (the most warps to keep the stream busy; two where
// that leaves a partial second wave), more as M grows so the activations each lane reads from L1
// serve more weight rows, two again above 8 (four rows of 12-16 accumulators each would leave too
// few warps resident).
template <GType T>
void launch_gemv_type(const GemvParams& p, int sm_count, cudaStream_t stream) {
  switch (gemv_token_tile(p.M)) {
    case 1:
      if (p.pairs > 0 || (p.pairs < 0 && gemv_one_token_in_pairs<T>(p.N, sm_count)))
        return launch_gemv_instance<T, 2, 2>(p, stream);
      return launch_gemv_instance<T, 1, 1>(p, stream);
    case 2: return launch_gemv_instance<T, 2, 2>(p, stream);
    case 3: return launch_gemv_instance<T, 3, 2>(p, stream);
    case 4: return launch_gemv_instance<T, 4, 2>(p, stream);
    case 6: return launch_gemv_instance<T, 6, 4>(p, stream);
    case 8: return launch_gemv_instance<T, 8, 4>(p, stream);
    case 12: return launch_gemv_instance<T, 12, 2>(p, stream);
    default: return launch_gemv_instance<T, 16, 2>(p, stream);
  }
}

template <GType T, int NT>
void launch_mma_instance(const MmaParams& p, cudaStream_t stream) {
  const dim3 grid(unsigned((p.N + kMmaRows - 1) / kMmaRows),
                  unsigned((q8_groups(p.M) + NT - 1) / NT), unsigned(p.splits));
  constexpr int kSmem = MmaTile<T>::smem_bytes(NT);
  if constexpr (kSmem > 48 * 1024) {
    static PerDeviceAttribute smem_limit;  // once per device, not a driver call every launch
    MIXQ_CUDA_CHECK(smem_limit.ensure([] {
      return cudaFuncSetAttribute(q8_mma_kernel<T, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    }));
  }
  WoLaunchConfig lc(grid, kMmaWarps * 32, kSmem, stream, p.pdl);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, q8_mma_kernel<T, NT>, p));
}

template <GType T>
void launch_mma_type(const MmaParams& p, cudaStream_t stream) {
  switch (mma_token_tiles(p.M)) {
    case 1: return launch_mma_instance<T, 1>(p, stream);
    case 2: return launch_mma_instance<T, 2>(p, stream);
    case 4: return launch_mma_instance<T, 4>(p, stream);
    default: return launch_mma_instance<T, 8>(p, stream);
  }
}

template <GType T, typename XT, int TN>
void launch_hmma_instance(const HmmaParams& p, cudaStream_t stream) {
  const int64_t tiles = ((p.N + kHmmaRows - 1) / kHmmaRows) * ((p.M + TN - 1) / TN);
  const dim3 grid(unsigned(tiles), 1, unsigned(p.splits));
  constexpr int kSmem = HmmaTile<T, TN>::kSmemBytes;
  static PerDeviceAttribute smem_limit;  // once per device, not a driver call every launch
  MIXQ_CUDA_CHECK(smem_limit.ensure([] {
    return cudaFuncSetAttribute(hmma_kernel<T, XT, TN>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  }));
  WoLaunchConfig lc(grid, kHmmaWarps * 32, kSmem, stream, p.pdl);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, hmma_kernel<T, XT, TN>, p));
}

template <GType T, typename XT>
void launch_hmma_x(const HmmaParams& p, cudaStream_t stream) {
  switch (hmma_token_tile(p.M)) {
    case 16: return launch_hmma_instance<T, XT, 16>(p, stream);
    case 32: return launch_hmma_instance<T, XT, 32>(p, stream);
    default: return launch_hmma_instance<T, XT, 64>(p, stream);
  }
}

template <GType T>
void launch_hmma_type(const HmmaParams& p, int x_type, cudaStream_t stream) {
  if (x_type == 0) return launch_hmma_x<T, half>(p, stream);
  return launch_hmma_x<T, __nv_bfloat16>(p, stream);
}

// The few-token kernel: one CTA a 16-row tile and K split, one n8 token group.
template <GType T, typename XT>
void launch_stream_x(const HmmaParams& p, cudaStream_t stream) {
  const dim3 grid(unsigned((p.N + 15) / 16), unsigned(p.splits));
  WoLaunchConfig lc(grid, kStreamWarps * 32, 0, stream, p.pdl);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, stream_kernel<T, XT, (kStreamMaxRows + 7) / 8>, p));
}

template <GType T>
void launch_stream_type(const HmmaParams& p, int x_type, cudaStream_t stream) {
  if (x_type == 0) return launch_stream_x<T, half>(p, stream);
  return launch_stream_x<T, __nv_bfloat16>(p, stream);
}

#define MIXQ_GGML_GEMV_TYPE(T)                                                         \
  template void launch_gemv_type<GType::T>(const GemvParams&, int, cudaStream_t);     \
  template void launch_mma_type<GType::T>(const MmaParams&, cudaStream_t);
// the dequantizing kernels' instances of a type (the staged kernel's six, the few-token kernel's
// four), in files of their own (ggml_hmma_*.cu)
#define MIXQ_GGML_HMMA_TYPE(T)                                                      \
  template void launch_hmma_type<GType::T>(const HmmaParams&, int, cudaStream_t); \
  template void launch_stream_type<GType::T>(const HmmaParams&, int, cudaStream_t);

}  // namespace mixq::cuda::ggml
