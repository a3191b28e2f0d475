// Hopper (sm_90a) INT8 W8A8 per-block GEMM: the wgmma s8 kernel of the block skeleton
// (kernels/sm90_block_gemm.cuh) with the four-term promotion of kernels/sm90_w8a8_policy.cuh.
// Runs the Int8GemmParams of the block mode with K block 128 (int8_gemm.hpp); 128 x 128 tiles.
#pragma once

#include <cuda_runtime.h>

#include "cuda/launch/int8_gemm.hpp"

namespace mixq::cuda {

constexpr const char* kSm90Int8BlockName = "sm90_i8_128x128";
// The same tiles run by CTA pairs (a cluster along M) that multicast the shared weight tile.
constexpr const char* kSm90Int8PairName = "sm90_i8_128x128_c2";
// 256 x 64 tiles: two m64 sub-tiles per consumer warpgroup (half the per-column promotion work)
constexpr const char* kSm90Int8TallName = "sm90_i8_256x64";

// Block mode (kb 64 or 128; the pair and 256 x 64 kernels 128 only) and, for the 128 x 128
// kernel, the per-tensor mode (integer totals, the exact requantizing epilogue:
// kernels/w8a8/sm90_i8_tensor_policy.cuh); stream-ordered, no synchronisation, graph-capturable.
// Throws mixq::Error on parameters the kernel cannot run (wrong mode / K block, misaligned pitches).
void launch_sm90_int8_block(const Int8GemmParams& p, cudaStream_t stream);
void launch_sm90_int8_pair(const Int8GemmParams& p, cudaStream_t stream);
void launch_sm90_int8_tall(const Int8GemmParams& p, cudaStream_t stream);

// Few tokens (M <= mt, mt = 16, 32, 64 or 128; sm90_i8_skinny.cu): the weights as the wide MMA
// operand, stream-K over every SM, K block 64 or 128 (128 only at mt = 128). p.partial / p.tickets as sm90_skinny_plan(p.M, p.N,
// p.K, p.num_sms, mt) sizes them, tickets zero. Programmatic dependent launch where
// p.pdl. Names "sm90_i8_skinny_mt16" etc.
const char* sm90_int8_skinny_name(int mt);
void launch_sm90_int8_skinny(const Int8GemmParams& p, int mt, cudaStream_t stream);

}  // namespace mixq::cuda
