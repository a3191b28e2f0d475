// Launch configuration of the weight-only kernels on the sm_90 image, shared by the launchers
// (wo_stream_launch.cuh, sm90_wo_wgmma_ws.cu) and the diagnostics (bench/cuda_wo_stream_probe.cu):
// the splits of one output tile as a thread-block cluster (the streaming kernel's along y, the
// wgmma kernel's K split along x) and programmatic dependent launch
// (kernels/grid_dependency.cuh), each where the plan asks for it (only on the sm_90 image: the
// planner's caps.stream_clusters).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/kernels/common/wo_params.hpp"
#include "cuda/runtime/check.hpp"

namespace mixq::cuda {

struct WoLaunchConfig {
  cudaLaunchAttribute attr[2];
  cudaLaunchConfig_t cfg{};

  // cluster: blocks per thread-block cluster (none where it is 1 x 1 x 1); pdl: programmatic
  // stream serialization
  WoLaunchConfig(dim3 grid, unsigned threads, size_t smem, cudaStream_t stream, bool pdl,
                 dim3 cluster = dim3(1, 1, 1)) {
    int n = 0;
    if (cluster.x * cluster.y * cluster.z > 1) {
      attr[n].id = cudaLaunchAttributeClusterDimension;
      attr[n].val.clusterDim.x = cluster.x;
      attr[n].val.clusterDim.y = cluster.y;
      attr[n].val.clusterDim.z = cluster.z;
      ++n;
    }
    if (pdl) {
      attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[n].val.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    cfg.gridDim = grid;
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = unsigned(n);
  }
  // The streaming kernel: its splits as one cluster where p.cluster.
  WoLaunchConfig(const WoStreamParams& p, dim3 grid, unsigned threads, size_t smem,
                 cudaStream_t stream)
      : WoLaunchConfig(grid, threads, smem, stream, p.pdl, dim3(1, p.cluster ? grid.y : 1, 1)) {}
  // cfg points into attr
  WoLaunchConfig(const WoLaunchConfig&) = delete;
  WoLaunchConfig& operator=(const WoLaunchConfig&) = delete;
};

// A kernel attribute set once per device. cudaFuncSetAttribute applies to the calling thread's
// current device only, so a process that drives several GPUs must set it on each: a
// once-per-process static left every GPU but the first without the opt-in to more than 48 KB of
// shared memory, and its launches there failed. Keep one object per kernel instantiation (a
// function-local static of the launcher that names the kernel).
class PerDeviceAttribute {
 public:
  template <typename Set>
  cudaError_t ensure(Set&& set) {
    int device = 0;
    const cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess) return e;
    if (device >= 64) return set();
    const uint64_t bit = uint64_t(1) << device;
    if (done_.load(std::memory_order_acquire) & bit) return cudaSuccess;
    const cudaError_t r = set();
    if (r == cudaSuccess) done_.fetch_or(bit, std::memory_order_acq_rel);
    return r;
  }

 private:
  std::atomic<uint64_t> done_{0};
};

// The streaming kernels' attributes (kernels/wo/sm80_wo_stream.cuh and its grouped form), set once
// per instantiation and device: the opt-in to 160 KB of dynamic shared memory, and to clusters of
// more than 8 blocks (a non-portable size, H100 allows 16) where the launch reduces its splits in one.
template <auto Kernel>
cudaError_t ensure_stream_kernel_attributes(bool cluster) {
  static PerDeviceAttribute smem_limit, cluster_size;
  cudaError_t e =
      smem_limit.ensure([] { return cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024); });
  if (e == cudaSuccess && cluster)
    e = cluster_size.ensure([] { return cudaFuncSetAttribute(Kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1); });
  return e;
}

// Blocks of Kernel (THREADS threads, no dynamic shared memory: registers decide) resident on one
// SM of the current device, asked of the driver once per device ordinal 0-63 (as PerDeviceAttribute
// and PerDeviceFlag: higher ordinals ask every time), not at every launch (atomic: prepared
// weights are called from several threads).
template <auto Kernel, int THREADS>
int resident_blocks_per_sm() {
  static std::atomic<int> known[64] = {};
  int device = 0;
  MIXQ_CUDA_CHECK(cudaGetDevice(&device));
  int blocks = device < 64 ? known[device].load(std::memory_order_relaxed) : 0;
  if (blocks == 0) {
    MIXQ_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Kernel, THREADS, 0));
    blocks = blocks > 0 ? blocks : 1;
    if (device < 64) known[device].store(blocks, std::memory_order_relaxed);
  }
  return blocks;
}

}  // namespace mixq::cuda
