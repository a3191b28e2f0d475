#include "cuda/runtime/kernel_image.hpp"

#include <cuda_runtime.h>

namespace mixq::cuda {

bool runs_sm90_image(PerDeviceFlag& cache, int device, const void* kernel) {
  if (device < 0 || device >= 64) return false;
  if (cache.state[device] == 0) {
    cudaDeviceProp prop{};
    cudaFuncAttributes attr{};
    const bool ok = cudaGetDeviceProperties(&prop, device) == cudaSuccess && prop.major == 9 &&
                    cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.binaryVersion == 90;
    cudaGetLastError();  // a failed query is an answer (no), not a sticky error
    cache.state[device] = ok ? 1 : 2;
  }
  return cache.state[device] == 1;
}

}  // namespace mixq::cuda
