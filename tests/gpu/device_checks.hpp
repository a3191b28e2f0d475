// Which GPU the tests run on, and the (visible) skips of the tests that need one.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "mixq/tensor.hpp"

namespace mixq::test {

// Device 0 is compute capability 9.0 (wgmma, TMA: the FP8 block kernels, the skinny kernels).
inline bool hopper() {
  if (!cuda_available()) return false;
  cudaDeviceProp p;
  return cudaGetDeviceProperties(&p, 0) == cudaSuccess && p.major == 9 && p.minor == 0;
}

}  // namespace mixq::test

#define SKIP_WITHOUT_GPU() \
  if (!::mixq::cuda_available()) GTEST_SKIP() << "no CUDA device"
#define SKIP_WITHOUT_HOPPER() \
  if (!::mixq::test::hopper()) GTEST_SKIP() << "needs a compute capability 9.0 GPU"
