// Instantiations and launcher of the weight-only implicit-GEMM conv2d (kernels/conv/).
#include <algorithm>
#include <string>
#include <type_traits>

#include "cuda/kernels/conv/sm80_conv_igemm.cuh"
#include "cuda/launch/conv_kernels.hpp"
#include "cuda/runtime/check.hpp"

namespace mixq::cuda {

namespace conv {

// (defined here, not in the header: a non-template kernel in a header shared by several .cu
// files would be defined once per file)
// The K split's second pass: y = clamp(sum_z partial[z] + bias) in the output layout, the splits
// added in order (deterministic). One thread per output element, grid-stride.
__global__ void __launch_bounds__(256) conv_split_reduce_kernel(const ConvIgemmParams p) {
  const int64_t M = int64_t(p.B) * p.Ho * p.Wo;
  const int64_t total = M * p.Co;
  const int64_t hw = int64_t(p.Ho) * p.Wo;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = 0.f;
    for (int z = 0; z < p.splits; ++z) v += p.partial[z * total + i];
    const int64_t m = i / p.Co;
    const int n = int(i % p.Co);
    if (p.bias) v += load_io(p.bias, p.bias_type, n);
    v = fminf(fmaxf(v, p.clamp_lo), p.clamp_hi);
    const int64_t yi = p.nchw ? ((m / hw) * p.Co + n) * hw + m % hw : i;
    store_io(p.y, p.y_type, yi, v);
  }
}

}  // namespace conv

void launch_conv_igemm(const ConvIgemmParams& p, cudaStream_t stream) {
  const int64_t M = int64_t(p.B) * p.Ho * p.Wo;
  const dim3 grid(unsigned((M + kConvBM - 1) / kConvBM), unsigned((p.Co + kConvBN - 1) / kConvBN),
                  unsigned(p.splits));
  auto launch = [&](auto packed) {
    constexpr bool kPacked = decltype(packed)::value;
    switch (p.x_type) {
      case IoType::F16: conv::conv_igemm_kernel<half, false, kPacked><<<grid, kConvThreads, 0, stream>>>(p); break;
      case IoType::BF16:
        conv::conv_igemm_kernel<__nv_bfloat16, false, kPacked><<<grid, kConvThreads, 0, stream>>>(p);
        break;
      default: conv::conv_igemm_kernel<__nv_bfloat16, true, kPacked><<<grid, kConvThreads, 0, stream>>>(p); break;
    }
  };
  if (p.packed) launch(std::true_type{});
  else launch(std::false_type{});
  MIXQ_CUDA_CHECK_LAUNCH("conv_igemm");
  if (p.splits > 1) {
    const int64_t total = M * p.Co;
    const unsigned blocks = unsigned(std::min<int64_t>((total + 255) / 256, 8192));
    conv::conv_split_reduce_kernel<<<blocks, 256, 0, stream>>>(p);
    MIXQ_CUDA_CHECK_LAUNCH("conv_split_reduce");
  }
}

std::string conv_igemm_name(IoType x_type, bool packed) {
  std::string name;
  switch (x_type) {
    case IoType::F16: name = "sm80_conv_igemm_64x64_f16"; break;
    case IoType::BF16: name = "sm80_conv_igemm_64x64_bf16"; break;
    default: name = "sm80_conv_igemm_64x64_f32split"; break;
  }
  return packed ? name + "_packed" : name;
}

}  // namespace mixq::cuda
