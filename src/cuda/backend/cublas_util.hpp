// Internal: what the cuBLAS paths of the CUDA prepared weights share (weight_only.cpp,
// ggml_native.cpp): the status check and the cuBLAS type of an activation / output dtype.
#pragma once

#include <cublas_v2.h>

#include "mixq/dtype.hpp"
#include "mixq/error.hpp"

#define MIXQ_CUBLAS_CHECK(expr)                                                         \
  do {                                                                                  \
    const cublasStatus_t st_ = (expr);                                                  \
    MIXQ_CHECK(st_ == CUBLAS_STATUS_SUCCESS, ErrorCode::Cuda, #expr " failed: status ", \
               static_cast<int>(st_));                                                  \
  } while (0)

namespace mixq::cuda {

// f16 / bf16 map to their 16-bit types, everything else the callers pass (f32) to CUDA_R_32F.
inline cudaDataType_t cublas_type(DType t) {
  switch (t) {
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

}  // namespace mixq::cuda
