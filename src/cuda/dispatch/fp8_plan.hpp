// The FP8 block GEMM's tile choice (docs/decisions/fp8-block-gemm.md): pure host functions of
// (M, N, SM count), and the tiles' kernel names.
#pragma once

#include <cstdint>
#include <string>

namespace mixq::cuda {

constexpr int kSm90Fp8DefaultGroupN = 2;

// A tile configuration: 128 x block_n outputs per CTA (128: two accumulator sets, 6-stage ring;
// 192: one set, 5 stages), single CTAs (cluster 1) or CTA pairs multicasting B (cluster 2).
// 256 x 128 (block_m 256): two sub-tiles per consumer warpgroup, single CTAs, 4 stages.
struct Sm90Fp8Tile {
  int block_n = 0;
  int cluster = 0;
  int block_m = 0;  // 128 or 256 rows; 0 in a request: picked (with block_n and cluster 0)
};
// The tile the plan picks for an M x N output on `sms` SMs (single CTAs): 128 x 128, 128 x 192,
// or (rows_256) 256 x 128.
// wide_192 false: 128-wide tiles only (an epilogue that quantizes whole 128-column blocks).
Sm90Fp8Tile sm90_fp8_gemm_pick(int64_t M, int64_t N, int sms, bool rows_256 = true,
                               bool wide_192 = true);
// The tile a launch runs: `requested` all zero: the pick; else block_m 256 (block_n 128, single
// CTAs), or 128 rows with block_n 0 replaced by the 128-row pick's and cluster 0 by 1. Throws on
// a block_n other than 0, 128, 192, a cluster other than 0, 1, 2, or a block_m other than 0, 128,
// 256.
// narrow: the pick among 128-wide tiles (quantized outputs).
Sm90Fp8Tile sm90_fp8_gemm_tile(int64_t M, int64_t N, int sms, Sm90Fp8Tile requested,
                               bool narrow = false);
// sm90_fp8_gemm_cluster resolves 0 to the default and throws on other values.
int sm90_fp8_gemm_cluster(int cluster);

// Kernel name of a resolved tile (block_n 128 or 192, cluster 1 or 2, block_m 128 or 256).
const char* sm90_fp8_gemm_name(Sm90Fp8Tile tile);
// Kernel name (force_kernel / MIXQ_FORCE_KERNEL) -> its tile; {0, 0} for other names.
Sm90Fp8Tile sm90_fp8_gemm_tile_by_name(const std::string& name);
std::string sm90_fp8_gemm_names();

}  // namespace mixq::cuda
