// The grouped weight-only plan (see moe_plan.hpp).
#include "cuda/dispatch/moe_plan.hpp"

#include <algorithm>
#include <cmath>

#include "cuda/kernels/common/wo_layout.hpp"
#include "cuda/kernels/wo/sm90_wo_ws_shape.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {
int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int kWarps = 4;  // launch/wo_kernels.hpp: kStreamWarps

// Tiles a grouped call is expected to have active at decode: a row goes to its own expert (a
// token's top-k are distinct), min(E, rows); masked, every expert's.
int64_t expected_active_tiles(const MoeCall& c) {
  return std::max<int64_t>(1, c.masked ? c.E : std::min(c.E, c.rows));
}
// Blocks an SM of the grouped streaming kernel's token tile mt (the knob, else its residency).
int stream_blocks_per_sm(const Tuning& t, int mt, int bits) {
  return t.wo_stream_blocks_per_sm > 0 ? t.wo_stream_blocks_per_sm : moe_stream_resident_blocks(mt, bits);
}
}  // namespace

int64_t moe_max_tiles(const MoeCall& c, int mt) {
  if (c.masked) return c.E * ceil_div64(c.max_tokens, mt);
  if (c.rows == 0) return 0;
  return ceil_div64(c.rows, mt) + std::min(c.E, c.rows) - 1;
}

int64_t moe_tiles_any_layout(int64_t rows, int64_t E, int mt) { return ceil_div64(rows, mt) + E; }

size_t moe_schedule_bytes(int64_t max_tiles) {
  return (16 + size_t(max_tiles) * 16 + 255) / 256 * 256;
}

int moe_ws_token_tile(int64_t share) {
  // Routed counts spread around the share (~sqrt(share) for a uniform routing), and an expert's
  // last tile is partly empty: a tile that holds most experts whole wins, down to 128 tokens
  // (below it the dequantization is paid for fewer tokens). 192 holds shares up to ~160 in one
  // tile where 128 needs two for about half the experts.
  return share <= 16 ? 16 : share <= 64 ? 64 : share <= 96 ? 128 : share <= 160 ? 192 : 256;
}

bool moe_expert_major(bool block_gemm, int64_t expert_bytes, size_t l2_bytes, const Tuning& t) {
  // Measured on an H100, each order forced in one run (bench/results/cuda_moe.md, "An expert's token
  // tiles innermost"): the block GEMM's 128-row tiles on FP8 experts, as fast as 1.12-1.17x (gate_up)
  // and 1.05-1.07x (down) on Mixtral-8x7B (117 / 59 MB an expert, 4-8 tiles an expert at 512 and 4096
  // tokens), 1.02-1.04x / 1.12-1.14x on DeepSeek-V3's (29 / 15 MB) at 4096 tokens, but 0.98x / 0.96x
  // on Qwen3-30B-A3B's 3 / 1.5 MB experts. The wgmma kernel (W4, 16- to 256-token tiles, bound by
  // the dequantization at these sizes): 0.97-1.02x on Mixtral's 29 / 59 MB experts, 0.93-0.96x on
  // Qwen3's.
  if (t.moe_expert_major != Toggle::Auto) return t.moe_expert_major == Toggle::On;
  return block_gemm && l2_bytes > 0 && expert_bytes > int64_t(l2_bytes / 4);
}

