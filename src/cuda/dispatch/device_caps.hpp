// What the planners know about the GPU: read once per device from cudaGetDeviceProperties and
// the kernels' loaded images (runtime/device_context.cpp), never assumed from the GPU's name.
#pragma once

#include <cstddef>

#include "cuda/kernels/common/wo_layout.hpp"

namespace mixq::cuda {

struct DeviceCaps {
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t smem_per_sm = 0;           // shared memory of one SM (bytes)
  size_t smem_per_block_optin = 0;  // largest dynamic shared memory a CTA may opt into
  size_t l2_bytes = 0;
  // the sm_90a image of the Hopper kernels runs on this device (wgmma, TMA, setmaxnreg)
  bool sm90a = false;
  // the streaming kernel's loaded image can launch thread-block clusters and programmatic
  // dependent launches (sm_90 code on a 9.x device)
  bool stream_clusters = false;
  // cluster_capacity[b][s]: how many clusters of s blocks (128 threads) the GPU holds at once
  // when b such blocks fit an SM (cudaOccupancyMaxActiveClusters; 0: unknown). Clusters are
  // placed within one GPC, so near full occupancy fewer fit than SMs x b / s.
  static constexpr int kMaxClusterBlocksPerSm = 8;
  int cluster_capacity[kMaxClusterBlocksPerSm + 1][kStreamMaxClusterSplits + 1] = {};

  // An H100 SXM's numbers, for tests of the planners without a GPU.
  static DeviceCaps h100() {
    DeviceCaps c;
    c.sm_count = 132;
    c.cc_major = 9;
    c.smem_per_sm = 228 * 1024;
    c.smem_per_block_optin = 227 * 1024;
    c.l2_bytes = 50u << 20;
    c.sm90a = true;
    return c;
  }
};

}  // namespace mixq::cuda
