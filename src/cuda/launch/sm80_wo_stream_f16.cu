// Streaming weight-only kernel instantiations for f16 activations.
#include "cuda/runtime/kernel_image.hpp"
#include "cuda/launch/wo_stream_launch.cuh"

namespace mixq::cuda {
void launch_wo_stream_f16(const WoStreamParams& p, const WoPlan& plan, cudaStream_t stream) {
  launch_stream_for_type<half, false>(p, plan, stream);
}

// (here: this file holds the instantiation it inspects)
bool wo_stream_clusters_available(int device) {
  static PerDeviceFlag cache;
  return runs_sm90_image(
      cache, device,
      reinterpret_cast<const void*>(wo_stream_kernel<half, 8, kCodesU4, false, false, kStreamWarps>));
}

}  // namespace mixq::cuda
