#include "cuda/runtime/stream_fence.hpp"

#include "cuda/runtime/check.hpp"

namespace mixq::cuda {

namespace {
__global__ void stream_fence_kernel() {}
}  // namespace

void launch_stream_fence(cudaStream_t stream) {
  stream_fence_kernel<<<1, 32, 0, stream>>>();
  MIXQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mixq::cuda
