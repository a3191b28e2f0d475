// Kernel parameters of the weight-only streaming kernel (plain C++: shared by host and device).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/common/im2col_conv.hpp"

namespace mixq::cuda {

enum class IoType : int { F16 = 0, BF16 = 1, F32 = 2 };

struct WoStreamParams {
  // activations
  const void* x;
  int64_t ldx;
  IoType x_type;
  // K below counts the repacked weight's columns. A tensor-parallel shard whose split cut its
  // first group sits x_shift columns into its first group there (docs/decisions/
  // tensor-parallel-shards.md): column j reads X[:, j - x_shift], zero for j < x_shift; with a
  // gather, column j reads X[:, k_perm[j]], zero where k_perm[j] < 0 (act-order shards' holes).
  const int32_t* k_perm;  // nullable
  int x_shift;
  int M, N, K;
  int x_rows;             // activation rows staged per block: min(MT, M)
  // weights (wo_layout.hpp)
  const uint4* codes;
  const void* pairs;  // (s, o') per (row, group): float2 or half2
  // the same pairs in the streaming kernel's lane order (wo_layout.hpp: stream_pair_index)
  const void* pairs_stream;
  // the same pairs group-major, [groups][pairs_gm_ld rows] (zero past N; ld a multiple of 128),
  // for the warp-specialized wgmma kernel (one bulk copy per group and 128-row tile); nullable
  const void* pairs_gm;
  int64_t pairs_gm_ld;
  // the same, packed for the bf16 integer-zero path (sm90::PairPath::Bf16Zero): one word per
  // (group, row), bf16 s low and high bf16 128 + zc (int4) or the exact (128 - zc) s (int8, built
  // only where every pair's is exact in bf16: symmetric codes); integer zeros only, nullable
  const void* pairs_gm_bz;
  bool pair_f32;
  bool int_zero;      // o' = -zc s with zc an integer (symmetric / zero-point / e4m3 weights)
  int Kp;
  int group_shift;    // log2 of the group size (30: one group per row)
  int groups;         // groups per row (scale-pair row stride)
  // decomposition
  int chunks_per_split;  // 64-wide K chunks per split
  int chunks_per_stage;  // chunks of X staged in shared memory at a time
  int splits;
  // sm_90: the splits of one output tile run as one thread-block cluster (1, splits, 1) and
  // reduce through distributed shared memory (no partials, fence or ticket in global memory).
  bool cluster;
  // sm_90 image: launched with programmatic dependent launch (kernels/grid_dependency.cuh)
  bool pdl;
  float* partial;        // [splits][M][N] when splits > 1 and !cluster
  unsigned* tickets;     // one per (n block, m block), zero before the launch (!cluster)
  // output
  void* y;
  int64_t ldy;
  IoType y_type;
  const void* bias;  // nullable, [N]
  IoType bias_type;
  float clamp_lo, clamp_hi;
  // The warp-specialized wgmma kernel as an implicit-GEMM convolution (conv_on): X is an NHWC
  // image read through an im2col tensor map (conv: its geometry; conv.Ck columns per tap, a
  // multiple of the 64-wide chunk, so a chunk never straddles two taps). Zero (off) for every
  // other call.
  int conv_on;
  Im2colConv conv;
  // W4A8 (kCodesU4F8 weights): X holds e4m3 codes (ldx bytes a row), these the two f32 block
  // factors (512 s_a, -s_a sum(a)) per (row, 128-wide K block) at [kb][ld_x_factors][2]
  // (launch/act_quant.hpp).
  const float* x_factors;
  int64_t ld_x_factors;
  // W4A8: 1 when every group's zero point is the one the factors were made with (their second
  // factor is then -zc s_a sum(a), launch_quantize_fp8_w4a8's `zero`), so the fold adds it as it is
  // instead of multiplying each row's zc in; 0 otherwise (the factors' zero is 1)
  int a8_zero_in_factors;
};

}  // namespace mixq::cuda
