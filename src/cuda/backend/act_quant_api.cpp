// CUDA glue of the public activation quantizers: arguments were validated by
// src/core/act_quant.cpp; this picks the device and enqueues the kernels on ctx.stream.
#include <cuda_runtime.h>

#include "core/act_quant_dispatch.hpp"
#include "cuda/backend/int8_common.hpp"
#include "cuda/launch/act_quant.hpp"
#include "cuda/runtime/check.hpp"

namespace mixq::detail {

namespace {

int io_type(DType t) { return t == DType::F16 ? 0 : t == DType::BF16 ? 1 : 2; }

// Launches on the tensors' device, restoring the caller's current device afterwards.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    MIXQ_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != device) MIXQ_CUDA_CHECK(cudaSetDevice(device));
  }
  ~CurrentDevice() { cudaSetDevice(prev_); }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int prev_ = 0;
};

}  // namespace

void quantize_activations_fp8_block_cuda(const TensorView& x, const TensorView& q,
                                         const TensorView& scale, const ExecContext& ctx) {
  CurrentDevice dev(x.device_index);
  cuda::launch_quantize_fp8_1x128(x.data, io_type(x.dtype), x.stride[0], x.shape[0], x.shape[1],
                                  static_cast<uint8_t*>(q.data), q.stride[0],
                                  static_cast<float*>(scale.data), scale.stride[0],
                                  static_cast<cudaStream_t>(ctx.stream), false,
                                  cuda::act_quant_tuning(default_tuning()));
}

void quantize_activations_int8_block_cuda(const TensorView& x, int64_t block, const TensorView& q,
                                          const TensorView& scale, const TensorView& offset,
                                          const TensorView& sums, const ExecContext& ctx) {
  CurrentDevice dev(x.device_index);
  cuda::launch_quantize_int8_block(x.data, io_type(x.dtype), x.stride[0], x.shape[0], x.shape[1],
                                   block, static_cast<int8_t*>(q.data), q.stride[0],
                                   static_cast<float*>(scale.data), static_cast<float*>(offset.data),
                                   static_cast<int32_t*>(sums.data), scale.stride[0],
                                   static_cast<cudaStream_t>(ctx.stream), false,
                                   cuda::act_quant_tuning(default_tuning()));
}

}  // namespace mixq::detail
