// Instantiations and launcher of the weight-only implicit-GEMM conv2d (kernels/conv/).
#include <algorithm>

#include "cuda/kernels/conv/sm80_conv_igemm.cuh"
#include "cuda/launch/conv_kernels.hpp"
#include "cuda/runtime/check.hpp"

namespace mixq::cuda {

void launch_conv_igemm(const ConvIgemmParams& p, cudaStream_t stream) {
  const int64_t M = int64_t(p.B) * p.Ho * p.Wo;
  const dim3 grid(unsigned((M + kConvBM - 1) / kConvBM), unsigned((p.Co + kConvBN - 1) / kConvBN),
                  unsigned(p.splits));
  switch (p.x_type) {
    case IoType::F16: conv::conv_igemm_kernel<half, false><<<grid, kConvThreads, 0, stream>>>(p); break;
    case IoType::BF16:
      conv::conv_igemm_kernel<__nv_bfloat16, false><<<grid, kConvThreads, 0, stream>>>(p);
      break;
    default: conv::conv_igemm_kernel<__nv_bfloat16, true><<<grid, kConvThreads, 0, stream>>>(p); break;
  }
  MIXQ_CUDA_CHECK_LAUNCH("conv_igemm");
  if (p.splits > 1) {
    const int64_t total = M * p.Co;
    const unsigned blocks = unsigned(std::min<int64_t>((total + 255) / 256, 8192));
    conv::conv_split_reduce_kernel<<<blocks, 256, 0, stream>>>(p);
    MIXQ_CUDA_CHECK_LAUNCH("conv_split_reduce");
  }
}

const char* conv_igemm_name(IoType x_type) {
  switch (x_type) {
    case IoType::F16: return "sm80_conv_igemm_64x64_f16";
    case IoType::BF16: return "sm80_conv_igemm_64x64_bf16";
    default: return "sm80_conv_igemm_64x64_f32split";
  }
}

}  // namespace mixq::cuda
