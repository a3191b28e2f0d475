// Instantiation helper for the streaming kernel; included by one .cu per activation type so the
// configurations compile in parallel.
#pragma once

#include "cuda/check.hpp"
#include "cuda/kernels/sm80_wo_stream.cuh"
#include "cuda/wo_launch_config.hpp"
#include "cuda/wo_kernels.hpp"

namespace mixq::cuda {

template <typename MmaT, int MT, int BITS, bool SPLIT_X, bool FINE>
void launch_stream_kernel(const WoStreamParams& p, dim3 grid, size_t smem, cudaStream_t stream) {
  auto kernel = wo_stream_kernel<MmaT, MT, BITS, SPLIT_X, FINE, kStreamWarps>;
  // Raise the dynamic shared-memory limit once per configuration (above 48 KB needs opt-in).
  static const cudaError_t attr_status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024);
  MIXQ_CUDA_CHECK(attr_status);
  // More than 8 blocks in a cluster is a non-portable size (H100 allows 16) that the kernel must
  // opt into.
  if (p.cluster) {
    static const cudaError_t cluster_status =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    MIXQ_CUDA_CHECK(cluster_status);
  }
  const WoLaunchConfig launch(p, grid, kStreamWarps * 32, smem, stream);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&launch.cfg, kernel, p));
}

// Groups shorter than a 64-wide chunk (16, 32) need the per-tile fold test (FINE).
template <typename MmaT, int MT, int BITS, bool SPLIT_X>
void launch_stream_config(const WoStreamParams& p, dim3 grid, size_t smem, cudaStream_t stream) {
  if (p.group_shift < 6) return launch_stream_kernel<MmaT, MT, BITS, SPLIT_X, true>(p, grid, smem, stream);
  launch_stream_kernel<MmaT, MT, BITS, SPLIT_X, false>(p, grid, smem, stream);
}

// codes: the code kind (wo_layout.hpp): kCodesU4, kCodesU8 or kCodesE4M3.
template <typename MmaT, bool SPLIT_X>
void launch_stream_for_type(const WoStreamParams& p, int mt, int codes, dim3 grid, size_t smem,
                            cudaStream_t stream) {
#define MIXQ_STREAM_CASE(MT_)                                                                    \
  case MT_:                                                                                      \
    if (codes == kCodesU4) return launch_stream_config<MmaT, MT_, kCodesU4, SPLIT_X>(p, grid, smem, stream); \
    if (codes == kCodesU8) return launch_stream_config<MmaT, MT_, kCodesU8, SPLIT_X>(p, grid, smem, stream); \
    return launch_stream_config<MmaT, MT_, kCodesE4M3, SPLIT_X>(p, grid, smem, stream);
  switch (mt) {
    MIXQ_STREAM_CASE(8)
    MIXQ_STREAM_CASE(16)
    MIXQ_STREAM_CASE(32)
    MIXQ_STREAM_CASE(64)
  }
#undef MIXQ_STREAM_CASE
  MIXQ_FAIL(ErrorCode::Internal, "wo_stream: no configuration for mt=", mt);
}

}  // namespace mixq::cuda
