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
// accumulator set, 5 stages). They give fewer, larger work units, so the pick compares the
// waves each tile needs, the 192-wide one credited with kWideSpeedup per column.
Sm90Fp8Tile sm90_fp8_gemm_pick(int64_t M, int64_t N, int sms) {
  constexpr double kWideSpeedup = 1.07;
  const int64_t m_tiles = (M + 127) / 128, slots = std::max(1, sms);
  auto waves = [&](int64_t bn) { return (m_tiles * ((N + bn - 1) / bn) + slots - 1) / slots; };
  const double narrow = double(waves(128)) * 128, wide = double(waves(192)) * 192 / kWideSpeedup;
  return {wide < narrow ? 192 : 128, 1};
}

Sm90Fp8Tile sm90_fp8_gemm_tile(int64_t M, int64_t N, int sms, Sm90Fp8Tile requested) {
  MIXQ_CHECK_ARG(requested.block_n == 0 || requested.block_n == 128 || requested.block_n == 192,
                 "sm90 fp8 gemm: block_n must be 0 (picked), 128 or 192, got ", requested.block_n);
  return {requested.block_n ? requested.block_n : sm90_fp8_gemm_pick(M, N, sms).block_n,
          sm90_fp8_gemm_cluster(requested.cluster)};
}

const char* sm90_fp8_gemm_name(Sm90Fp8Tile t) {
  if (t.block_n == 192)
    return t.cluster == 2 ? "sm90_fp8_block_gemm_bm128_bn192_s5_c2"
                          : "sm90_fp8_block_gemm_bm128_bn192_s5";
  return t.cluster == 2 ? "sm90_fp8_block_gemm_bm128_bn128_s6_c2"
                        : "sm90_fp8_block_gemm_bm128_bn128_s6";
}

namespace {
constexpr Sm90Fp8Tile kTiles[] = {{128, 1}, {128, 2}, {192, 1}, {192, 2}};
}  // namespace

Sm90Fp8Tile sm90_fp8_gemm_tile_by_name(const std::string& name) {
  for (const Sm90Fp8Tile& t : kTiles)
    if (name == sm90_fp8_gemm_name(t)) return t;
  return {};
}

std::string sm90_fp8_gemm_names() {
  std::string s;
  for (const Sm90Fp8Tile& t : kTiles)
    s += (s.empty() ? "" : ", ") + std::string(sm90_fp8_gemm_name(t));
  return s;
}

}  // namespace mixq::cuda
