// The grouped (mixture-of-experts) weight-only plan, without a GPU: the tile bound holds for every
// routing of the rows, the token tile follows the expected rows per expert, shared memory fits.
#if defined(MIXQ_WITH_CUDA)
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "cuda/dispatch/moe_plan.hpp"
#include "cuda/kernels/moe/moe_params.hpp"

namespace mixq::cuda {
namespace {

DeviceCaps h100() {
  DeviceCaps c;
  c.sm_count = 132;
  c.cc_major = 9;
  c.smem_per_sm = 228 * 1024;
  c.smem_per_block_optin = 227 * 1024;
  c.sm90a = true;
  return c;
}

WoWeight w4(int64_t N, int64_t K) {
  WoWeight w;
  w.L.N = N;
  w.L.K = K;
  w.L.Np = (N + 15) / 16 * 16;
  w.L.Kp = (K + 63) / 64 * 64;
  w.L.bits = 4;
  w.group_shift = 7;
  w.L.group = 128;
  w.L.groups = (w.L.Kp + 127) / 128;
  return w;
}

TEST(MoePlan, TileBoundHoldsForRandomRoutings) {
  std::mt19937 g(1);
  for (int trial = 0; trial < 2000; ++trial) {
    MoeCall c;
    c.E = 1 + int64_t(g() % 300);
    c.rows = int64_t(g() % 5000);
    for (int mt : {kMoeTileTiny, kMoeTileSmall, kMoeTileLarge}) {
      // a random split of the rows over the experts
      std::vector<int64_t> cut(size_t(c.E - 1));
      for (auto& v : cut) v = c.rows ? int64_t(g() % uint64_t(c.rows + 1)) : 0;
      cut.push_back(0);
      cut.push_back(c.rows);
      std::sort(cut.begin(), cut.end());
      int64_t tiles = 0;
      for (size_t e = 0; e + 1 < cut.size(); ++e) tiles += (cut[e + 1] - cut[e] + mt - 1) / mt;
      ASSERT_LE(tiles, moe_max_tiles(c, mt)) << "E " << c.E << " rows " << c.rows;
    }
  }
}

// The workspace's bound, sized before the layout is known, covers both layouts' tile bounds at
// every token tile from the one it is given.
TEST(MoePlan, WorkspaceTileBoundCoversBothLayouts) {
  std::mt19937 g(2);
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t E = 1 + int64_t(g() % 400), max_tokens = int64_t(g() % 300);
    for (int mt_min : {kMoeTileTiny, 128}) {
      for (int mt : {8, 16, 64, 128, 192, 256}) {
        if (mt < mt_min) continue;
        MoeCall masked;
        masked.E = E;
        masked.masked = true;
        masked.max_tokens = max_tokens;
        masked.rows = E * max_tokens;
        ASSERT_LE(moe_max_tiles(masked, mt), moe_tiles_any_layout(masked.rows, E, mt_min))
            << "masked E " << E << " max_tokens " << max_tokens << " mt " << mt;
        MoeCall contiguous;
        contiguous.E = E;
        contiguous.rows = int64_t(g() % 40000);
        ASSERT_LE(moe_max_tiles(contiguous, mt), moe_tiles_any_layout(contiguous.rows, E, mt_min))
            << "contiguous E " << E << " rows " << contiguous.rows << " mt " << mt;
      }
    }
  }
}

TEST(MoePlan, TokenTileAndSharedMemory) {
  MoeCall decode;
  decode.E = 256;
  decode.rows = 8 * 8;  // 8 tokens, top-8
  const MoeWoPlan d = plan_moe_weight_only(decode, w4(4096, 7168), h100(), Tuning{});
  EXPECT_EQ(d.id.tile_m, kMoeTileTiny);
  EXPECT_EQ(d.max_tiles, 8 + 64 - 1);
  EXPECT_LE(d.smem_bytes, h100().smem_per_block_optin);
  decode.rows = 16 * 256;  // 16 rows an expert
  EXPECT_EQ(plan_moe_weight_only(decode, w4(4096, 7168), h100(), Tuning{}).id.tile_m, kMoeTileSmall);
  MoeCall prefill;
  prefill.E = 256;
  prefill.rows = 4096 * 8;
  const MoeWoPlan p = plan_moe_weight_only(prefill, w4(7168, 2048), h100(), Tuning{});
  EXPECT_EQ(p.id.tile_m, kMoeTileLarge);
  EXPECT_EQ(p.x_rows, kMoeTileLarge);
  MoeCall masked;
  masked.E = 8;
  masked.masked = true;
  masked.max_tokens = 5;
  masked.rows = 40;
  const MoeWoPlan m = plan_moe_weight_only(masked, w4(28672, 4096), h100(), Tuning{});
  EXPECT_EQ(m.max_tiles, 8);
  EXPECT_EQ(m.x_rows, 5);
}

// Every share goes to the grouped wgmma kernel where the experts hold its descriptors, with the
// token tile of moe_ws_token_tile (192 for ~128 rows an expert); a persistent grid of at most one CTA per SM;
// whole tiles, no reduction, the TMA-store epilogue where Y allows it. f32 activations, act-order gathers, experts without
// descriptors and small shares stay on the streaming kernel.
TEST(MoePlan, PrefillSharesTakeTheWgmmaKernel) {
  MoeCall c;
  c.E = 256;
  c.rows = 4096 * 8;  // 128 rows an expert
  c.ws_maps = true;
  const MoeWoPlan p = plan_moe_weight_only(c, w4(4096, 7168), h100(), Tuning{});
  EXPECT_EQ(p.id.family, Family::WoWgmma);
  EXPECT_EQ(p.id.tile_m, 192);
  EXPECT_EQ(p.sched.grid, 132);
  EXPECT_EQ(p.sched.chunks, 7168 / 64);
  EXPECT_EQ(p.sched.y_rows, 0);  // Y not TMA-storable
  EXPECT_FALSE(p.sched.inline_reduce);
  {  // the TMA-store epilogue where Y is: rounds that divide the token tile (64 at 192), or none
    MoeCall ty = c;
    ty.y_tma = true;
    EXPECT_EQ(plan_moe_weight_only(ty, w4(4096, 7168), h100(), Tuning{}).sched.y_rows, 64);
    EXPECT_EQ(plan_moe_weight_only(ty, w4(4096, 7168), h100(), Tuning::parse("wo_y_rows=0")).sched.y_rows, 0);
    EXPECT_EQ(plan_moe_weight_only(ty, w4(4096, 7168), h100(), Tuning::parse("wo_y_rows=32")).sched.y_rows, 32);
    for (const auto& [tile, rows] : std::vector<std::pair<int, int>>{{16, 0}, {64, 0}, {128, 128}, {256, 128}})
      EXPECT_EQ(plan_moe_weight_only(ty, w4(4096, 7168), h100(),
                                     Tuning::parse("moe_token_tile=" + std::to_string(tile))).sched.y_rows, rows)
          << tile;
    for (int knob : {16, 32, 64, 100, 128, 256})  // a power of two that divides 192
      EXPECT_EQ(192 % wgmma_y_rounds(192, knob), 0) << knob;
    EXPECT_EQ(wgmma_y_rounds(256, 200), 128);
    EXPECT_EQ(wgmma_y_rounds(64, -1), 0);
  }
  EXPECT_TRUE(p.sched.ragged);  // a partly empty tile's MMAs stop at its rows rounded up to 64
  EXPECT_FALSE(plan_moe_weight_only(c, w4(4096, 7168), h100(), Tuning::parse("wo_ragged_tiles=off")).sched.ragged);
  EXPECT_EQ(p.n_blocks, 32);
  EXPECT_EQ(p.max_tiles, moe_max_tiles(c, 192));
  for (const auto& [share, tile] : std::vector<std::pair<int64_t, int>>{
           {1, 16}, {16, 16}, {17, 64}, {64, 64}, {65, 128}, {96, 128}, {97, 192}, {160, 192}, {161, 256}})
    EXPECT_EQ(moe_ws_token_tile(share), tile) << share;
  EXPECT_EQ(p.p_map, moe_ws_map(kMoeMapPairs, 1));
  MoeCall big = c;
  big.E = 8;  // 4096 rows an expert
  EXPECT_EQ(plan_moe_weight_only(big, w4(4096, 7168), h100(), Tuning{}).id.tile_m, 256);
  EXPECT_EQ(plan_moe_weight_only(big, w4(4096, 7168), h100(), Tuning::parse("moe_token_tile=128")).id.tile_m,
            128);
  MoeCall one = c;  // one tile of one expert: a grid of its N blocks only
  one.E = 1;
  one.rows = 100;
  EXPECT_EQ(plan_moe_weight_only(one, w4(1024, 512), h100(), Tuning{}).sched.grid, 8);
  MoeCall bf16 = c;
  bf16.x_type = 1;
  WoWeight bz = w4(4096, 7168);
  bz.int_zero = bz.bf16_zero_pairs = true;
  EXPECT_EQ(plan_moe_weight_only(bf16, bz, h100(), Tuning{}).p_map, moe_ws_map(kMoeMapPairsBf16Zero, 1));
  for (int variant = 0; variant < 4; ++variant) {
    MoeCall s = c;
    WoWeight w = w4(4096, 7168);
    if (variant == 0) s.x_type = 2;
    if (variant == 1) w.gather = true;
    if (variant == 2) s.ws_maps = false;
    if (variant == 3) s.rows = 256 * 63;  // 63 rows an expert, with the knob below 64
    const Tuning t = Tuning::parse(variant == 3 ? "moe_wgmma_min_rows=64" : "");
    EXPECT_EQ(plan_moe_weight_only(s, w, h100(), t).id.family, Family::WoStream) << variant;
  }
  EXPECT_EQ(plan_moe_weight_only(c, w4(4096, 7168), h100(), Tuning::parse("moe_wgmma_min_rows=129")).id.family,
            Family::WoStream);
  // decode shares (up to 8 rows an expert): the wgmma kernel's 16-token tile (two CTAs per SM for
  // int4 codes, stages of two chunks) or the streaming kernel (DecodeKernelChoice); small prefill
  // shares the 64-token tile
  MoeCall decode = c;
  decode.rows = 9 * 256;
  EXPECT_EQ(plan_moe_weight_only(decode, w4(4096, 7168), h100(), Tuning{}).id.family, Family::WoWgmma);
  decode.rows = 8;
  EXPECT_EQ(plan_moe_weight_only(decode, w4(4096, 7168), h100(), Tuning::parse("moe_wgmma_min_rows=9")).id.family,
            Family::WoStream);
  const MoeWoPlan d = plan_moe_weight_only(decode, w4(4096, 7168), h100(), Tuning::parse("moe_wgmma_min_rows=1"));
  EXPECT_EQ(d.id.family, Family::WoWgmma);
  EXPECT_TRUE(d.pdl);  // a dependent launch of the schedule kernel
  EXPECT_EQ(d.id.tile_m, 16);
  EXPECT_EQ(d.id.ctas, 2);
  EXPECT_EQ(d.sched.cps, 2);
  EXPECT_EQ(d.sched.chunks, 7168 / 128);
  EXPECT_EQ(d.w_map, moe_ws_map(kMoeMapWeight, 2));
  EXPECT_EQ(d.sched.grid, 8 * 32);  // the 8 rows' tiles x N blocks, below 2 CTAs x 132 SMs
  MoeCall mid = c;
  mid.rows = 256 * 40;
  const MoeWoPlan m = plan_moe_weight_only(mid, w4(4096, 7168), h100(), Tuning{});
  EXPECT_EQ(m.id.tile_m, 64);
  EXPECT_EQ(m.id.ctas, 1);
  EXPECT_EQ(m.p_map, moe_ws_map(kMoeMapPairs, 2));
}

// Decode shares on the streaming kernel: the 8-token tile, and K split over a cluster of blocks
// until the tiles expected active (min(E, rows) contiguous, E masked) fill the block slots
// (132 SMs x 4 blocks of the int4 8-token tile), at most 16 splits of at least 4 chunks; none
// without the sm_90 image's clusters, where the grouped launch is not a dependent one either.
TEST(MoePlan, DecodeSharesSplitKOverClusters) {
  DeviceCaps caps = h100();
  caps.stream_clusters = true;
  // every cluster size fitting as many clusters as the slots hold
  for (int b = 1; b <= DeviceCaps::kMaxClusterBlocksPerSm; ++b)
    for (int s = 1; s <= kStreamMaxClusterSplits; ++s) caps.cluster_capacity[b][s] = 132 * b / s;
  MoeCall c;
  c.E = 256;
  c.rows = 8;  // DeepSeek-V3, one token, top-8 (no wgmma descriptors: the streaming kernel's plan)
  const MoeWoPlan gu = plan_moe_weight_only(c, w4(4096, 7168), caps, Tuning{});
  EXPECT_EQ(gu.id.family, Family::WoStream);
  EXPECT_EQ(gu.id.tile_m, kMoeTileTiny);
  EXPECT_EQ(gu.n_blocks, 16);  // 256 row tiles, 4 warps x 4 tiles a block
  EXPECT_EQ(gu.splits, 4);     // 528 slots / (16 blocks x 8 tiles)
  EXPECT_EQ(gu.chunks_per_split, 7168 / 64 / 4);
  EXPECT_TRUE(gu.pdl);
  EXPECT_EQ(gu.x_rows, 8);
  // the cluster reduction's output tile fits the block's shared memory
  EXPECT_GE(gu.smem_bytes, size_t(4) * 4 * 16 * gu.x_rows * 4);
  const MoeWoPlan dn = plan_moe_weight_only(c, w4(7168, 2048), caps, Tuning{});
  EXPECT_EQ(dn.n_blocks, 28);
  EXPECT_EQ(dn.splits, 2);
  EXPECT_EQ(dn.chunks_per_split, 16);
  MoeCall eight = c;
  eight.rows = 64;  // 8 tokens: 64 tiles x 16 blocks fill the slots
  EXPECT_EQ(plan_moe_weight_only(eight, w4(4096, 7168), caps, Tuning{}).splits, 1);
  MoeCall few = c;
  few.E = 4;
  few.rows = 4;  // 4 tiles x 1 block: capped at 16 splits, then at chunks / 4 (K = 2048: 8)
  EXPECT_EQ(plan_moe_weight_only(few, w4(200, 8192), caps, Tuning{}).splits, 16);
  EXPECT_EQ(plan_moe_weight_only(few, w4(200, 2048), caps, Tuning{}).splits, 8);
  EXPECT_EQ(plan_moe_weight_only(few, w4(200, 2048), caps, Tuning::parse("wo_stream_min_chunks=16")).splits, 2);
  MoeCall masked;
  masked.E = 8;
  masked.masked = true;
  masked.max_tokens = 1;
  masked.rows = 8;  // Mixtral-8x7B, one token: every expert counted
  const MoeWoPlan m = plan_moe_weight_only(masked, w4(4096, 14336), caps, Tuning{});
  EXPECT_EQ(m.n_blocks, 16);
  EXPECT_EQ(m.splits, 4);  // 528 / (16 x 8)
  // fewer clusters fit than the expected tiles' (4 x 8 tiles of one block): fewer splits
  DeviceCaps tight = caps;
  tight.cluster_capacity[4][16] = tight.cluster_capacity[4][15] = 3;
  EXPECT_EQ(plan_moe_weight_only(few, w4(200, 8192), tight, Tuning{}).splits, 13);  // 14 -> 10 chunks each
  tight.cluster_capacity[4][4] = 127;  // DeepSeek-V3 gate_up above: 16 blocks x 8 tiles
  EXPECT_EQ(plan_moe_weight_only(c, w4(4096, 7168), tight, Tuning{}).splits, 3);
  const MoeWoPlan plain = plan_moe_weight_only(c, w4(4096, 7168), h100(), Tuning{});
  EXPECT_EQ(plain.splits, 1);
  EXPECT_FALSE(plain.pdl);
  EXPECT_EQ(plain.chunks_per_split, 7168 / 64);
}

// Decode shares on sm_90a: the kernel whose grid fills more of the GPU (the streaming kernel's
// filled slots counted 1.25x), experts of 4 MiB and more only; the cases it was fitted on (H200
// cluster capacities of 128-thread blocks at 4 an SM; bf16 activations, W4 g128).
TEST(MoePlan, DecodeKernelChoice) {
  DeviceCaps caps = h100();
  caps.stream_clusters = true;
  const int h200[16] = {528, 264, 163, 124, 94, 79, 69, 62, 51, 44, 37, 37, 30, 30, 28, 28};
  for (int b : {4, 5})
    for (int s = 1; s <= kStreamMaxClusterSplits; ++s) caps.cluster_capacity[b][s] = h200[s - 1];
  auto family = [&](int64_t E, int64_t rows, int64_t N, int64_t K, const char* tune = "") {
    MoeCall c;
    c.E = E;
    c.rows = rows;
    c.x_type = 1;
    c.ws_maps = true;
    return plan_moe_weight_only(c, w4(N, K), caps, Tuning::parse(tune)).id.family;
  };
  // DeepSeek-V3 (E = 256, top-8): one token's gate_up fills 3 splits x 128 blocks (73%) where the
  // wgmma kernel's 256 tiles fill 97%; its down, and every projection at 8 and 64 tokens, stream
  EXPECT_EQ(family(256, 8, 4096, 7168), Family::WoWgmma);
  EXPECT_EQ(family(256, 8, 7168, 2048), Family::WoStream);
  for (int64_t rows : {64, 512}) {
    EXPECT_EQ(family(256, rows, 4096, 7168), Family::WoStream) << rows;
    EXPECT_EQ(family(256, rows, 7168, 2048), Family::WoStream) << rows;
  }
  // Mixtral-8x7B (E = 8, top-2): one token streams (the wgmma kernel's down had 64 tiles for 264
  // CTAs); at 8 tokens the down projection's 3 splits lose to the wgmma kernel's 256 tiles
  EXPECT_EQ(family(8, 2, 28672, 4096), Family::WoStream);
  EXPECT_EQ(family(8, 2, 4096, 14336), Family::WoStream);
  EXPECT_EQ(family(8, 16, 4096, 14336), Family::WoWgmma);
  // Qwen3-30B-A3B: 1.5 and 0.8 MB experts stay on the wgmma kernel
  for (int64_t rows : {8, 64, 512}) {
    EXPECT_EQ(family(128, rows, 1536, 2048), Family::WoWgmma) << rows;
    EXPECT_EQ(family(128, rows, 2048, 768), Family::WoWgmma) << rows;
  }
  // 8-bit codes keep the wgmma kernel (the rule was fitted on int4 experts)
  {
    MoeCall c;
    c.E = 8;
    c.rows = 2;
    c.x_type = 1;
    c.ws_maps = true;
    WoWeight w8 = w4(4096, 14336);
    w8.L.bits = 8;
    EXPECT_EQ(plan_moe_weight_only(c, w8, caps, Tuning{}).id.family, Family::WoWgmma);
  }
  // the knob replaces the choice
  EXPECT_EQ(family(256, 8, 4096, 7168, "moe_wgmma_min_rows=9"), Family::WoStream);
  EXPECT_EQ(family(256, 8, 7168, 2048, "moe_wgmma_min_rows=1"), Family::WoWgmma);
}

// The FP8 block / INT8 W8A8 experts' plan: the few-token form and its tile at decode shares, the
// block GEMM from there on or when the knob says 128; the K splits fill the grid's rounds, keep 4
// stages a piece, and their workspace covers every unit's pieces.
TEST(MoePlan, BlockExpertsFewTokenFormAndSplits) {
  const auto plan = [](int64_t E, int64_t rows, int64_t N, int64_t K, int tile = 0, bool masked = false,
                       int64_t max_tokens = 0) {
    MoeCall c;
    c.E = E;
    c.rows = rows;
    c.masked = masked;
    c.max_tokens = max_tokens;
    Tuning t;
    t.moe_token_tile = tile;
    return plan_moe_block(c, N, K, 132, t);
  };
  // DeepSeek-V3 at one token (top-8): 8 x 32 and 8 x 56 units, whole
  MoeBlockPlan p = plan(256, 8, 4096, 7168);
  EXPECT_TRUE(p.skinny);
  EXPECT_EQ(p.tile_m, 16);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(moe_block_split_bytes(p), 0u);
  EXPECT_EQ(plan(256, 8, 7168, 2048).splits, 1);
  // Mixtral-8x7B down at one token: 2 x 32 units, half the grid: whole
  EXPECT_EQ(plan(8, 2, 4096, 14336).splits, 1);
  // one expert's 8 weight tiles (E = 1 or a single routed row), K = 7168: 8 splits fill the grid
  p = plan(4, 1, 1024, 7168);
  EXPECT_EQ(p.splits, 8);
  EXPECT_EQ(p.max_tiles, 1);
  EXPECT_EQ(p.tickets, 8);
  EXPECT_EQ(p.partial_floats, 8 * 8 * 128 * 16);
  EXPECT_GE(moe_block_split_bytes(p), size_t(p.partial_floats * 4 + p.tickets * 4));
  // ... at K = 1088 (9 stages): 2 splits of >= 4 stages
  EXPECT_EQ(plan(4, 1, 1024, 1088).splits, 2);
  EXPECT_EQ(plan(1, 1, 1024, 1088, 0, false, 0).splits, 2);
  // the tiles listed by the GEMM itself up to 1024 experts, unless the knob says Off
  EXPECT_TRUE(plan(256, 8, 4096, 7168).own_schedule);
  EXPECT_FALSE(plan(2048, 8, 4096, 7168).own_schedule);
  {
    MoeCall c;
    c.E = 8;
    c.rows = 2;
    EXPECT_FALSE(plan_moe_block(c, 4096, 14336, 132, Tuning::parse("moe_own_schedule=off")).own_schedule);
  }
  // the knob
  Tuning t1;
  t1.moe_block_splits = 3;
  MoeCall c1;
  c1.E = 256;
  c1.rows = 8;
  EXPECT_EQ(plan_moe_block(c1, 7168, 2048, 132, t1).splits, 3);
  // every plan keeps >= 4 stages a piece
  for (int64_t K : {256, 512, 768, 2048, 7168})
    for (int64_t rows : {1, 2, 8, 64}) {
      const MoeBlockPlan q = plan(128, rows, 512, K);
      EXPECT_GE(K / 128 / q.splits, q.splits == 1 ? 0 : 4) << K << " " << rows;
    }
  // tiles by the share; the block GEMM past 32 rows an expert
  EXPECT_EQ(plan(256, 64 * 8, 4096, 7168).tile_m, 16);    // share 2
  EXPECT_EQ(plan(256, 512 * 8, 4096, 7168).tile_m, 32);   // share 16
  EXPECT_EQ(plan(128, 512 * 8, 1536, 2048).tile_m, 64);   // share 32
  EXPECT_FALSE(plan(128, 4096 * 8, 1536, 2048).skinny);   // share 256
  EXPECT_EQ(plan(128, 4096 * 8, 1536, 2048).tile_m, 128);
  // masked: by max_tokens
  EXPECT_EQ(plan(8, 8 * 4, 4096, 14336, 0, true, 4).tile_m, 16);
  EXPECT_FALSE(plan(8, 8 * 256, 4096, 14336, 0, true, 256).skinny);
  // the knob
  EXPECT_EQ(plan(256, 8, 4096, 7168, 64).tile_m, 64);
  EXPECT_FALSE(plan(256, 8, 4096, 7168, 128).skinny);
  EXPECT_TRUE(plan(128, 4096 * 8, 1536, 2048, 32).skinny);
}

// The grouped GEMMs' item order: every (token tile, N block) unit exactly once in either order;
// expert-major puts an expert's token tiles of one N block on consecutive items.
TEST(MoeItemOrder, EveryUnitOnceAndAnExpertsTilesAdjacent) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int E = 1 + int(rng() % 40), tile_m = trial % 2 ? 16 : 64, num_n = 1 + int(rng() % 9);
    std::vector<MoeTile> tiles;  // as the schedule kernel lists them: experts in order, rows > 0 only
    int row0 = 0;
    for (int e = 0; e < E; ++e) {
      const int rows = rng() % 3 == 0 ? 0 : int(rng() % (4 * tile_m));
      for (int mb = 0; mb * tile_m < rows; ++mb) tiles.push_back(MoeTile{e, mb, row0, rows});
      row0 += rows;
    }
    // a truncated list too (a capacity below the routing's tiles: the last expert loses tiles)
    const int n_tiles = trial % 5 == 4 && tiles.size() > 1 ? int(tiles.size()) - 1 : int(tiles.size());
    for (bool major : {false, true}) {
      std::vector<int> seen(size_t(n_tiles) * num_n, 0);
      MoeTile prev{};
      int prev_nb = -1;
      for (int i = 0; i < n_tiles * num_n; ++i) {
        int nb = -1;
        const MoeTile t = moe_unit_of_item(i, num_n, n_tiles, tile_m, major,
                                           [&](int ti) { return tiles[size_t(ti)]; }, nb);
        ASSERT_TRUE(nb >= 0 && nb < num_n) << i;
        const int ti = int(std::find_if(tiles.begin(), tiles.begin() + n_tiles, [&](const MoeTile& x) {
                         return x.expert == t.expert && x.m_block == t.m_block;
                       }) - tiles.begin());
        ASSERT_LT(ti, n_tiles) << "expert " << t.expert << " tile " << t.m_block;
        EXPECT_EQ(t.row0, tiles[size_t(ti)].row0);
        EXPECT_EQ(t.rows, tiles[size_t(ti)].rows);
        ++seen[size_t(ti) * num_n + size_t(nb)];
        if (major && i > 0 && t.expert == prev.expert && t.m_block > 0) {
          EXPECT_EQ(nb, prev_nb) << i;  // the expert's next tile of the same N block
          EXPECT_EQ(t.m_block, prev.m_block + 1) << i;
        }
        prev = t;
        prev_nb = nb;
      }
      for (size_t u = 0; u < seen.size(); ++u) EXPECT_EQ(seen[u], 1) << "unit " << u << " major " << major;
    }
  }
}

