// Launcher of the NCHW <-> NHWC image transpose (kernels/conv/layout_transpose.cuh).
#include <algorithm>
#include <cstdint>

#include "cuda/kernels/conv/layout_transpose.cuh"
#include "cuda/launch/conv_kernels.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/launch_config.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

void launch_image_transpose(const void* src, void* dst, int elem_bytes, int64_t batch,
                            int64_t rows, int64_t cols, cudaStream_t stream, bool pdl) {
  MIXQ_CHECK(elem_bytes == 2 || elem_bytes == 4, ErrorCode::Internal,
             "image transpose: elements of ", elem_bytes, " bytes (2 or 4 are supported)");
  MIXQ_CHECK(batch >= 0 && rows >= 0 && cols >= 0, ErrorCode::Internal, "image transpose: sizes ",
             batch, " x ", rows, " x ", cols);
  if (batch == 0 || rows == 0 || cols == 0) return;
  constexpr int64_t kTile = conv::kTransposeTile;
  const int64_t tiles = batch * ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  // the kernel loops over tiles: a grid of up to 64K blocks of 256 threads fills any GPU
  const unsigned grid = unsigned(std::min<int64_t>(tiles, int64_t(1) << 16));
  const dim3 block(conv::kTransposeTile, conv::kTransposeRows);
  WoLaunchConfig lc(dim3(grid), 1, 0, stream, pdl);
  lc.cfg.blockDim = block;
  if (elem_bytes == 2)
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, conv::image_transpose_kernel<uint16_t>,
                                       static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst),
                                       batch, rows, cols));
  else
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, conv::image_transpose_kernel<uint32_t>,
                                       static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst),
                                       batch, rows, cols));
  MIXQ_CUDA_CHECK_LAUNCH("image_transpose");
}

}  // namespace mixq::cuda
