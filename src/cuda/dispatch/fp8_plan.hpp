// The FP8 block GEMM's tile choice (docs/decisions/fp8-block-gemm.md): pure host functions of
// (M, N, SM count), and the tiles' kernel names.
#pragma once

#include <cstdint>
#include <string>

namespace mixq::cuda {

constexpr int kSm90Fp8DefaultGroupN = 2;

// A tile configuration: 128 x block_n outputs per CTA (128: two accumulator sets, 6-stage ring;
// 192: one set, 5 stages), single CTAs (cluster 1) or CTA pairs multicasting B (cluster 2).
struct Sm90Fp8Tile {
  int block_n = 0;
  int cluster = 0;
};
// The tile the plan picks for an M x N output on `sms` SMs (single CTAs).
Sm90Fp8Tile sm90_fp8_gemm_pick(int64_t M, int64_t N, int sms);
// The tile a launch runs: `requested` with block_n 0 replaced by the pick and cluster 0 by 1;
// throws on a block_n other than 0, 128, 192 or a cluster other than 0, 1, 2.
Sm90Fp8Tile sm90_fp8_gemm_tile(int64_t M, int64_t N, int sms, Sm90Fp8Tile requested);
// sm90_fp8_gemm_cluster resolves 0 to the default and throws on other values.
int sm90_fp8_gemm_cluster(int cluster);

// Kernel name of a resolved tile (block_n 128 or 192, cluster 1 or 2).
const char* sm90_fp8_gemm_name(Sm90Fp8Tile tile);
// Kernel name (force_kernel / MIXQ_FORCE_KERNEL) -> its tile; {0, 0} for other names.
Sm90Fp8Tile sm90_fp8_gemm_tile_by_name(const std::string& name);
std::string sm90_fp8_gemm_names();

}  // namespace mixq::cuda
