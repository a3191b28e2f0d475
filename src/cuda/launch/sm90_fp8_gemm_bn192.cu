// The Hopper FP8 block GEMM with 128 x 192 tiles: single CTAs and CTA pairs.
#include "cuda/launch/sm90_fp8_gemm_launch.cuh"

namespace mixq::cuda {
template void launch_fp8<192, 5, 1, 1, 1>(const Sm90Fp8GemmArgs&, cudaStream_t);
template void launch_fp8<192, 5, 2, 1, 1>(const Sm90Fp8GemmArgs&, cudaStream_t);
}  // namespace mixq::cuda
