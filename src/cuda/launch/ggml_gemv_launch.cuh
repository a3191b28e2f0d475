// The q8 GEMV's launcher for one GGUF type: its token instances (MR) and rows per warp. Included
// by the ggml_gemv_*.cu files, each instantiating a few types so a parallel build compiles them
// side by side.
#pragma once

#include "cuda/kernels/ggml/ggml_kernels.cuh"
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

template <GType T>
void launch_gemv_type(const GemvParams& p, cudaStream_t stream) {
  switch (gemv_token_tile(p.M)) {
    case 1: return launch_gemv_instance<T, 1, 1>(p, stream);
    case 2: return launch_gemv_instance<T, 2, 2>(p, stream);
    case 3: return launch_gemv_instance<T, 3, 2>(p, stream);
    case 4: return launch_gemv_instance<T, 4, 2>(p, stream);
    case 6: return launch_gemv_instance<T, 6, 4>(p, stream);
    case 8: return launch_gemv_instance<T, 8, 4>(p, stream);
    case 12: return launch_gemv_instance<T, 12, 2>(p, stream);
    default: return launch_gemv_instance<T, 16, 2>(p, stream);
  }
}

#define MIXQ_GGML_GEMV_TYPE(T) template void launch_gemv_type<GType::T>(const GemvParams&, cudaStream_t);

}  // namespace mixq::cuda::ggml
