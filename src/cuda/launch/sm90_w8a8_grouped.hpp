// Hopper INT8 W8A8 per-block grouped GEMM (mixture-of-experts experts quantized to int8 per block
// of 64 or 128 along K, activations quantized per token per block at the call): for every expert e,
// Y[rows of e] = sum over K blocks of sx*(sw_e*dot) + ox*dw_e (+ sx*Σqx*ow_e with offset weights),
// one launch over the (expert, 128-row token tile) list that the schedule kernel wrote on the
// device (kernels/moe/moe_schedule.cuh): the INT8 block GEMM's grouped form
// (kernels/w8a8/sm90_block_gemm.cuh with Int8BlockPolicy, kernels/w8a8/sm90_w8a8_policy.cuh).
// Activations: the call's rows in the act_quant.hpp layout; weights: each expert's packed codes,
// sw and rank-1 planes (int8_gemm.hpp) through its own descriptors, built at prepare.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/launch/sm90_block_grouped.hpp"

namespace mixq::cuda {

// The token tile of the grouped INT8 GEMM (the schedule kernel's tile_m).
constexpr int kSm90Int8GroupedTileM = 128;
constexpr int kSm90Int8GroupedTileN = 128;  // the N tile (the weight descriptors' box)
// Descriptors per expert: its codes, its sw rows, its rank-1 weight planes (the block GEMM's), then
// its sw, dw and ow rows as the few-token form reads them (boxes of 128 columns x a stage's blocks;
// ow repeats sw for symmetric weights).
constexpr int kSm90Int8ExpertMaps = 6;
constexpr int kSm90Int8SkinnyMetaMap = 3;

// One prepared INT8 block expert (backend/int8_block.cpp) as the kernel reads it.
struct Int8ExpertWeights {
  const int8_t* codes = nullptr;  // [Np][ldb] i8, zero past N / K
  int64_t ldb = 0;                // Kp
  int64_t Np = 0;                 // N rounded up to kInt8PadN
  const float* sw = nullptr;      // [num_kb][Np], int8_meta_col order; dw, ow (offset weights) alike
  const float* dw = nullptr;
  const float* ow = nullptr;
  const float* r1w = nullptr;     // [2 T Np][r1_ld] tf32 hi / lo of dw (, ow)
  int64_t r1_ld = 0;              // int8_rank1_pitch(num_kb)
};

// One expert's descriptors into out[0 .. kSm90Int8ExpertMaps) for K blocks of g (64 or 128),
// offset weights or not.
void make_sm90_int8_expert_maps(const Int8ExpertWeights& w, int64_t N, int64_t K, int g,
                                bool offset, CUtensorMap* out);

struct Sm90Int8GroupedArgs {
  BlockGroupedCall call;        // rows, output, tile list (of kSm90Int8GroupedTileM), descriptors
  const int8_t* a = nullptr;    // [rows][lda] i8 codes of every row of the call
  int64_t lda = 0;
  const float* sx = nullptr;    // sx(m, kb) at sx[kb * ld_meta + m]; ox, sumx alike
  const float* ox = nullptr;
  const int32_t* sumx = nullptr;
  int64_t ld_meta = 0;
  int g = 128;                  // K block: 64 or 128
  bool offset = false;          // offset weights (the sx*Σqx*ow term)
  int64_t Np = 0;               // the experts' padded N (row stride of the rank-1 planes)
};

// The kernel's name ("sm90_i8_grouped_128x128").
const char* sm90_int8_grouped_name();
// Launches on `stream` without synchronising; throws mixq::Error on bad arguments.
void launch_sm90_int8_grouped_gemm(const Sm90Int8GroupedArgs& a, cudaStream_t stream);

// The few-token kernel's grouped form (decode shares; a.call's tile list of w.mt rows), the same
// expert descriptors: "sm90_i8_grouped_skinny_mt16" etc.
const char* sm90_int8_grouped_skinny_name(int mt);
void launch_sm90_int8_grouped_skinny(const Sm90Int8GroupedArgs& a, const SkinnyGroupedWork& w,
                                     cudaStream_t stream);

}  // namespace mixq::cuda
