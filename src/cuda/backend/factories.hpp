// Internal: one factory per CUDA prepared-weight kind; prepare_cuda (backend_cuda.cpp) picks one
// from PrepareOptions::act. Each validates what it supports and throws Unsupported otherwise.
#pragma once

#include <memory>

#include "core/prepared.hpp"

namespace mixq::cuda {

std::shared_ptr<const PreparedImpl> prepare_weight_only(const QuantizedWeight& w,
                                                        const PrepareOptions& opts);
std::shared_ptr<const PreparedImpl> prepare_fp8_block(const QuantizedWeight& w,
                                                      const PrepareOptions& opts);
std::shared_ptr<const PreparedImpl> prepare_int8_block(const QuantizedWeight& w,
                                                       const PrepareOptions& opts);
std::shared_ptr<const PreparedImpl> prepare_int8_tensor(const QuantizedWeight& w,
                                                        const PrepareOptions& opts);
// GGUF block tensors at their native width (ggml_native.cpp), when use_ggml_native says so:
// the weight carries its ggml blocks of a type the kernels read, act = none, and neither
// Tuning::cuda_ggml_native = Off nor a forced canonical kernel asks for the canonical form.
bool use_ggml_native(const QuantizedWeight& w, const PrepareOptions& opts);
std::shared_ptr<const PreparedImpl> prepare_ggml_native(const QuantizedWeight& w,
                                                        const PrepareOptions& opts);
// conv2d, weight-only (act = none): the implicit-GEMM kernel (conv_weight_only.cpp).
std::shared_ptr<const PreparedImpl> prepare_conv_weight_only(const QuantizedWeight& w,
                                                             const ConvGeometry& g,
                                                             const PrepareOptions& opts);
// conv2d, act = int8-per-tensor: the INT8 implicit GEMM with requantized output
// (conv_int8_tensor.cpp).
std::shared_ptr<const PreparedImpl> prepare_conv_int8_tensor(const QuantizedWeight& w,
                                                             const ConvGeometry& g,
                                                             const PrepareOptions& opts);

}  // namespace mixq::cuda
