// The CUDA halves of core/device_ops.hpp: stream-ordered and capturable (a 2-D copy and the
// epilogue kernel of the weight-only path's cuBLAS route).
#include "core/device_ops.hpp"

#include <cuda_runtime.h>

#include "cuda/backend/common.hpp"
#include "cuda/launch/wo_kernels.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/device_context.hpp"

namespace mixq {

void cuda_copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                    int64_t rows, int device_index, void* stream) {
  if (rows <= 0 || width == 0) return;
  cuda::DeviceGuard guard(device_index);
  MIXQ_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, size_t(rows),
                                    cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)));
}

void cuda_epilogue_in_place(const TensorView& y, const Epilogue& ep, void* stream) {
  cuda::DeviceGuard guard(y.device_index);
  const int yt = cuda::float_type_code(y.dtype, "epilogue");
  const int bt = ep.bias.empty() ? 2 : cuda::float_type_code(ep.bias.dtype, "epilogue bias");
  cuda::launch_epilogue(y.data, y.ld(), yt, y.data, y.ld(), yt, y.shape[0], y.shape[1],
                        ep.bias.empty() ? nullptr : ep.bias.data, bt, ep.clamp_lo, ep.clamp_hi,
                        static_cast<cudaStream_t>(stream));
}

void* cuda_alloc_async(size_t bytes, int device_index, void* stream) {
  cuda::DeviceGuard guard(device_index);
  void* p = nullptr;
  MIXQ_CUDA_CHECK(cudaMallocAsync(&p, bytes, static_cast<cudaStream_t>(stream)));
  return p;
}

void cuda_free_async(void* ptr, int device_index, void* stream) {
  if (ptr == nullptr) return;
  cuda::DeviceGuard guard(device_index);
  MIXQ_CUDA_CHECK(cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream)));
}

StreamFork::StreamFork(int device_index, int events) : device_(device_index) {
  cuda::DeviceGuard guard(device_);
  cudaStream_t s = nullptr;
  MIXQ_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  side_ = s;
  for (int i = 0; i <= events; ++i) {
    cudaEvent_t e = nullptr;
    MIXQ_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    if (i < events) events_.push_back(e);
    else joined_ = e;
  }
}

StreamFork::~StreamFork() {
  cuda::QuietDeviceGuard guard(device_);
  for (void* e : events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  if (joined_) cudaEventDestroy(static_cast<cudaEvent_t>(joined_));
  if (side_) cudaStreamDestroy(static_cast<cudaStream_t>(side_));
}

void StreamFork::fork(int i, void* stream) {
  cuda::DeviceGuard guard(device_);
  const auto e = static_cast<cudaEvent_t>(events_.at(size_t(i)));
  MIXQ_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(stream)));
  MIXQ_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(side_), e, 0));
}

void StreamFork::join(void* stream) {
  cuda::DeviceGuard guard(device_);
  const auto e = static_cast<cudaEvent_t>(joined_);
  MIXQ_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(side_)));
  MIXQ_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), e, 0));
}

}  // namespace mixq
