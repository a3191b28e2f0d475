// Internal: the few memory operations the tensor-parallel layers run around a product, on the
// host or, stream-ordered, on a CUDA device (src/cuda/backend/device_ops.cpp; a build without
// CUDA throws Unsupported from src/core/cuda_stub.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "mixq/ops.hpp"

namespace mixq {

// rows x width bytes from src (rows spitch bytes apart) to dst (dpitch apart).
void copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
               int64_t rows, Device device, int device_index, void* stream);
// y = clamp(y + bias, lo, hi) in place (y [M][N] F32/F16/BF16, rows contiguous).
void epilogue_in_place(const TensorView& y, const Epilogue& ep, const ExecContext& ctx);

// The CUDA halves (stream-ordered, capturable).
void cuda_copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                    int64_t rows, int device_index, void* stream);
void cuda_epilogue_in_place(const TensorView& y, const Epilogue& ep, void* stream);

}  // namespace mixq
