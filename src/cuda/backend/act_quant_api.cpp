// CUDA glue of the public activation quantizers: arguments were validated by
// src/core/act_quant.cpp; this picks the device and enqueues the kernels on ctx.stream.
#include <cuda_runtime.h>

#include "core/act_quant_dispatch.hpp"
#include "cuda/backend/common.hpp"
#include "cuda/launch/act_quant.hpp"

namespace mixq::detail {

using cuda::DeviceGuard;        // launches on the tensors' device, restoring the caller's
using cuda::int8b::type_code;   // x's type code (0 f16, 1 bf16, 2 f32): the launchers' IoType

void quantize_activations_fp8_block_cuda(const TensorView& x, const TensorView& q,
                                         const TensorView& scale, const ExecContext& ctx) {
  DeviceGuard dev(x.device_index);
  cuda::launch_quantize_fp8_1x128(x.data, type_code(x.dtype), x.stride[0], x.shape[0], x.shape[1],
                                  static_cast<uint8_t*>(q.data), q.stride[0],
                                  static_cast<float*>(scale.data), scale.stride[0],
                                  static_cast<cudaStream_t>(ctx.stream), false,
                                  cuda::act_quant_tuning(default_tuning()));
}

void quantize_activations_int8_block_cuda(const TensorView& x, int64_t block, const TensorView& q,
                                          const TensorView& scale, const TensorView& offset,
                                          const TensorView& sums, const ExecContext& ctx) {
  DeviceGuard dev(x.device_index);
  cuda::launch_quantize_int8_block(x.data, type_code(x.dtype), x.stride[0], x.shape[0], x.shape[1],
                                   block, static_cast<int8_t*>(q.data), q.stride[0],
                                   static_cast<float*>(scale.data), static_cast<float*>(offset.data),
                                   static_cast<int32_t*>(sums.data), scale.stride[0],
                                   static_cast<cudaStream_t>(ctx.stream), false,
                                   cuda::act_quant_tuning(default_tuning()));
}

}  // namespace mixq::detail
