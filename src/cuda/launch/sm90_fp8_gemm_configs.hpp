// The configurations of the Hopper FP8 block GEMM, each compiled in its own file
// (sm90_fp8_gemm_bn{128,192}.cu, sm90_fp8_gemm_bm256{,_c2}.cu): BN-wide tiles, S ring stages,
// C CTAs per cluster, kSets accumulator sets (0: one sub-tile's set reused, sm90_block_gemm.cuh),
// kSub m64 sub-tiles per consumer warpgroup (tiles of 128 kSub rows).
#pragma once

#include <cuda_runtime.h>

#include "cuda/launch/sm90_fp8_gemm.hpp"

namespace mixq::cuda {

template <int BN, int S, int C, int kSets, int kSub = 1>
void launch_fp8(const Sm90Fp8GemmArgs& a, cudaStream_t stream);

}  // namespace mixq::cuda
