// The Hopper FP8 block GEMM's tile pick and kernel names are host functions: tested without a GPU.
#if defined(MIXQ_WITH_CUDA)
#include <gtest/gtest.h>

#include <string>

#include "cuda/dispatch/fp8_plan.hpp"
#include "mixq/error.hpp"

using namespace mixq::cuda;

// Quantized outputs (linear(..., yq)) take 128-wide tiles: whole 128-column blocks a tile. The
// 192-wide pick gives way to 128 x 128 or 256 x 128 by the same waves rule; requests keep theirs.
TEST(CudaFp8Tiles, QuantizedOutputsTake128WideTiles) {
  for (int64_t M : {int64_t(65), int64_t(300), int64_t(2048), int64_t(4096)})
    for (int64_t N : {int64_t(200), int64_t(7168), int64_t(21504), int64_t(24576), int64_t(57344)}) {
      const Sm90Fp8Tile t = sm90_fp8_gemm_tile(M, N, 132, {}, true);
      EXPECT_EQ(t.block_n, 128) << M << " x " << N;
      EXPECT_EQ(t.cluster, 1) << M << " x " << N;
    }
  // 14336 x 21504 at M = 2048: the 16-bit pick is 128 x 192, the narrow one 256 x 128 (11 waves
  // of 256 x 128 credited 1.10 against 21 of 128 x 128)
  EXPECT_EQ(sm90_fp8_gemm_tile(2048, 21504, 132, {}).block_n, 192);
  EXPECT_EQ(sm90_fp8_gemm_tile(2048, 21504, 132, {}, true).block_m, 256);
  EXPECT_EQ(sm90_fp8_gemm_tile(2048, 21504, 132, {128, 2, 0}, true).cluster, 2);
}

TEST(CudaFp8Tiles, LargerTilesWhereTheirWavesAreFull) {
  // 21504 = 112 x 192 = 168 x 128: every tile fills its waves; 256 x 128 moves the fewest bytes
  // per FLOP (21 waves of 256 x 128 against 28 of 128 x 192 and 41 of 128 x 128).
  for (int64_t N : {int64_t(21504), int64_t(24576), int64_t(57344)}) {
    const Sm90Fp8Tile t = sm90_fp8_gemm_pick(4096, N, 132);
    EXPECT_EQ(t.block_m, 256) << N;
    EXPECT_EQ(t.block_n, 128) << N;
    // without 256-row tiles: the 192-wide one
    EXPECT_EQ(sm90_fp8_gemm_pick(4096, N, 132, false).block_n, 192) << N;
    EXPECT_EQ(sm90_fp8_gemm_pick(4096, N, 132, false).block_m, 128) << N;
  }
  EXPECT_EQ(sm90_fp8_gemm_pick(2048, 24576, 132).block_m, 256);
  // 7168: 38 tiles of 192 (the last a third full) take 10 waves at M = 4096 against 14 of
  // 128 x 128 and 7 of 256 x 128 (896 tiles).
  EXPECT_EQ(sm90_fp8_gemm_pick(4096, 7168, 132).block_m, 256);
  EXPECT_EQ(sm90_fp8_gemm_pick(4096, 7168, 132, false).block_n, 128);
  // At M = 2048, 256 x 128 takes 4 waves (448 tiles: 3.4 waves' work) against 7 of 128 x 128.
  EXPECT_EQ(sm90_fp8_gemm_pick(2048, 7168, 132).block_m, 128);
  EXPECT_EQ(sm90_fp8_gemm_pick(2048, 7168, 132).block_n, 128);
  // Few tiles: the smallest one spreads over more SMs.
  for (int64_t M : {int64_t(1), int64_t(128), int64_t(256)}) {
    EXPECT_EQ(sm90_fp8_gemm_pick(M, 7168, 132).block_m, 128) << M;
    EXPECT_EQ(sm90_fp8_gemm_pick(M, 7168, 132).block_n, 128) << M;
  }
  EXPECT_EQ(sm90_fp8_gemm_pick(1, 1000, 132).block_n, 128);
  // The pick is single CTAs; it never throws on degenerate SM counts.
  EXPECT_EQ(sm90_fp8_gemm_pick(4096, 21504, 132).cluster, 1);
  EXPECT_EQ(sm90_fp8_gemm_pick(4096, 21504, 0).block_m, 256);
  EXPECT_EQ(sm90_fp8_gemm_pick(4096, 21504, -5).cluster, 1);
}

