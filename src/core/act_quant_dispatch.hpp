// The CUDA half of the public activation quantizers (mixq/act_quant.hpp): arguments already
// validated by src/core/act_quant.cpp. Defined in src/cuda/act_quant_api.cpp, or in
// src/core/act_quant_cuda_stub.cpp (throws Unsupported) in a build without CUDA.
#pragma once

#include <cstdint>

#include "mixq/ops.hpp"
#include "mixq/tensor.hpp"

namespace mixq::detail {

void quantize_activations_fp8_block_cuda(const TensorView& x, const TensorView& q,
                                         const TensorView& scale, const ExecContext& ctx);
void quantize_activations_int8_block_cuda(const TensorView& x, int64_t block, const TensorView& q,
                                          const TensorView& scale, const TensorView& offset,
                                          const TensorView& sums, const ExecContext& ctx);

}  // namespace mixq::detail
