// Parameters of the Hopper block-scaled 8-bit GEMM (sm90_block_gemm.cuh): the plain and grouped
// (mixture-of-experts) problem, the tile raster and the epilogue's fields, filled on the host by
// the launcher (launch/sm90_block_gemm_launch.cuh) and passed as a kernel parameter.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/kernels/common/epilogue_quant.cuh"
#include "cuda/kernels/common/im2col_conv.hpp"
#include "cuda/kernels/moe/moe_params.hpp"

namespace mixq::cuda::sm90 {

// The grouped (mixture-of-experts) form, kGrouped: the units are the (expert, token tile) list
// that the schedule kernel wrote on the device (kernels/moe/moe_schedule.cuh, tiles of kBM rows)
// times the N tiles, N innermost; each expert's B codes and B metadata through its own
// descriptors in device memory (maps[expert * maps_per_expert + b_map / meta_map / r1_map]); A,
// its metadata and Y are the call's [rows] matrices, a unit's stores clipped to its expert's rows.
struct BlockGemmGroup {
  const int* n_tiles = nullptr;
  const MoeTile* tiles = nullptr;
  const CUtensorMap* maps = nullptr;
  int maps_per_expert = 0, b_map = 0, meta_map = 0;
  int r1_map = 0;           // policies with rank-1 stages: the expert's rank-1 weight planes
  int expert_major = 0;     // moe_unit_of_item's order: an expert's token tiles innermost
  int64_t bias_stride = 0;  // elements between experts' bias rows (0: one shared bias)
};

struct BlockGemmParams {
  // conv_on: A is an implicit-GEMM convolution's im2col matrix (tm_a an im2col map over the NHWC
  // image, runtime/tensor_map.hpp), K in the KhKwCi order with Ci a multiple of 128, so that a
  // 128-K stage is one tap's 128 channels: rows m = (image, ho, wo), the stage's tap and channel
  // from its K offset.
  Im2colConv conv{};
  int conv_on = 0;
  int M = 0, N = 0, num_kb = 0;
  int num_m = 0, num_n = 0, group_n = 8;
  int num_mu = 0;     // M units of kCluster tiles (a cluster's work unit is one (M unit, N tile))
  int num_tiles = 0;  // num_mu * num_n units
  // K split over a cluster (policies with kSplitK, single CTAs): clusters of k_split CTAs along x,
  // one unit each (the grid is num_tiles * k_split); CTA r of a cluster runs K blocks
  // [r num_kb / k_split, (r + 1) num_kb / k_split) and the policy's store_split() sums the
  // cluster's partial tiles through distributed shared memory. 1: off.
  int k_split = 1;
  // Tile counts of an M x N output in kBM x bn tiles, units of `cluster` M tiles.
  void set_tiles(int M_, int N_, int kb, int bm, int bn, int cluster) {
    M = M_;
    N = N_;
    num_kb = kb;
    num_m = (M + bm - 1) / bm;
    num_n = (N + bn - 1) / bn;
    num_mu = (num_m + cluster - 1) / cluster;
    num_tiles = num_mu * num_n;
  }
  // epilogue: y = clamp(acc + bias[n], lo, hi) in y_type (0 f16, 1 bf16, 2 f32)
  void* y = nullptr;
  int64_t ldy = 0;
  int y_type = 2;
  int y_pairs = 0;  // 1: two adjacent outputs can be written as one aligned vector
  int y_tma = 0;    // 1: the TMA-store epilogue (16-bit y; the kernel's tm_y map is valid)
  const void* bias = nullptr;
  int bias_type = 2;
  float clamp_lo = 0.f, clamp_hi = 0.f;
  // The kQuantOut instances: the outputs leave quantized for the next layer (store_tile_quantized,
  // kernels/common/epilogue_quant.cuh) and y is not written; 128-wide plain tiles only.
  QuantOut quant;
  BlockGemmGroup group;  // kGrouped only

  // The epilogue fields (host side), y_pairs from y's alignment and leading dimension.
  void set_output(void* y_, int64_t ldy_, int y_type_, const void* bias_, int bias_type_, float lo,
                  float hi) {
    y = y_;
    ldy = ldy_;
    y_type = y_type_;
    const int yb = y_type == 2 ? 4 : 2;
    y_pairs = (ldy % 2 == 0 && reinterpret_cast<uintptr_t>(y) % (2 * yb) == 0) ? 1 : 0;
    bias = bias_;
    bias_type = bias_type_;
    clamp_lo = lo;
    clamp_hi = hi;
  }
};

// The TMA-store epilogue's staging (store_tile_tma): one box of 64 rows x 64 16-bit columns per
// consumer warpgroup. Its named barriers: kYBarrier0 + consumer warpgroup (0 is __syncthreads; the
// skeleton and its policies use no other).
constexpr int kYBox = 64;
constexpr int kYBoxBytes = kYBox * kYBox * 2;  // 8 KB, a 1024-byte multiple (swizzle atom)
constexpr int kYBarrier0 = 1;

}  // namespace mixq::cuda::sm90
