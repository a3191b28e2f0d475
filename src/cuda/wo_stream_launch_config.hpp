// Launch configuration of the streaming weight-only kernel, shared by the library's launcher
// (wo_stream_launch.cuh) and the diagnostics (bench/cuda_wo_stream_probe.cu): the splits of one
// output tile as a thread-block cluster (1, splits, 1) when p.cluster, programmatic dependent
// launch when p.pdl (both only on the sm_90 image: the planner's caps.stream_clusters).
#pragma once

#include <cuda_runtime.h>

#include "cuda/wo_params.hpp"

namespace mixq::cuda {

struct StreamLaunchConfig {
  cudaLaunchAttribute attr[2];
  cudaLaunchConfig_t cfg{};

  StreamLaunchConfig(const WoStreamParams& p, dim3 grid, unsigned threads, size_t smem, cudaStream_t stream) {
    int n = 0;
    if (p.cluster) {
      attr[n].id = cudaLaunchAttributeClusterDimension;
      attr[n].val.clusterDim.x = 1;
      attr[n].val.clusterDim.y = grid.y;
      attr[n].val.clusterDim.z = 1;
      ++n;
    }
    if (p.pdl) {
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
  // cfg points into attr
  StreamLaunchConfig(const StreamLaunchConfig&) = delete;
  StreamLaunchConfig& operator=(const StreamLaunchConfig&) = delete;
};

}  // namespace mixq::cuda
