// Every CUDA runtime / cuBLAS call is checked; failures become mixq::Error(ErrorCode::Cuda).
#pragma once

#include <cuda_runtime.h>

#include "mixq/error.hpp"

#define MIXQ_CUDA_CHECK(expr)                                                              \
  do {                                                                                     \
    const cudaError_t mixq_err_ = (expr);                                                  \
    if (mixq_err_ != cudaSuccess)                                                          \
      ::mixq::detail::fail(::mixq::ErrorCode::Cuda,                                        \
                           ::mixq::detail::cat(#expr, " failed: ", cudaGetErrorString(mixq_err_))); \
  } while (0)

// After a kernel launch: catches launch-configuration errors without synchronising.
#define MIXQ_CUDA_CHECK_LAUNCH(what) MIXQ_CUDA_CHECK((cudaGetLastError(), cudaPeekAtLastError()))
