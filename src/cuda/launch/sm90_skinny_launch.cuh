// Launch of a few-token GEMM kernel (kernels/sm90_skinny_gemm.cuh) for one policy and token tile,
// shared by the FP8 and INT8 launchers.
#pragma once

#include <cuda_runtime.h>

#include "cuda/runtime/check.hpp"
#include "cuda/kernels/w8a8/sm90_skinny_gemm.cuh"
#include "cuda/launch/sm90_skinny_gemm.hpp"
#include "cuda/runtime/launch_config.hpp"

namespace mixq::cuda {

// Up to 8 stages of 16 KB of weights: 128 KB in flight per SM, ~17 MB over the GPU, several times
// what the H100's DRAM needs to stay busy (~3 TB/s x ~2 us); fewer where the stages' meta and
// token tiles leave no room (INT8 g = 64 with offsets at 64 tokens: 7).
template <class Policy, int MT>
constexpr int skinny_stages() {
  int s = 8;
  while (s > 2 && sm90::SkinnyShape<Policy, MT, 8>::kStageBytes * s + 1024 + 16 * s + 16 >
                      227 * 1024)
    --s;
  return s;
}

template <class Policy, int MT>
void launch_skinny_kernel(const CUtensorMap& tm_w, const CUtensorMap& tm_x,
                          const typename Policy::Params& pp, const sm90::SkinnyParams& p,
                          bool pdl, cudaStream_t stream, const char* name) {
  constexpr int kStages = skinny_stages<Policy, MT>();
  using Shape = sm90::SkinnyShape<Policy, MT, kStages>;
  static_assert(Shape::kSmemBytes <= 227 * 1024, "the ring must fit in shared memory");
  auto kernel = sm90::sm90_skinny_kernel<Policy, MT, kStages>;
  MIXQ_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       Shape::kSmemBytes));
  WoLaunchConfig lc(dim3(p.sched.grid), Shape::kThreads, Shape::kSmemBytes, stream, pdl);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, kernel, tm_w, tm_x, pp, p));
  MIXQ_CUDA_CHECK_LAUNCH(name);
  (void)name;  // MIXQ_CUDA_CHECK_LAUNCH may not use it
}

}  // namespace mixq::cuda
