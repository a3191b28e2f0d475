// The grouped (mixture-of-experts) weight-only plan, without a GPU: the tile bound holds for every
// routing of the rows, the token tile follows the expected rows per expert, shared memory fits.
#if defined(MIXQ_WITH_CUDA)
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "cuda/dispatch/moe_plan.hpp"

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
    for (int mt : {kMoeTileSmall, kMoeTileLarge}) {
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

TEST(MoePlan, TokenTileAndSharedMemory) {
  MoeCall decode;
  decode.E = 256;
  decode.rows = 8 * 8;  // 8 tokens, top-8
  const MoeWoPlan d = plan_moe_weight_only(decode, w4(4096, 7168), h100(), Tuning{});
  EXPECT_EQ(d.id.tile_m, kMoeTileSmall);
  EXPECT_EQ(d.max_tiles, 4 + 64 - 1);
  EXPECT_LE(d.smem_bytes, h100().smem_per_block_optin);
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
// whole tiles, no reduction, direct stores. f32 activations, act-order gathers, experts without
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
  EXPECT_EQ(p.sched.y_rows, 0);
  EXPECT_FALSE(p.sched.inline_reduce);
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
  // decode and small prefill shares: the 16-token tile (two CTAs per SM for int4 codes, stages of
  // two chunks), the 64-token tile
  MoeCall decode = c;
  decode.rows = 8;
  const MoeWoPlan d = plan_moe_weight_only(decode, w4(4096, 7168), h100(), Tuning{});
  EXPECT_EQ(d.id.family, Family::WoWgmma);
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

}  // namespace
}  // namespace mixq::cuda
#endif
