#include "cuda/launch/zero_words.hpp"

#include <algorithm>

#include "cuda/kernels/common/grid_dependency.cuh"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/launch_config.hpp"

namespace mixq::cuda {
namespace {

__global__ void __launch_bounds__(256) zero_words_kernel(unsigned* __restrict__ p, size_t n) {
  allow_dependent_launch();  // the GEMM may start its prologue and weight loads now
  grid_dependency_wait();    // the previous kernel may still read or write these words
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = 0u;
}

}  // namespace

void launch_zero_words(unsigned* p, size_t n, bool pdl, cudaStream_t stream) {
  if (n == 0) return;
  const unsigned blocks = unsigned(std::min<size_t>((n + 255) / 256, 64));
  WoLaunchConfig lc(dim3(blocks), 256, 0, stream, pdl);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, zero_words_kernel, p, n));
}

}  // namespace mixq::cuda
