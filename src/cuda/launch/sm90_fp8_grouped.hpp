// Hopper FP8 block-scaled grouped GEMM (mixture-of-experts, DeepSeek-V3's FP8 experts): for every
// expert e, Y[rows of e] = sum_kb (XQ_kb . WQ_e,kb^T) * sa[m][kb] * sb_e[n / 128][kb], one launch
// over the (expert, 128-row token tile) list that the schedule kernel wrote on the device
// (kernels/moe/moe_schedule.cuh), the block GEMM's grouped form (kernels/w8a8/sm90_block_gemm.cuh).
// Activations: the call's rows quantized per 128 along K (act_quant.hpp layout); weights: each
// expert's codes and block scales through its own descriptors, built at prepare.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/launch/sm90_block_grouped.hpp"

namespace mixq::cuda {

// The token tile of the grouped FP8 GEMM (the schedule kernel's tile_m).
constexpr int kSm90Fp8GroupedTileM = 128;
// Descriptors per expert: its codes [N][ldb] (boxes of 128 K x the N tile) and its block scales.
constexpr int kSm90Fp8ExpertMaps = 2;

// One expert's descriptors into out[0 .. kSm90Fp8ExpertMaps): codes [N][ldb] e4m3 (ldb % 16 == 0,
// zero codes past K), sb(nb, kb) at sb[nb * ld_sb + kb] (ld_sb % 4 == 0).
void make_sm90_fp8_expert_maps(const uint8_t* codes, int64_t ldb, const float* sb, int64_t ld_sb,
                               int64_t N, int64_t K, CUtensorMap* out);

struct Sm90Fp8GroupedArgs {
  BlockGroupedCall call;       // rows, output, tile list (of kSm90Fp8GroupedTileM), descriptors
  const uint8_t* a = nullptr;  // [rows][lda] e4m3 codes of every row of the call
  int64_t lda = 0;
  const float* sa = nullptr;   // sa(m, kb) at sa[kb * ld_sa + m]
  int64_t ld_sa = 0;
};

// The kernel's name ("sm90_fp8_block_grouped_bm128_bn128_s6").
const char* sm90_fp8_grouped_name();
// Launches on `stream` without synchronising; throws mixq::Error on bad arguments.
void launch_sm90_fp8_grouped_gemm(const Sm90Fp8GroupedArgs& a, cudaStream_t stream);

// The few-token kernel's grouped form (decode shares; a.call's tile list of w.mt rows), the same
// expert descriptors: "sm90_fp8_block_grouped_skinny_mt16" etc.
const char* sm90_fp8_grouped_skinny_name(int mt);
void launch_sm90_fp8_grouped_skinny(const Sm90Fp8GroupedArgs& a, const SkinnyGroupedWork& w,
                                    cudaStream_t stream);

}  // namespace mixq::cuda