// The order: the block GEMM's experts over a quarter of L2; never the weight-only kernel's; the
// knob forces it for both.
TEST(MoeItemOrder, ExpertMajorForBlockGemmExpertsOverAQuarterOfL2) {
  const size_t l2 = DeviceCaps::h100().l2_bytes;
  const Tuning t;
  EXPECT_TRUE(moe_expert_major(true, 28672LL * 4096, l2, t));   // Mixtral-8x7B gate_up, e4m3 (117 MB)
  EXPECT_TRUE(moe_expert_major(true, 7168LL * 2048, l2, t));    // DeepSeek-V3 down, e4m3 (15 MB)
  EXPECT_FALSE(moe_expert_major(true, 1536LL * 2048, l2, t));   // Qwen3-30B-A3B gate_up, e4m3 (3 MB)
  EXPECT_FALSE(moe_expert_major(false, 28672LL * 4096 / 2, l2, t));  // weight-only (int4)
  EXPECT_FALSE(moe_expert_major(true, int64_t(1) << 40, 0, t));      // L2 unknown: the plain order
  const Tuning on = Tuning::parse("moe_expert_major=on"), off = Tuning::parse("moe_expert_major=off");
  EXPECT_TRUE(moe_expert_major(false, 1536LL * 2048, l2, on));
  EXPECT_TRUE(moe_expert_major(true, 1536LL * 2048, l2, on));
  EXPECT_FALSE(moe_expert_major(true, 28672LL * 4096, l2, off));
}

}  // namespace
}  // namespace mixq::cuda
#endif