TEST(CudaFp8Tiles, RequestedTileResolves) {
  const Sm90Fp8Tile picked = sm90_fp8_gemm_tile(4096, 21504, 132, {});
  EXPECT_EQ(picked.block_m, 256);
  EXPECT_EQ(picked.block_n, 128);
  EXPECT_EQ(picked.cluster, 1);
  // a requested width or cluster keeps 128 rows; block_n 0 there is the 128-row pick's
  const Sm90Fp8Tile forced = sm90_fp8_gemm_tile(4096, 21504, 132, {128, 2});
  EXPECT_EQ(forced.block_n, 128);
  EXPECT_EQ(forced.cluster, 2);
  EXPECT_EQ(forced.block_m, 128);
  const Sm90Fp8Tile pair = sm90_fp8_gemm_tile(4096, 21504, 132, {0, 2});
  EXPECT_EQ(pair.block_n, 192);
  EXPECT_EQ(pair.block_m, 128);
  const Sm90Fp8Tile rows128 = sm90_fp8_gemm_tile(4096, 21504, 132, {0, 0, 128});
  EXPECT_EQ(rows128.block_n, 192);
  EXPECT_EQ(rows128.block_m, 128);
  EXPECT_EQ(rows128.cluster, 1);
  EXPECT_THROW(sm90_fp8_gemm_tile(64, 64, 132, {160, 1}), mixq::Error);
  EXPECT_THROW(sm90_fp8_gemm_tile(64, 64, 132, {128, 3}), mixq::Error);
  // 256-row tiles: 128 wide, single CTAs or pairs
  const Sm90Fp8Tile tall = sm90_fp8_gemm_tile(64, 7168, 132, {128, 1, 256});
  EXPECT_EQ(tall.block_m, 256);
  EXPECT_EQ(tall.block_n, 128);
  EXPECT_EQ(tall.cluster, 1);
  const Sm90Fp8Tile tall_pair = sm90_fp8_gemm_tile(64, 7168, 132, {0, 2, 256});
  EXPECT_EQ(tall_pair.block_m, 256);
  EXPECT_EQ(tall_pair.block_n, 128);
  EXPECT_EQ(tall_pair.cluster, 2);
  EXPECT_EQ(sm90_fp8_gemm_tile(64, 7168, 132, {}).block_m, 128);
  EXPECT_THROW(sm90_fp8_gemm_tile(64, 64, 132, {192, 1, 256}), mixq::Error);
  EXPECT_THROW(sm90_fp8_gemm_tile(64, 64, 132, {128, 3, 256}), mixq::Error);
  EXPECT_THROW(sm90_fp8_gemm_tile(64, 64, 132, {128, 1, 64}), mixq::Error);
}

TEST(CudaFp8Tiles, NamesRoundTrip) {
  for (Sm90Fp8Tile t :
       {Sm90Fp8Tile{128, 1, 128}, Sm90Fp8Tile{128, 2, 128}, Sm90Fp8Tile{192, 1, 128},
        Sm90Fp8Tile{192, 2, 128}, Sm90Fp8Tile{128, 1, 256}, Sm90Fp8Tile{128, 2, 256}}) {
    const std::string name = sm90_fp8_gemm_name(t);
    const Sm90Fp8Tile back = sm90_fp8_gemm_tile_by_name(name);
    EXPECT_EQ(back.block_n, t.block_n) << name;
    EXPECT_EQ(back.cluster, t.cluster) << name;
    EXPECT_EQ(back.block_m, t.block_m) << name;
    EXPECT_NE(sm90_fp8_gemm_names().find(name), std::string::npos) << name;
  }
  EXPECT_EQ(sm90_fp8_gemm_tile_by_name("sm90_fp8_block_gemm_bm128_bn256_s4").block_n, 0);
  EXPECT_EQ(sm90_fp8_gemm_tile_by_name("").block_n, 0);
}
#endif
