// The Hopper INT8 per-tensor conv's tile (sm90_block_gemm with Int8TensorPolicy and an im2col
// map): a host function of the GEMM's shape and the SM count, tested without a GPU
// (tests/unit/test_cuda_conv_plan.cpp).
#pragma once

#include <cstdint>

namespace mixq::cuda {

struct ConvInt8HopperTile {
  int tile_n = 128;  // 128 x 128 or 128 x 64 output tiles
  int k_split = 1;   // CTAs of a cluster sharing each tile's K blocks: 1, 2, 4 or 8
};

// M output pixels, N output channels, kblocks 128-deep K blocks, on `sms` SMs.
// - 128 x 64 tiles where they finish in fewer rounds of the SMs, a round of half-width tiles
//   counted as 0.6 of a 128 x 128 round (the A tile is the same, the MMAs half: 3x3 512->512 @7
//   at batch 32 has 52 tiles of 128 x 128 for 132 SMs, 104 of 128 x 64).
// - Calls whose 128 x 64 tiles leave at least half of the SMs idle split each tile's K blocks
//   over a cluster of up to 8 CTAs: as many as fit in 7/8 of the SMs (a cluster needs its CTAs'
//   SMs in one GPC, so the last few SMs do not take a whole cluster) with at least one K block a
//   CTA. A CTA streams its operands at ~40 bytes a cycle, so a few CTAs walking all of K are
//   bound by their own loads. Every split forced on the H100 (bench/results/cuda_conv.md, "K
//   split over a cluster"; docs/decisions/conv-int8-split-k.md): 3x3 256->256 @14 batch 1 17.0 us
//   unsplit, 15.0 / 11.0 / 10.0 split 2 / 4 / 8; 3x3 512->512 @7 batch 8 25.4 unsplit, 19.6 split
//   2 (64 CTAs), 20.6 split 4 (128 CTAs).
inline ConvInt8HopperTile conv_int8_hopper_tile(int64_t M, int64_t N, int64_t kblocks, int sms) {
  constexpr double kHalfTileRound = 0.6;
  const int64_t s = sms > 0 ? sms : 1;
  const int64_t m_tiles = (M + 127) / 128;
  const int64_t rounds128 = (m_tiles * ((N + 127) / 128) + s - 1) / s;
  const int64_t tiles64 = m_tiles * ((N + 63) / 64);
  const int64_t rounds64 = (tiles64 + s - 1) / s;
  int split = 1;
  while (split < 8 && 2 * split * tiles64 * 8 <= 7 * s && 2 * split <= kblocks) split *= 2;
  if (split > 1) return {64, split};
  return {kHalfTileRound * double(rounds64) < double(rounds128) ? 64 : 128, 1};
}

}  // namespace mixq::cuda
