// The CUDA halves of core/device_ops.hpp: stream-ordered and capturable (a 2-D copy and the
// epilogue kernel of the weight-only path's cuBLAS route).
#include "core/device_ops.hpp"

#include <cuda_runtime.h>

#include "cuda/backend/common.hpp"
#include "cuda/launch/wo_kernels.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/device_context.hpp"

namespace mixq {

void cuda_copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                    int64_t rows, int device_index, void* stream) {
  if (rows <= 0 || width == 0) return;
  cuda::DeviceGuard guard(device_index);
  MIXQ_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, size_t(rows),
                                    cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)));
}

void cuda_epilogue_in_place(const TensorView& y, const Epilogue& ep, void* stream) {
  cuda::DeviceGuard guard(y.device_index);
  const int yt = cuda::float_type_code(y.dtype, "epilogue");
  const int bt = ep.bias.empty() ? 2 : cuda::float_type_code(ep.bias.dtype, "epilogue bias");
  cuda::launch_epilogue(y.data, y.ld(), yt, y.data, y.ld(), yt, y.shape[0], y.shape[1],
                        ep.bias.empty() ? nullptr : ep.bias.data, bt, ep.clamp_lo, ep.clamp_hi,
                        static_cast<cudaStream_t>(stream));
}

}  // namespace mixq
