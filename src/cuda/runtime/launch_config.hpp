// Launch configuration of the weight-only kernels on the sm_90 image, shared by the launchers
// (wo_stream_launch.cuh, sm90_wo_wgmma_ws.cu) and the diagnostics (bench/cuda_wo_stream_probe.cu):
// the splits of one output tile as a thread-block cluster (1, cluster_y, 1) and programmatic
// dependent launch (kernels/grid_dependency.cuh), each where the plan asks for it (only on the
// sm_90 image: the planner's caps.stream_clusters).
#pragma once

#include <cuda_runtime.h>

#include "cuda/kernels/common/wo_params.hpp"

namespace mixq::cuda {

struct WoLaunchConfig {
  cudaLaunchAttribute attr[2];
  cudaLaunchConfig_t cfg{};

  // cluster_y > 1: clusters of (1, cluster_y, 1) blocks; pdl: programmatic stream serialization
  WoLaunchConfig(dim3 grid, unsigned threads, size_t smem, cudaStream_t stream, bool pdl,
                 unsigned cluster_y = 1) {
    int n = 0;
    if (cluster_y > 1) {
      attr[n].id = cudaLaunchAttributeClusterDimension;
      attr[n].val.clusterDim.x = 1;
      attr[n].val.clusterDim.y = cluster_y;
      attr[n].val.clusterDim.z = 1;
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
  WoLaunchConfig(const WoStreamParams& p, dim3 grid, unsigned threads, size_t smem, cudaStream_t stream)
      : WoLaunchConfig(grid, threads, smem, stream, p.pdl, p.cluster ? grid.y : 1) {}
  // cfg points into attr
  WoLaunchConfig(const WoLaunchConfig&) = delete;
  WoLaunchConfig& operator=(const WoLaunchConfig&) = delete;
};

}  // namespace mixq::cuda