namespace {

// The grouped wgmma kernel: whole 128-row x mt-token tiles of the (expert, token tile) list, round
// robin over a persistent grid of one (two at 16-token tiles of int4 codes) CTA per SM; the plain
// kernel's TMA-store epilogue rule (the kernel copies a round that crosses an expert's last row out
// by hand), a dependent launch of the schedule kernel but no early weight stages (the list is that
// kernel's output). Pair path and fold as the plain kernel's rules.
MoeWoPlan plan_moe_wgmma(const MoeCall& c, const WoWeight& w, const DeviceCaps& caps, const Tuning& t,
                         int64_t share) {
  using ws_detail::WsShape;
  const WoLayout& L = w.L;
  MoeWoPlan p;
  const int tt = t.moe_token_tile;
  // W4A8 (e4m3 activations quantized per call): the built tiles 16, 64, 128, one CTA, 128-K
  // stages, the fold on f32 pairs (the plain kernel's W4A8 rules)
  const bool a8 = L.fp8_act;
  const int mt = a8 ? (tt == 16 || tt == 64 || tt == 128 ? tt : share <= 16 ? 16 : share <= 64 ? 64 : 128)
                    : tt == 16 || tt == 64 || tt == 128 || tt == 192 || tt == 256 ? tt : moe_ws_token_tile(share);
  // two CTAs per SM at the 16-token tile for int4 codes: the decode shape of the plain kernel's
  // large int4 weights (a grouped decode touches top-k experts' weights at once)
  const bool two =
      !a8 && mt == 16 && (t.wo_ctas_per_sm == 2 || (t.wo_ctas_per_sm == 0 && L.bits == 4 && !L.e4m3));
  const WsShape shape = two ? WsShape::TwoCtas : WsShape::OneCta;
  const int cps = a8 ? 2 : wgmma_chunks_per_stage(shape, mt);
  const sm90::PairPath pp = a8 ? sm90::PairPath::F32 : wgmma_pair_path(w, c.x_type, mt, cps, t);
  p.id.family = Family::WoWgmma;
  p.id.act = uint8_t(a8 ? 3 : c.x_type);
  p.id.codes = uint8_t(L.code_kind());
  p.id.tile_m = uint16_t(mt);
  p.id.ctas = uint8_t(two ? 2 : 1);
  p.id.pairs = PairKind(int(pp));
  p.id.fold = a8 || wgmma_fold(w, c.x_type, mt, cps, pp, t);
  p.w_map = moe_ws_map(kMoeMapWeight, cps);
  p.p_map = moe_ws_map(pp == sm90::PairPath::Bf16Zero ? kMoeMapPairsBf16Zero : kMoeMapPairs, cps);
  p.n_blocks = int(ceil_div64(L.N, 128));
  p.max_tiles = moe_max_tiles(c, mt);
  p.pdl = true;
  StreamKSchedule& s = p.sched;
  s.num_n = p.n_blocks;
  s.cps = cps;
  s.chunks = int(ceil_div64(L.Kp / kChunkK, cps));
  s.grid = int(std::max<int64_t>(1, std::min<int64_t>(int64_t(caps.sm_count) * p.id.ctas, p.max_tiles * p.n_blocks)));
  s.dp_tiles = s.sk_tiles = s.sk_ctas = 0;
  s.max_stages = t.wo_max_stages;
  s.ragged = t.wo_ragged_tiles != Toggle::Off;
  s.early_stages = 0;
  s.inline_reduce = false;
  const uint32_t p_stage =
      ws_detail::ws_stage_meta_bytes(ws_detail::ws_stage_pair_bytes(pp, L.pair_f32, w.group_shift, cps), mt, a8);
  // the staging tiles only where they leave a ring of at least 4 stages (the plain kernel's rule)
  const int layout = a8 ? kCodesU4F8 : L.bits;
  const int y_rows = c.y_tma ? wgmma_y_rounds(mt, t.wo_y_rows) : 0;
  s.y_rows = wgmma_ring_stages(mt, layout, two, p_stage, ws_detail::ws_y_stage_bytes(y_rows), s.max_stages) >= 4
                 ? y_rows : 0;
  MIXQ_CHECK(wgmma_ring_stages(mt, layout, two, p_stage, ws_detail::ws_y_stage_bytes(s.y_rows), s.max_stages) >= 2,
             ErrorCode::Internal, "moe plan: the wgmma kernel's ring holds fewer than 2 stages");
  return p;
}

// The grouped streaming kernel: token tiles of 8, 16 or 64 by the share, K split over clusters.
MoeWoPlan plan_moe_stream(const MoeCall& c, const WoWeight& w, const DeviceCaps& caps, const Tuning& t,
                          int64_t share) {
  const WoLayout& L = w.L;
  MoeWoPlan p;
  const int mt = share <= kMoeTileTiny ? kMoeTileTiny : share <= kMoeTileSmall ? kMoeTileSmall : kMoeTileLarge;
  const bool x_f32 = c.x_type == 2;
  p.id.family = Family::WoStream;
  p.id.act = uint8_t(c.x_type);
  p.id.codes = uint8_t(L.code_kind());
  p.id.tile_m = uint16_t(mt);
  p.id.fine = w.group_shift < 6;
  const int64_t per_expert_max = c.masked ? c.max_tokens : c.rows;
  p.x_rows = int(std::max<int64_t>(1, std::min<int64_t>(mt, per_expert_max)));
  const int n_tiles = int(ceil_div64(L.N, kTileRows));
  const int rt = wo_row_tiles(mt, L.bits, x_f32);
  p.n_blocks = int(ceil_div64(n_tiles, int64_t(kWarps) * rt));
  p.max_tiles = moe_max_tiles(c, mt);
  const int blocks_per_sm = stream_blocks_per_sm(t, mt, L.bits);
  // K split over a cluster of blocks where the tiles expected active leave block slots empty. One
  // token of DeepSeek-V3 on the 16-token tile without splits (8 experts x 32 blocks along N = 4096:
  // 256 of its 396 slots) took 85.7 us for gate_up where the plain kernel streams the same bytes in
  // 40.3 (H200). The splits reduce through distributed shared memory (the plain kernel's cluster
  // reduction: no workspace, no second pass). At most 16 (the cluster limit), each at least
  // min_chunks long.
  const int chunks = int(L.Kp / kChunkK);
  const int min_chunks = t.wo_stream_min_chunks > 0 ? t.wo_stream_min_chunks : 4;
  const int64_t active = expected_active_tiles(c);
  const int64_t slots = int64_t(caps.sm_count) * blocks_per_sm;
  int splits = int(std::max<int64_t>(1, slots / (int64_t(p.n_blocks) * active)));
  splits = std::min({splits, kStreamMaxClusterSplits, std::max(1, chunks / min_chunks)});
  // every cluster of the expected tiles resident at once: clusters sit within one GPC, so near full
  // occupancy fewer fit than the slots divided by their size, and the ones left over ran as a second
  // wave (H200, DeepSeek-V3 gate_up at one token: 128 clusters of 4 took 64 us where the plain
  // kernel streams the same bytes in 40); unknown capacities (0) split nothing
  const int b = std::min(blocks_per_sm, DeviceCaps::kMaxClusterBlocksPerSm);
  while (splits > 1 && int64_t(p.n_blocks) * active > caps.cluster_capacity[b][splits]) --splits;
  if (!caps.stream_clusters) splits = 1;
  p.chunks_per_split = int(ceil_div64(chunks, splits));
  p.splits = int(ceil_div64(chunks, p.chunks_per_split));
  p.pdl = caps.stream_clusters;
  const int sx = x_f32 ? 2 : 1;
  auto smem_for = [&](int stage_chunks) {
    const int64_t kr = int64_t(stage_chunks) * kChunkK;
    return (size_t(p.x_rows) * size_t(kr + 8) + kChunkK + 8) * 2 * sx;
  };
  const size_t budget = std::min<size_t>(caps.smem_per_block_optin,
                                         caps.smem_per_sm / size_t(blocks_per_sm) - 1024);
  int stage = 1;
  for (int s = p.chunks_per_split; s >= 1; --s)
    if (smem_for(s) <= budget) {
      stage = s;
      break;
    }
  p.chunks_per_stage = stage;
  p.smem_bytes = smem_for(stage);
  // after the K loop the same memory holds the block's output tile of the cluster reduction
  if (p.splits > 1) p.smem_bytes = std::max(p.smem_bytes, size_t(kWarps) * rt * kTileRows * p.x_rows * 4);
  return p;
}

// Decode shares on sm_90a: the streaming kernel's 8-token tile (s) against the wgmma kernel's
// 16-token tile (g). Both are bound by the weight stream, whose rate follows the fraction of the
// GPU's block slots that the experts expected active fill; per filled slot the streaming kernel is
// counted 1.25x faster (fitted below; the plain kernels on the same bytes differ by 1.15x).
// Only int4 experts (the fitted runs); small ones (under 4 MiB) stay on the wgmma kernel: its
// persistent CTAs amortize the per-block start (the activation staging) that the streaming kernel
// pays per expert and block. Fitted on an H200 (bf16, W4 g128, uniform routing;
// docs/decisions/moe-stacked-experts.md): DeepSeek-V3 one token gate_up 50.8 us (g) against 58.0
// (s: 3 splits, 73% of the slots), down 33.3 / 31.1; 8 and 64 tokens s 5% and 12% faster; Mixtral-8x7B one token s 8% and 40% faster, 8 tokens down 90.7 (g) /
// 106.9; Qwen3-30B-A3B (1.5 and 0.8 MB experts) within +-10% either way.
constexpr int64_t kMoeStreamMinExpertBytes = int64_t(4) << 20;
constexpr double kMoeStreamSlotGain = 1.25;
bool stream_beats_wgmma(const MoeCall& c, const WoWeight& w, const DeviceCaps& caps, const Tuning& t,
                        const MoeWoPlan& s, const MoeWoPlan& g) {
  const WoLayout& L = w.L;
  // fitted on int4 experts only: 8-bit and e4m3 codes keep the wgmma kernel until measured
  if (L.code_kind() != kCodesU4 || L.N * L.Kp / 2 < kMoeStreamMinExpertBytes) return false;
  const double experts = double(expected_active_tiles(c));  // one tile each at these shares
  const int blocks_per_sm = stream_blocks_per_sm(t, int(s.id.tile_m), L.bits);
  const double fill_s = std::min(1.0, experts * s.n_blocks * s.splits / double(caps.sm_count * blocks_per_sm));
  const double fill_g = std::min(1.0, experts * g.n_blocks / double(caps.sm_count * g.id.ctas));
  return kMoeStreamSlotGain * fill_s >= fill_g;
}

}  // namespace

