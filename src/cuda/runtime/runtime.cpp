// CUDA runtime glue: device buffers and GPU detection (compiled only in CUDA builds).
#include <cuda_runtime.h>

#include "cuda/runtime/check.hpp"
#include "mixq/error.hpp"
#include "mixq/tensor.hpp"

namespace mixq {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" error
    return 0;
  }
  return n;
}

bool cuda_available() {
  static const bool available = cuda_device_count() > 0;
  return available;
}

DeviceBuffer::DeviceBuffer(size_t bytes, int device) : bytes_(bytes), device_(device) {
  MIXQ_CHECK(cuda_available(), ErrorCode::Unsupported, "DeviceBuffer: no CUDA device is available");
  if (bytes == 0) return;
  int prev = 0;
  MIXQ_CUDA_CHECK(cudaGetDevice(&prev));
  MIXQ_CUDA_CHECK(cudaSetDevice(device));
  const cudaError_t e = cudaMalloc(&ptr_, bytes);
  cudaSetDevice(prev);
  MIXQ_CHECK(e == cudaSuccess, ErrorCode::Cuda, "DeviceBuffer: cudaMalloc(", bytes,
             " bytes) on device ", device, " failed: ", cudaGetErrorString(e));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

TensorView DeviceBuffer::view(DType t, std::initializer_list<int64_t> dims) const {
  TensorView v(ptr_, t, dims, Device::CUDA, device_);
  MIXQ_CHECK_ARG(static_cast<size_t>(v.nbytes()) <= bytes_, "DeviceBuffer::view: ", v.describe(),
                 " needs ", v.nbytes(), " bytes, buffer has ", bytes_);
  return v;
}

void DeviceBuffer::copy_from_host(const void* src, size_t bytes, size_t offset) {
  MIXQ_CHECK_ARG(offset + bytes <= bytes_, "DeviceBuffer::copy_from_host: [", offset, ", ",
                 offset + bytes, ") exceeds the buffer size ", bytes_);
  MIXQ_CUDA_CHECK(cudaMemcpy(static_cast<char*>(ptr_) + offset, src, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::copy_to_host(void* dst, size_t bytes, size_t offset) const {
  MIXQ_CHECK_ARG(offset + bytes <= bytes_, "DeviceBuffer::copy_to_host: [", offset, ", ",
                 offset + bytes, ") exceeds the buffer size ", bytes_);
  MIXQ_CUDA_CHECK(cudaMemcpy(dst, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace mixq
