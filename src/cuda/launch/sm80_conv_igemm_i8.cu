// Launcher of the INT8 per-tensor implicit-GEMM conv2d (kernels/conv/sm80_conv_igemm_i8.cuh).
#include "cuda/kernels/conv/sm80_conv_igemm_i8.cuh"
#include "cuda/launch/conv_kernels.hpp"
#include "cuda/runtime/check.hpp"

namespace mixq::cuda {

void launch_conv_igemm_i8(const ConvI8Params& p, cudaStream_t stream) {
  const int64_t M = int64_t(p.B) * p.Ho * p.Wo;
  const dim3 grid(unsigned((M + kConvBM - 1) / kConvBM), unsigned((p.Co + kConvBN - 1) / kConvBN));
  conv::conv_igemm_i8_kernel<<<grid, kConvThreads, 0, stream>>>(p);
  MIXQ_CUDA_CHECK_LAUNCH("conv_igemm_i8");
}

}  // namespace mixq::cuda
