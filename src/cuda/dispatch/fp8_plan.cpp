#include "cuda/dispatch/fp8_plan.hpp"

#include <algorithm>

#include "mixq/error.hpp"

namespace mixq::cuda {

// Single CTAs by default (H100, docs/decisions/fp8-block-gemm.md): CTA pairs multicasting B
// were 1-14% slower on 7 of the 8 target shapes (3% faster on the eighth); with 192-wide tiles
// pairs measured 1% faster to 11% slower (same record).
int sm90_fp8_gemm_cluster(int cluster) {
  MIXQ_CHECK_ARG(cluster >= 0 && cluster <= 2,
                 "sm90 fp8 gemm: cluster must be 0 (default), 1 or 2, got ", cluster);
  return cluster ? cluster : 1;
}

// 128 x 192 tiles take 1/6 fewer bytes per FLOP from L2 than 128 x 128 (40 KB per 128 x 192 x 128
// block against 32 KB per 128 x 128 x 128), which under the H100's 700 W cap shows as a higher
// clock: measured 3-17% faster on the six #5 shapes where it is picked (docs/decisions/fp8-block-gemm.md; one
// accumulator set, 5 stages). 256 x 128 tiles take 8% fewer again (48 KB per 256 x 128 x 128):
// 2-6% faster than the 128-row pick at M = 2048 / 4096 on the four #40 shapes of the H200
// (docs/decisions/fp8-block-gemm.md). Larger tiles give fewer, larger work units, so the
// pick compares the waves each tile needs, times the tile's area, each credited with its speedup
// over 128 x 128 (1.07 for 192 wide, 1.10 for 256 rows).
Sm90Fp8Tile sm90_fp8_gemm_pick(int64_t M, int64_t N, int sms, bool rows_256, bool wide_192) {
  constexpr double kWideSpeedup = 1.07, kTallSpeedup = 1.10;
  const int64_t slots = std::max(1, sms);
  auto waves = [&](int64_t bm, int64_t bn) {
    return ((M + bm - 1) / bm * ((N + bn - 1) / bn) + slots - 1) / slots;
  };
  const double narrow = double(waves(128, 128)) * 128;
  const double wide = wide_192 ? double(waves(128, 192)) * 192 / kWideSpeedup : 1e300;
  const double tall = double(waves(256, 128)) * 256 / kTallSpeedup;
  if (rows_256 && tall < narrow && tall < wide) return {128, 1, 256};
  return {wide < narrow ? 192 : 128, 1, 128};
}

// A requested block_n or cluster keeps 128 rows (0: picked); block_m 256 runs 128 wide, single
// CTAs or pairs.
Sm90Fp8Tile sm90_fp8_gemm_tile(int64_t M, int64_t N, int sms, Sm90Fp8Tile requested,
                               bool narrow) {
  MIXQ_CHECK_ARG(requested.block_n == 0 || requested.block_n == 128 || requested.block_n == 192,
                 "sm90 fp8 gemm: block_n must be 0 (picked), 128 or 192, got ", requested.block_n);
  MIXQ_CHECK_ARG(requested.block_m == 0 || requested.block_m == 128 || requested.block_m == 256,
                 "sm90 fp8 gemm: block_m must be 0 (picked), 128 or 256, got ", requested.block_m);
  if (requested.block_m == 256) {
    MIXQ_CHECK_ARG(requested.block_n == 0 || requested.block_n == 128,
                   "sm90 fp8 gemm: block_m 256 runs block_n 128, got block_n ", requested.block_n);
    return {128, sm90_fp8_gemm_cluster(requested.cluster), 256};
  }
  if (requested.block_m == 0 && requested.block_n == 0 && requested.cluster == 0)
    return sm90_fp8_gemm_pick(M, N, sms, true, !narrow);
  // 128 rows: the requested width, or the 128-row pick's
  return {requested.block_n ? requested.block_n
                            : sm90_fp8_gemm_pick(M, N, sms, false, !narrow).block_n,
          sm90_fp8_gemm_cluster(requested.cluster), 128};
}

namespace {
// Every compiled configuration and its kernel name (one row per sm90_fp8_gemm_*.cu instance).
struct NamedTile {
  Sm90Fp8Tile tile;
  const char* name;
};
constexpr NamedTile kTiles[] = {
    {{128, 1, 128}, "sm90_fp8_block_gemm_bm128_bn128_s6"},
    {{128, 2, 128}, "sm90_fp8_block_gemm_bm128_bn128_s6_c2"},
    {{192, 1, 128}, "sm90_fp8_block_gemm_bm128_bn192_s5"},
    {{192, 2, 128}, "sm90_fp8_block_gemm_bm128_bn192_s5_c2"},
    {{128, 1, 256}, "sm90_fp8_block_gemm_bm256_bn128_s4"},
    {{128, 2, 256}, "sm90_fp8_block_gemm_bm256_bn128_s4_c2"},
};
}  // namespace

// The configuration the launcher runs for t: 256 rows are 128 wide; otherwise 192 wide or 128.
const char* sm90_fp8_gemm_name(Sm90Fp8Tile t) {
  const int m = t.block_m == 256 ? 256 : 128;
  const int n = m == 128 && t.block_n == 192 ? 192 : 128;
  const int c = t.cluster == 2 ? 2 : 1;
  for (const NamedTile& e : kTiles)
    if (e.tile.block_m == m && e.tile.block_n == n && e.tile.cluster == c) return e.name;
  return kTiles[0].name;  // (every normalized tile is in the table)
}

Sm90Fp8Tile sm90_fp8_gemm_tile_by_name(const std::string& name) {
  for (const NamedTile& e : kTiles)
    if (name == e.name) return e.tile;
  return {};
}

std::string sm90_fp8_gemm_names() {
  std::string s;
  for (const NamedTile& e : kTiles) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

}  // namespace mixq::cuda
