// Streaming weight-only kernel instantiations for f16 activations.
#include "cuda/wo_stream_launch.cuh"

namespace mixq::cuda {
void launch_wo_stream_f16(const WoStreamParams& p, int mt, int codes, dim3 grid, size_t smem,
                              cudaStream_t stream) {
  launch_stream_for_type<half, false>(p, mt, codes, grid, smem, stream);
}

// (here: this file holds the instantiation it inspects)
bool wo_stream_clusters_available(int device) {
  static int cached[64];  // 0 unknown, 1 yes, 2 no (per device ordinal)
  if (device < 0 || device >= 64) return false;
  if (cached[device] == 0) {
    cudaDeviceProp prop{};
    cudaFuncAttributes attr{};
    const bool ok =
        cudaGetDeviceProperties(&prop, device) == cudaSuccess && prop.major >= 9 &&
        cudaFuncGetAttributes(&attr, wo_stream_kernel<half, 8, kCodesU4, false, false, kStreamWarps>) ==
            cudaSuccess &&
        attr.binaryVersion >= 90;
    cudaGetLastError();
    cached[device] = ok ? 1 : 2;
  }
  return cached[device] == 1;
}

}  // namespace mixq::cuda
