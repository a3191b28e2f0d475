// Launcher of the NCHW <-> NHWC image transpose (kernels/conv/layout_transpose.cuh).
#include <algorithm>
#include <cstdint>

#include "cuda/kernels/conv/layout_transpose.cuh"
#include "cuda/launch/conv_kernels.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/launch_config.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

void launch_image_transpose(const void* src, void* dst, int elem_bytes, int64_t batch, int64_t rows,
                            int64_t cols, cudaStream_t stream, bool pdl) {
  MIXQ_CHECK(elem_bytes == 1 || elem_bytes == 2 || elem_bytes == 4, ErrorCode::Internal,
             "image transpose: elements of ", elem_bytes, " bytes (1, 2 or 4 are supported)");
  MIXQ_CHECK(batch >= 0 && rows >= 0 && cols >= 0, ErrorCode::Internal, "image transpose: sizes ",
             batch, " x ", rows, " x ", cols);
  if (batch == 0 || rows == 0 || cols == 0) return;
  // Square tiles of `side` (the kernel loops over them): a grid of up to 64K blocks of 32 x 8
  // threads fills any GPU.
  const int64_t side = elem_bytes <= 2 ? conv::kPairTile : conv::kTransposeTile;
  const int64_t tiles = batch * ((rows + side - 1) / side) * ((cols + side - 1) / side);
  WoLaunchConfig lc(dim3(unsigned(std::min<int64_t>(tiles, int64_t(1) << 16))), 1, 0, stream, pdl);
  lc.cfg.blockDim = dim3(32, 8);
  // 64 x 64 tiles, elements moved in pairs where the rows allow (layout_transpose.cuh); a pair on
  // the store side: rows even and dst aligned to two elements
  const bool pair_store = rows % 2 == 0 && reinterpret_cast<uintptr_t>(dst) % (2 * elem_bytes) == 0;
  if (elem_bytes == 1) {
    const auto* s = static_cast<const uint8_t*>(src);
    auto* d = static_cast<uint8_t*>(dst);
    using Kernel = void (*)(const uint8_t*, uint8_t*, int64_t, int64_t, int64_t);
    const Kernel kernel = pair_store ? conv::image_transpose_pairs_kernel<uint8_t, false, true>
                                     : conv::image_transpose_pairs_kernel<uint8_t, false, false>;
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, kernel, s, d, batch, rows, cols));
  } else if (elem_bytes == 2) {
    const auto* s = static_cast<const uint16_t*>(src);
    auto* d = static_cast<uint16_t*>(dst);
    const bool pair_load = cols % 2 == 0 && reinterpret_cast<uintptr_t>(src) % 4 == 0;
    using Kernel = void (*)(const uint16_t*, uint16_t*, int64_t, int64_t, int64_t);
    const Kernel kernel =
        pair_load ? (pair_store ? conv::image_transpose_pairs_kernel<uint16_t, true, true>
                                : conv::image_transpose_pairs_kernel<uint16_t, true, false>)
                  : (pair_store ? conv::image_transpose_pairs_kernel<uint16_t, false, true>
                                : conv::image_transpose_pairs_kernel<uint16_t, false, false>);
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, kernel, s, d, batch, rows, cols));
  } else {
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, conv::image_transpose_kernel<uint32_t>,
                                       static_cast<const uint32_t*>(src),
                                       static_cast<uint32_t*>(dst), batch, rows, cols));
  }
  MIXQ_CUDA_CHECK_LAUNCH("image_transpose");
}

}  // namespace mixq::cuda
