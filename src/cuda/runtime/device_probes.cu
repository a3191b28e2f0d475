#include "cuda/runtime/device_probes.hpp"

#include <cuda_runtime.h>

#include "cuda/kernels/util/probe_kernels.cuh"
#include "cuda/runtime/kernel_image.hpp"

namespace mixq::cuda {

bool probe_sm90a_image(int device) {
  static PerDeviceFlag cache;
  return runs_sm90_image(cache, device, reinterpret_cast<const void*>(image_probe_kernel));
}

void probe_cluster_capacity(int device, DeviceCaps& caps) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess || prop.major < 9) return;
  int prev = 0;
  if (cudaGetDevice(&prev) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) return;
  const bool attrs =
      cudaFuncSetAttribute(cluster_probe_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
          cudaSuccess &&
      cudaFuncSetAttribute(cluster_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           int(prop.sharedMemPerBlockOptin)) == cudaSuccess;
  for (int b = 1; attrs && b <= DeviceCaps::kMaxClusterBlocksPerSm; ++b) {
    // shared memory that admits b blocks per SM, not b + 1
    const size_t smem = prop.sharedMemPerMultiprocessor / b - prop.reservedSharedMemPerBlock;
    if (smem > prop.sharedMemPerBlockOptin) continue;
    for (int s = 1; s <= kStreamMaxClusterSplits; ++s) {
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = unsigned(s);
      attr[0].val.clusterDim.y = 1;
      attr[0].val.clusterDim.z = 1;
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(unsigned(s));
      cfg.blockDim = dim3(128);
      cfg.dynamicSmemBytes = smem;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      int n = 0;
      if (cudaOccupancyMaxActiveClusters(&n, cluster_probe_kernel, &cfg) == cudaSuccess)
        caps.cluster_capacity[b][s] = n;
    }
  }
  cudaGetLastError();  // a size the device refuses leaves its entry at zero
  cudaSetDevice(prev);
}

}  // namespace mixq::cuda
