// The configurations of the Hopper INT8 W8A8 block GEMM, each compiled in its own file
// (sm90_w8a8_gemm_{g64,g128,pair,tall}.cu): C CTAs per cluster (CTA pairs multicast the weight
// tile), kSub m64 sub-tiles per consumer warpgroup (2: 256 x 64 tiles), K blocks of G.
#pragma once

#include <cuda_runtime.h>

#include "cuda/kernels/common/int8_params.hpp"

namespace mixq::cuda {

template <bool kOffset, int C, int kSub, int G>
void launch_w8a8(const Int8GemmParams& a, cudaStream_t stream, const char* name);
// The per-tensor mode (sm90_w8a8_gemm_tensor.cu): 128 x 128 or 128 x 64 tiles (a.tile_n), integer
// totals.
void launch_w8a8_tensor(const Int8GemmParams& a, cudaStream_t stream, const char* name);

}  // namespace mixq::cuda