MoeWoPlan plan_moe_weight_only(const MoeCall& c, const WoWeight& w, const DeviceCaps& caps,
                               const Tuning& t) {
  const WoLayout& L = w.L;
  // Rows one expert is expected to get: its share of a uniform routing (contiguous), or the
  // buffer's rows (masked). Shares of 9 rows and more take the Hopper wgmma kernel where the experts
  // hold its descriptors; decode shares (up to 8) the one of it and the streaming kernel's 8-token
  // tile with K split over clusters that fills more of the GPU (stream_beats_wgmma); without the
  // wgmma kernel, the streaming kernel's 8-, 16- and 64-token tiles. Tuning::moe_wgmma_min_rows
  // sets the boundary instead (wgmma from that share on, the streaming kernel below).
  const int64_t share = c.masked ? c.max_tokens : ceil_div64(std::max<int64_t>(c.rows, 1), c.E);
  if (L.fp8_act) {  // W4A8: only the wgmma kernel multiplies e4m3 activations
    MIXQ_CHECK(c.ws_maps && caps.sm90a, ErrorCode::Unsupported, "grouped W4A8 (cuda): needs an sm_90a build on a "
               "Hopper GPU and the experts' wgmma descriptors");
    return plan_moe_wgmma(c, w, caps, t, share);  // no rows: no tiles, nothing launched
  }
  const bool wgmma_ok = c.ws_maps && caps.sm90a && c.x_type != 2 && !w.gather && w.group_shift >= 4 && c.rows > 0;
  if (!wgmma_ok) return plan_moe_stream(c, w, caps, t, share);
  if (t.moe_wgmma_min_rows > 0)
    return share >= t.moe_wgmma_min_rows ? plan_moe_wgmma(c, w, caps, t, share) : plan_moe_stream(c, w, caps, t, share);
  if (share >= kMoeWgmmaMinRows) return plan_moe_wgmma(c, w, caps, t, share);
  MoeWoPlan s = plan_moe_stream(c, w, caps, t, share);
  MoeWoPlan g = plan_moe_wgmma(c, w, caps, t, share);
  return stream_beats_wgmma(c, w, caps, t, s, g) ? s : g;
}

