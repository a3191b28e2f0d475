// The launch of one configuration of the Hopper INT8 W8A8 block GEMM (tile shape, CTA pair, K
// block, offset weights): tensor maps over the quantized activations, the packed weight and both
// metas, then the persistent block-GEMM kernel. Included by the per-configuration files
// (sm90_w8a8_gemm_*.cu), so the configurations compile in parallel.
#pragma once

#include <algorithm>

#include "cuda/kernels/w8a8/sm90_w8a8_policy.cuh"
#include "cuda/launch/sm90_block_gemm_launch.cuh"
#include "cuda/launch/sm90_w8a8_gemm_configs.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/tensor_map.hpp"

namespace mixq::cuda {

// kSub = 1: 128 x 128 tiles, 6 stages of (16 + 16 + 1) KiB (g = 64: + 1 KiB of meta). kSub = 2:
// 256 x 64 tiles (two m64 sub-tiles per consumer warpgroup: half the per-column promotion work),
// 5 stages of (32 + 8 + 1.25) KiB, g = 128 only (a g = 64 stage would not fit 5 times).
template <int kSub, int G = 128>
struct W8a8Tile {
  static_assert(G == 128 || kSub == 1, "K block 64: 128 x 128 tiles only");
  static constexpr int kBN = 128 / kSub, kStages = kSub == 1 ? 6 : 5;
  template <bool kOffset>
  using Policy = sm90::Int8BlockPolicy<kBN, kOffset, 128 * kSub, G>;
};

template <bool kOffset, int C, int kSub, int G>
void launch_w8a8(const Int8GemmParams& a, cudaStream_t stream, const char* name) {
  using Tile = W8a8Tile<kSub, G>;
  constexpr int kBN = Tile::kBN, kStages = Tile::kStages;
  using Policy = typename Tile::template Policy<kOffset>;
  constexpr uint32_t kBlocks = uint32_t(Policy::kBlocks);
  using Shape = sm90::BlockGemmShape<kBN, kStages, Policy, C, kSub>;
  const uint64_t M = uint64_t(a.M), N = uint64_t(a.N), K = uint64_t(a.K);
  const uint64_t nkb = uint64_t(a.n_kblocks), Np = uint64_t(a.Np);
  // Codes: columns past K read as zeros (TMA fill), so neither operand needs its K padding.
  const CUtensorMap tm_a = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.a, K, M,
                                              uint64_t(a.lda), 128, Shape::kBM,
                                              CU_TENSOR_MAP_SWIZZLE_128B);
  // Each CTA of a pair loads (and multicasts) its share of B's rows.
  const CUtensorMap tm_b = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.b, K, N,
                                              uint64_t(a.ldb), 128, Shape::kBRowsPerCta,
                                              CU_TENSOR_MAP_SWIZZLE_128B);
  typename Policy::Params pp;
  const uint64_t row_pitch = uint64_t(a.ld_meta) * 4, col_pitch = Np * 4;
  const uint32_t bm = Shape::kBM, r1 = uint32_t(kInt8Rank1Blocks);
  const auto row_map = [&](const void* base, CUtensorMapDataType type, uint32_t kbs) {
    return make_tensor_map_2d(type, base, M, nkb, row_pitch, bm, kbs, CU_TENSOR_MAP_SWIZZLE_NONE);
  };
  // A stage's K blocks: [kBlocks][BM] and [kBlocks][BN] boxes (blocks past the last read zeros).
  pp.sx = row_map(a.sx, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, kBlocks);
  pp.sw = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sw, Np, nkb, col_pitch, kBN,
                             kBlocks, CU_TENSOR_MAP_SWIZZLE_NONE);
  pp.ox8 = row_map(a.ox, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, r1);
  pp.sx8 = kOffset ? row_map(a.sx, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, r1) : pp.ox8;
  pp.sumx8 = kOffset ? row_map(a.sumx, CU_TENSOR_MAP_DATA_TYPE_INT32, r1) : pp.ox8;
  // The rank-1 weight planes: 8 K blocks (32 bytes) x BN rows per box, the 32-byte swizzle the
  // tf32 MMA's B descriptor names.
  pp.r1w = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.r1w, uint64_t(a.r1_ld),
                              (kOffset ? 4 : 2) * Np, uint64_t(a.r1_ld) * 4, r1, kBN,
                              CU_TENSOR_MAP_SWIZZLE_32B);
  pp.r1_np = int(Np);
  sm90::BlockGemmParams p;
  p.set_tiles(a.M, a.N, (a.K + 127) / 128, Shape::kBM, kBN, C);  // 128-K stages
  p.group_n = a.group_n > 0 ? a.group_n : 8 * kSub;  // the same N extent per raster group
  p.set_output(a.y, a.ldy, a.y_type, a.bias, a.bias_type, a.clamp_lo, a.clamp_hi);
  sm90::check_quant_out(a.quant, a.M, a.N, name);
  MIXQ_CHECK_ARG(a.quant.kind == 0 || kBN == 128, name, ": quantized outputs need 128-wide tiles");
  int sms = a.num_sms;
  if (sms <= 0) {
    int dev = 0;
    MIXQ_CUDA_CHECK(cudaGetDevice(&dev));
    MIXQ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  }
  if constexpr (kBN == 128) {
    if (a.quant.kind != 0) {
      p.quant = a.quant;
      launch_block_gemm<kBN, kStages, Policy, C, kSub, 2, false, true>(tm_a, tm_b, pp, p, sms, 0,
                                                                       stream, name);
      return;
    }
  }
  launch_block_gemm<kBN, kStages, Policy, C, kSub>(tm_a, tm_b, pp, p, sms, a.y_tma, stream, name);
}

}  // namespace mixq::cuda
