// The Hopper FP8 block GEMM's tile pick and kernel names are host functions: tested without a GPU.
#if defined(MIXQ_WITH_CUDA)
#include <gtest/gtest.h>

#include <string>

#include "cuda/dispatch/fp8_plan.hpp"
#include "mixq/error.hpp"

using namespace mixq::cuda;

TEST(CudaFp8Tiles, WideTilesWhereTheirWavesAreFull) {
  // 21504 = 112 x 192: both tiles fill their waves, the 192-wide one moves fewer bytes per FLOP.
  EXPECT_EQ(sm90_fp8_gemm_pick(4096, 21504, 132).block_n, 192);
  EXPECT_EQ(sm90_fp8_gemm_pick(2048, 24576, 132).block_n, 192);
  EXPECT_EQ(sm90_fp8_gemm_pick(4096, 57344, 132).block_n, 192);
  // 7168: 38 tiles of 192 (the last a third full) take 10 waves at M = 4096 against 14 of 128.
  EXPECT_EQ(sm90_fp8_gemm_pick(4096, 7168, 132).block_n, 128);
  // Few tiles: the narrower one spreads over more SMs.
  EXPECT_EQ(sm90_fp8_gemm_pick(128, 7168, 132).block_n, 128);
  EXPECT_EQ(sm90_fp8_gemm_pick(1, 1000, 132).block_n, 128);
  // The pick is single CTAs; it never throws on degenerate SM counts.
  EXPECT_EQ(sm90_fp8_gemm_pick(4096, 21504, 132).cluster, 1);
  EXPECT_EQ(sm90_fp8_gemm_pick(4096, 21504, 0).block_n, 192);
}

TEST(CudaFp8Tiles, RequestedTileResolves) {
  const Sm90Fp8Tile picked = sm90_fp8_gemm_tile(4096, 21504, 132, {});
  EXPECT_EQ(picked.block_n, 192);
  EXPECT_EQ(picked.cluster, 1);
  const Sm90Fp8Tile forced = sm90_fp8_gemm_tile(4096, 21504, 132, {128, 2});
  EXPECT_EQ(forced.block_n, 128);
  EXPECT_EQ(forced.cluster, 2);
  EXPECT_THROW(sm90_fp8_gemm_tile(64, 64, 132, {160, 1}), mixq::Error);
  EXPECT_THROW(sm90_fp8_gemm_tile(64, 64, 132, {128, 3}), mixq::Error);
}

TEST(CudaFp8Tiles, NamesRoundTrip) {
  for (Sm90Fp8Tile t : {Sm90Fp8Tile{128, 1}, Sm90Fp8Tile{128, 2}, Sm90Fp8Tile{192, 1},
                        Sm90Fp8Tile{192, 2}}) {
    const std::string name = sm90_fp8_gemm_name(t);
    const Sm90Fp8Tile back = sm90_fp8_gemm_tile_by_name(name);
    EXPECT_EQ(back.block_n, t.block_n) << name;
    EXPECT_EQ(back.cluster, t.cluster) << name;
    EXPECT_NE(sm90_fp8_gemm_names().find(name), std::string::npos) << name;
  }
  EXPECT_EQ(sm90_fp8_gemm_tile_by_name("sm90_fp8_block_gemm_bm128_bn256_s4").block_n, 0);
  EXPECT_EQ(sm90_fp8_gemm_tile_by_name("").block_n, 0);
}
#endif
