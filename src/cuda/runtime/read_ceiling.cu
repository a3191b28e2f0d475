#include "mixq/device.hpp"

#include <algorithm>
#include <vector>

#include "cuda/runtime/check.hpp"
#include "cuda/kernels/util/read_kernel.cuh"

namespace mixq {


ReadCeiling measure_read_ceiling(size_t bytes, int device) {
  int prev = 0;
  MIXQ_CUDA_CHECK(cudaGetDevice(&prev));
  MIXQ_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  MIXQ_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  bytes = std::max<size_t>(bytes / 16 * 16, 16);
  const size_t want = (4 * size_t(prop.l2CacheSize) + bytes - 1) / bytes;
  const int copies = int(std::min<size_t>(std::max<size_t>(want, 1), 16));
  void* buf = nullptr;
  unsigned* sink = nullptr;
  MIXQ_CUDA_CHECK(cudaMalloc(&buf, bytes * copies));
  MIXQ_CUDA_CHECK(cudaMalloc(&sink, 4));
  MIXQ_CUDA_CHECK(cudaMemset(buf, 0x5A, bytes * copies));
  cudaStream_t s;
  MIXQ_CUDA_CHECK(cudaStreamCreate(&s));
  const size_t n = bytes / 16;
  const int blocks = int(std::min<size_t>(size_t(prop.multiProcessorCount) * 4, (n + 2047) / 2048));
  const int calls = std::max(copies, 10);
  auto launch_all = [&] {
    for (int i = 0; i < calls; ++i)
      cuda::read_kernel<<<blocks, 512, 0, s>>>(static_cast<const uint4*>(buf) + (i % copies) * n, n, sink);
  };
  launch_all();
  MIXQ_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  MIXQ_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  launch_all();
  MIXQ_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  MIXQ_CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  MIXQ_CUDA_CHECK(cudaEventCreate(&a));
  MIXQ_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int r = 0; r < 8; ++r) {
    MIXQ_CUDA_CHECK(cudaEventRecord(a, s));
    MIXQ_CUDA_CHECK(cudaGraphLaunch(ge, s));
    MIXQ_CUDA_CHECK(cudaEventRecord(b, s));
    MIXQ_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    MIXQ_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (r > 0) t.push_back(ms * 1e3 / calls);  // the first replay warms up
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFree(buf);
  cudaFree(sink);
  cudaSetDevice(prev);
  ReadCeiling rc;
  rc.bytes = bytes;
  rc.us = t[t.size() / 2];
  rc.tb_per_s = double(bytes) / rc.us * 1e-6;
  return rc;
}

}  // namespace mixq
