// The configurations of the Hopper FP8 block GEMM, each compiled in its own file
// (sm90_fp8_gemm_bn{128,192}.cu): BN-wide tiles, S ring stages, C CTAs per cluster, kSets
// accumulator sets.
#pragma once

#include <cuda_runtime.h>

#include "cuda/launch/sm90_fp8_gemm.hpp"

namespace mixq::cuda {

template <int BN, int S, int C, int kSets>
void launch_fp8(const Sm90Fp8GemmArgs& a, cudaStream_t stream);

}  // namespace mixq::cuda
