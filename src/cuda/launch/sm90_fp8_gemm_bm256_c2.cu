// The Hopper FP8 block GEMM with 256 x 128 tiles in CTA pairs: each pair owns 512 x 128 outputs
// and multicasts the shared 128 x 128 weight tile of each K block, half loaded by each CTA, so a
// CTA takes 40 KB from L2 per 256 x 128 x 128 block instead of 48 (sm90_block_gemm.cuh, kCluster).
#include "cuda/launch/sm90_fp8_gemm_launch.cuh"

namespace mixq::cuda {
template void launch_fp8<128, 4, 2, 0, 2>(const Sm90Fp8GemmArgs&, cudaStream_t);
}  // namespace mixq::cuda