MoeBlockPlan plan_moe_block(const MoeCall& c, int64_t N, int64_t K, int sms, const Tuning& t) {
  MoeBlockPlan p;
  const int64_t share = c.masked ? c.max_tokens : ceil_div64(std::max<int64_t>(c.rows, 1), c.E);
  const int tt = t.moe_token_tile;
  if (tt == 16 || tt == 32 || tt == 64) {
    p.skinny = true;
    p.tile_m = tt;
  } else if (tt != kMoeBlockTileM && share <= kMoeSkinnyMaxShare) {
    // routed counts spread around the share (~sqrt(share) for a uniform routing): a tile that
    // holds most experts' rows whole
    p.skinny = true;
    p.tile_m = share <= 8 ? 16 : share <= 20 ? 32 : 64;
  }
  p.max_tiles = moe_max_tiles(c, p.tile_m);
  if (!p.skinny) return p;
  p.own_schedule = c.E <= kMoeOwnScheduleMaxE && t.moe_own_schedule != Toggle::Off;
  const int64_t num_n = ceil_div64(N, 128), num_kb = ceil_div64(K, 128), g = std::max(sms, 1);
  // K splits only where the units expected active leave most of the grid idle (<= a quarter of
  // it): then as many as fill it once, with at least 4 stages a piece. Cutting a unit costs its
  // pieces' partial sums, and fewer busy SMs still pull most of the DRAM rate (H200, FP8 experts at
  // one token: DeepSeek-V3's down projection, 448 units on 132 SMs, took 58.7 us in halves and 47.8
  // whole; Mixtral-8x7B's, 64 units, 50.6 us in halves and 48.7 whole).
  const int64_t units = expected_active_tiles(c) * num_n;
  if (units * 4 <= g) p.splits = int(std::max<int64_t>(1, std::min({int64_t(8), g / units, num_kb / 4})));
  if (t.moe_block_splits > 0) p.splits = int(std::min<int64_t>(t.moe_block_splits, num_kb));
  if (p.splits > 1) {
    p.tickets = p.max_tiles * num_n;
    p.partial_floats = p.tickets * p.splits * 128 * p.tile_m;
  }
  return p;
}

size_t moe_block_split_bytes(const MoeBlockPlan& p) {
  if (p.tickets == 0) return 0;
  const size_t partial = (size_t(p.partial_floats) * 4 + 255) / 256 * 256;
  return partial + (size_t(p.tickets) * 4 + 255) / 256 * 256;
}

}  // namespace mixq::cuda
