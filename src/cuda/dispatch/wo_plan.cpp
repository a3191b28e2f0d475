#include "cuda/dispatch/wo_plan.hpp"

#include <algorithm>

#include "cuda/dispatch/stream_k_plan.hpp"
#include "cuda/kernels/wo/sm90_wo_ws_k_split.cuh"
#include "cuda/kernels/wo/sm90_wo_ws_shape.hpp"
#include "cuda/launch/act_quant.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

using ws_detail::WsShape;

constexpr int kStreamWarpsPlan = 4;  // warps of the streaming kernel's block (launch/wo_kernels.hpp)
constexpr int kIoF16 = 0, kIoBf16 = 1, kIoF32 = 2;

size_t align256(size_t b) { return (b + 255) / 256 * 256; }
int ceil_div(int64_t a, int64_t b) { return int((a + b - 1) / b); }
bool on(Toggle t, bool automatic) { return t == Toggle::Auto ? automatic : t == Toggle::On; }

// ---------------------------------------------------------------- wgmma kernel decisions
// (docs/decisions/wo-wgmma-*.md)

// Token tile: the smallest of 16 ... 256 holding M; short GEMMs (K <= 4096) with few 128-row
// tiles at M > 128 take 128 where 256 would leave the tiles short of half the SMs.
int wgmma_token_tile(int64_t M, const WoLayout& L, int sm_count, const Tuning& t, bool fill_sms) {
  const bool forced = t.wo_token_tile == 16 || t.wo_token_tile == 32 || t.wo_token_tile == 64 ||
                      t.wo_token_tile == 128 || t.wo_token_tile == 256;
  int mt = forced ? t.wo_token_tile : M <= 16 ? 16 : M <= 32 ? 32 : M <= 64 ? 64 : M <= 128 ? 128 : 256;
  const int64_t n_blocks = ceil_div(L.N, 128);
  // the output tiles at a token tile: 128-row weight blocks x token tiles
  auto tiles = [&](int tile) { return n_blocks * ceil_div(M, tile); };
  if (!forced && mt == 256 && L.K <= 4096 && tiles(256) < sm_count / 2) mt = 128;
  // conv: halve while the tiles fill fewer than a quarter of the SMs, down to 32 (H200, ResNet-50
  // 3x3 layers at batch 1 and 8: 10-25% faster, e.g. 512->512 @7 batch 8 24.9 -> 21.3 us, and
  // no layer slower; docs/cuda-conv.md), down to 64 where K > 4096: a long K loop shares out over
  // stream-K pieces better than over more token tiles, which re-read the weights (H100, 3x3
  // 512->512 @7: batch 1 13.7 -> 12.5 us, batch 8 21.6 -> 18.1 at 64 against 32;
  // bench/results/cuda_conv.md, "Token tiles on the H100")
  const int conv_floor = L.K > 4096 ? 64 : 32;
  while (!forced && fill_sms && mt > conv_floor && tiles(mt) < sm_count / 4) mt /= 2;
  // ... and on to 16 where the 16-token tiles' 64-K chunks come to at most 8 an SM: a batch-1
  // layer's few short tiles, whose fixed costs the smaller tile spreads over more SMs (H100, W4
  // g128 f16, two rounds: 3x3 128->128 @28 12.5 -> 11.8 us, 256->256 @14 12.6 -> 11.6; 256->256
  // @20, 1,800 chunks at 16, is 10% slower there; bench/results/cuda_conv.md, "Token tiles")
  if (!forced && fill_sms && mt == 32 && tiles(16) * (L.Kp / kChunkK) <= 8 * int64_t(sm_count))
    mt = 16;
  // Small linear layers (N <= 1024, K <= 4096; the 1x1 layers of a CNN run as linear calls): a
  // CTA's tile is a short K loop whose fixed costs (start, first fill, reduction, epilogue) are
  // most of its time, so more, smaller tiles beat stream-K pieces of few large ones. Halve while
  // the tiles fill fewer than half the SMs, down to 32, then to 16 below an eighth (H100, W4 / W8
  // g128 f16, 1024x256 and 2048x512 at M = 49-1568: up to 1.3x faster, e.g. 1024x256 M = 196 7.1
  // -> 5.5 us, 2048x512 M = 1568 15.6 -> 12.2; docs/decisions/wo-small-linear-layers.md).
  if (!forced && !fill_sms && L.N <= 1024 && L.K <= 4096) {
    while (mt > 32 && tiles(mt) < sm_count / 2) mt /= 2;
    if (mt == 32 && tiles(32) < sm_count / 8) mt = 16;
  }
  // Token tiles up to 64 stage two 64-wide chunks at a time; with an odd chunk count the last
  // stage holds one past K. A row-major X reads zeros there, an im2col load reads a real tap's
  // pixels, and the zero-filled weight codes of that chunk dequantize to the per-row offset, not
  // to zero (wrong sums with one scale group per row, seen on an H200): the conv takes 128 then,
  // a forced tile included.
  if (fill_sms && mt <= 64 && (L.Kp / kChunkK) % 2 == 1) mt = 128;
  return mt;
}

// W4A8: the smallest of the built tiles 16, 64, 128 holding M (128 at larger M: the stage and
// tile sums of 256 would not fit the registers), or the forced one.
int wgmma_a8_token_tile(int64_t M, const Tuning& t) {
  if (t.wo_token_tile == 16 || t.wo_token_tile == 64 || t.wo_token_tile == 128) return t.wo_token_tile;
  return M <= 16 ? 16 : M <= 64 ? 64 : 128;
}

// CTAs per SM: two at token tiles of 16 and 32 for int4 weights of 48 MB or more (24 MB in bf16
// at mt = 32): the latency-bound consumers of small tiles get four warps per scheduler.
WsShape wgmma_shape(int mt, const WoLayout& L, bool bf16, const Tuning& t) {
  if (mt > 32) return WsShape::OneCta;
  if (t.wo_ctas_per_sm == 1 || t.wo_ctas_per_sm == 2)
    return t.wo_ctas_per_sm == 1 ? WsShape::OneCta : WsShape::TwoCtas;
  const int64_t weight_bytes = L.N * L.Kp * L.bits / 8;
  const int64_t min_mib = mt == 16 || !bf16 ? 48 : 24;
  return L.bits == 4 && !L.e4m3 && weight_bytes >= (min_mib << 20) ? WsShape::TwoCtas : WsShape::OneCta;
}

// Token tile 128 (one CTA): 128-K stages (WsShape::OneCtaWide), except for linear layers with
// 8-bit codes up to K = 8192 (rule below); 64-K stages where K is short (at most 16 chunks) and the
// tiles few (at most an eighth of the SMs: the stream-K split has half as many stages to share
// out), and in an im2col conv with an odd count of 64-K chunks (the last stage would hold a chunk
// past K, which the im2col load does not zero: see wgmma_token_tile), a forced choice included.
// H100, W4 g128 f16 (bench/results/cuda_weight_only_ncu_h100.md;
// docs/decisions/wo-wgmma-stages-and-ring.md): 3-16% faster at K >= 2048 and on the batch-8 / 32
// conv layers, 16-25% slower at K = 1024 with at most 16 tiles; the rule against wo_stage_k=64 in
// one build, H200: 1.05-1.31x where it picks 128-K (bench/results/cuda_wo_stage_depth_h200.md).
WsShape wgmma_stage_shape(WsShape shape, int mt, int64_t M, const WoLayout& L, int sm_count,
                          const Tuning& t, bool im2col) {
  if (shape != WsShape::OneCta || mt != 128) return shape;
  const int64_t chunks = L.Kp / kChunkK;
  if (im2col && chunks % 2 == 1) return shape;
  if (t.wo_stage_k == 64 || t.wo_stage_k == 128)
    return t.wo_stage_k == 128 ? WsShape::OneCtaWide : shape;
  // Linear layers with 8-bit codes (int8, e4m3) keep 64-K stages up to K = 8192 (128 chunks; the
  // conv's were not measured and follow the int4 rule). H100, same build against
  // wo_stage_k=128, twelve layers x M = 128-1024, f16 and bf16: 64-K 0.96x (int8) / 0.97x (e4m3)
  // the time on geomean at K <= 8192 (down to 0.85x on 4096x6144 M = 256), 1-2% slower on every row
  // at K >= 13824 (bench/results/cuda_weight_only_ncu_h100.md, "8-bit codes"). W4 is 3-19% slower
  // at 64-K on the same rows.
  if (L.bits == 8 && !im2col && chunks <= 128) return shape;
  const int64_t tiles = int64_t(ceil_div(L.N, 128)) * ceil_div(M, mt);
  return chunks <= 16 && tiles <= sm_count / 8 ? shape : WsShape::OneCtaWide;
}

}  // namespace

int wgmma_chunks_per_stage(WsShape shape, int mt) {
  if (shape == WsShape::TwoCtas) return ws_detail::WsConfig<16, WsShape::TwoCtas>::kCps;
  if (shape == WsShape::OneCtaWide) return ws_detail::WsConfig<128, WsShape::OneCtaWide>::kCps;
  return mt <= 64    ? ws_detail::WsConfig<64, WsShape::OneCta>::kCps
         : mt <= 128 ? ws_detail::WsConfig<128, WsShape::OneCta>::kCps
                     : ws_detail::WsConfig<256, WsShape::OneCta>::kCps;
}

namespace {

// The bf16 integer-zero path: int4 / int8 codes with integer zeros, groups of >= 64 and the packed
// pairs built; int8 at every token tile, int4 from mt = 32 on and at 16 where the fold does not
// apply.
bool wgmma_bf16_zero(const WoWeight& w, int mt, int cps, const Tuning& t) {
  const int codes = w.L.code_kind();
  if ((codes != kCodesU4 && codes != kCodesU8) || !w.int_zero || w.group_shift < 6 || !w.bf16_zero_pairs)
    return false;
  if (t.wo_bf16_zero != Toggle::Auto) return t.wo_bf16_zero == Toggle::On;
  if (codes == kCodesU8) return true;
  const bool folds = t.wo_fold != Toggle::Off && w.group_shift >= ws_detail::ws_stage_shift(cps);
  return mt >= 32 || !folds;
}

}  // namespace

int w4a8_factor_zero(const WoLayout& L, const Tuning& t) {
  return L.fp8_act && L.a8_zero >= 0 && t.wo_a8_shared_zero != Toggle::Off ? L.a8_zero : -1;
}

// Scale after the MMA where the stage is one group with an integer zero and the per-register path
// would go through f32 (or on the f16x2 path for int4 at mt = 16 on weights of 16 MB or more).
bool wgmma_fold(const WoWeight& w, int x_type, int mt, int cps, sm90::PairPath pp, const Tuning& t) {
  const int codes = w.L.code_kind();
  const bool foldable = pp == sm90::PairPath::F32 && mt <= 64 && mt != 32 &&
                        !(x_type == kIoBf16 && codes != kCodesU4);
  const bool foldable_half = pp == sm90::PairPath::Half && mt == 16 && codes == kCodesU4;
  if (!(foldable || foldable_half)) return false;
  if (!w.int_zero || w.group_shift < ws_detail::ws_stage_shift(cps) || t.wo_fold == Toggle::Off) return false;
  if (foldable_half) return on(t.wo_fold_half, w.L.N * w.L.Kp / 2 >= (int64_t(16) << 20));
  return true;
}

// K split over a thread-block cluster (sm90_wo_ws_k_split.cuh) where the instantiation has it
// (ws_k_split_built: token tiles up to 32, 64 without the fold) and the device runs clusters:
// Tuning::wo_k_split 2, 4 or 8 forces that split, halved while K has fewer iterations. The
// automatic choice is the stream-K schedule (1): measured on the H100 (W4 g128 f16; the split's
// rule in `docs/decisions/wo-wgmma-k-split-cluster.md`), a split with as many CTAs as stream-K
// was faster on one batch-1 layer (1x1 1024->256 @14, cold L2: 10.5 -> 9.4 us) and slower on
// others (1x1 512->256 @20 9.5 -> 10.6 us; 512x256 and 4096x1024 linear calls 10-25%), and one
// with fewer CTAs was 1.4-2.4x slower: the consumers' K loop is issue-bound per CTA, and clusters
// of 4 and 8 fit only 120 of the 132 SMs.
int wgmma_k_split(int iterations, int mt, bool fold, bool clusters, const Tuning& t) {
  if (!ws_detail::ws_k_split_built(mt, fold, false) || !clusters || t.wo_k_split <= 1) return 1;
  int split = t.wo_k_split;
  while (split > iterations) split /= 2;
  return split;
}

namespace {

// The TMA-store epilogue where the output is 16-bit and TMA can store it; 0 (direct stores)
// elsewhere.
int wgmma_y_rows(const WoCall& c, int mt, const Tuning& t) {
  if (!c.y_tma || (c.y_type != kIoF16 && c.y_type != kIoBf16)) return 0;
  return wgmma_y_rounds(mt, t.wo_y_rows);
}

// Where the cut tiles are summed: by their owner inside the kernel (mt <= 32; mt = 64 and grids
// that are all stream-K when a cut tile has at most ~2.5 pieces; 128-token tiles of an all
// stream-K grid over K <= 4096 with at most ~4.25 pieces of at least 12 64-K chunks each), else
// by the fixup kernel. The short-K case: the owner's wait for the other pieces is short, and the
// fixup kernel's launch and second pass over the partials are not (4096x4096 / 4096x6144 at
// M = 128, ~4.1 / 2.75 pieces of ~15 / ~23 chunks: 4-9% faster inline on the H100; at M = 80 /
// 128 1-7% on the H200). Shorter pieces lose: 2048x2048 at M = 128, 4 pieces of 8 chunks, 10.2 µs
// inline against 8.5 with the fixup kernel (H200); the owner then waits for pieces that started
// with it and reads their partials alone. More pieces were not measured. Measured on the linear
// layers only: the convolution's implicit GEMM (`conv`) keeps the 2.5-piece rule
// (docs/decisions/wo-wgmma-stream-k-reduction.md).
bool wgmma_inline_reduce(const StreamKSchedule& s, int mt, bool conv, const Tuning& t) {
  if (t.wo_reduce != Tuning::Reduce::Auto) return t.wo_reduce == Tuning::Reduce::Inline;
  const int64_t tile_chunks = int64_t(s.chunks) * s.cps;  // 64-K chunks of a tile
  const bool short_k_linear = !conv && mt == 128 && tile_chunks * kChunkK <= 4096 &&
                              tile_chunks * s.sk_tiles >= 12 * int64_t(s.sk_ctas);
  // the most pieces a cut tile may have, times 4: 2.5, or ~4.25 for the short-K linear case
  const int64_t max_pieces_x4 = short_k_linear ? 17 : 10;
  const bool few_pieces = 4 * int64_t(s.sk_ctas) <= max_pieces_x4 * s.sk_tiles;
  return mt <= 32 || (mt == 64 && few_pieces) || (s.dp_tiles == 0 && few_pieces);
}

template <int MT, int CODES, WsShape SHAPE>
int ring_stages_of(uint32_t p_stage, uint32_t y_bytes, int max_stages) {
  return ws_detail::ws_ring_stages<MT, CODES, SHAPE>(p_stage, y_bytes, max_stages);
}
template <int MT>
int ring_stages_mt(int bits, WsShape shape, uint32_t p_stage, uint32_t y_bytes, int max_stages) {
  if constexpr (MT == 16 || MT == 64 || MT == 128) {
    if (bits == kCodesU4F8) return ring_stages_of<MT, kCodesU4F8, WsShape::OneCta>(p_stage, y_bytes, max_stages);
  }
  if constexpr (MT == 128) {
    if (shape == WsShape::OneCtaWide)
      return bits == 4 ? ring_stages_of<MT, 4, WsShape::OneCtaWide>(p_stage, y_bytes, max_stages)
                       : ring_stages_of<MT, 8, WsShape::OneCtaWide>(p_stage, y_bytes, max_stages);
  }
  if constexpr (MT <= 32) {
    if (shape == WsShape::TwoCtas)
      return bits == 4 ? ring_stages_of<MT, 4, WsShape::TwoCtas>(p_stage, y_bytes, max_stages)
                       : ring_stages_of<MT, 8, WsShape::TwoCtas>(p_stage, y_bytes, max_stages);
  }
  return bits == 4 ? ring_stages_of<MT, 4, WsShape::OneCta>(p_stage, y_bytes, max_stages)
                   : ring_stages_of<MT, 8, WsShape::OneCta>(p_stage, y_bytes, max_stages);
}
// The ring depth of the instantiation (token tile, 4- or 8-bit layout or kCodesU4F8, shape).
int ring_stages(int mt, int bits, WsShape shape, uint32_t p_stage, uint32_t y_bytes, int max_stages) {
  switch (mt) {
    case 16: return ring_stages_mt<16>(bits, shape, p_stage, y_bytes, max_stages);
    case 32: return ring_stages_mt<32>(bits, shape, p_stage, y_bytes, max_stages);
    case 64: return ring_stages_mt<64>(bits, shape, p_stage, y_bytes, max_stages);
    case 128: return ring_stages_mt<128>(bits, shape, p_stage, y_bytes, max_stages);
    case 192: return ring_stages_mt<192>(bits, shape, p_stage, y_bytes, max_stages);  // grouped only
    case 256: return ring_stages_mt<256>(bits, shape, p_stage, y_bytes, max_stages);
  }
  MIXQ_FAIL(ErrorCode::Internal, "wo plan: no wgmma configuration for token tile ", mt);
}

void plan_wgmma(WoPlan& p, const WoCall& c, const WoWeight& w, const DeviceCaps& caps, const Tuning& t) {
  const WoLayout& L = w.L;
  const int64_t M = c.M;
  // W4A8: its own tile rule, one CTA, 128-K stages, always the fold on f32 pairs, e4m3 activations
  const bool a8 = L.fp8_act;
  const int mt = a8 ? wgmma_a8_token_tile(M, t) : wgmma_token_tile(M, L, caps.sm_count, t, c.fill_sms);
  const WsShape shape = a8 ? WsShape::OneCta
                           : wgmma_stage_shape(wgmma_shape(mt, L, c.x_type == kIoBf16, t), mt, M, L,
                                               caps.sm_count, t, c.fill_sms);
  const int cps = a8 ? 2 : wgmma_chunks_per_stage(shape, mt);
  const sm90::PairPath pp = a8 ? sm90::PairPath::F32 : wgmma_pair_path(w, c.x_type, mt, cps, t);
  const bool fold = a8 || wgmma_fold(w, c.x_type, mt, cps, pp, t);
  const int ctas = shape == WsShape::TwoCtas ? 2 : 1;
  p.id.family = Family::WoWgmma;
  p.id.act = uint8_t(a8 ? 3 : c.x_type);
  p.id.codes = uint8_t(L.code_kind());
  p.id.tile_m = uint16_t(mt);
  p.id.ctas = uint8_t(ctas);
  p.id.pairs = PairKind(int(pp));
  p.id.fold = fold;
  p.id.wide = shape == WsShape::OneCtaWide;
  p.m_blocks = ceil_div(M, mt);
  p.n_blocks = ceil_div(L.N, 128);
  p.chunks_per_stage = cps;
  const int chunks = int(L.Kp / kChunkK);
  p.chunks_per_split = chunks;
  p.gather_bytes = a8 ? wo_a8_act_bytes(M, L.K)
                      : w.gather ? size_t(M * round_up(L.K, 8) * (c.x_type == kIoF32 ? 4 : 2)) : 0;

  // Programmatic dependent launch and the weight stages loaded before the dependency wait
  // (docs/decisions/wo-wgmma-pdl-early-stages.md): PDL with the whole ring early where the launch
  // is bound by the weight stream, PDL alone past M = 64 on weights below 96 MiB.
  const int64_t mib = L.packed_bytes() >> 20;
  const bool stream_bound = M <= 64 && (L.bits == 8 ? mib >= 32 : M <= 16 && mib >= 48);
  const bool short_compute = M > 64 && mib < 96;
  // weights below 4 MiB at any M: the launch is mostly start-up and fill, which PDL overlaps with
  // the previous grid's tail (H100, 1024x256 / 2048x512 W4 M = 49: 8.7 -> 7.5 / 9.4 -> 6.8 us)
  const bool small_weights = mib < 4;
  p.pdl = on(t.wo_wgmma_pdl, stream_bound || short_compute || small_weights);

  StreamKSchedule& s = p.sched;
  const int mode = t.wo_schedule == Tuning::Schedule::WholeTiles ? 1 : t.wo_schedule == Tuning::Schedule::StreamK ? 2 : 0;
  const int iterations = ceil_div(chunks, cps);
  const int split = wgmma_k_split(iterations, mt, fold, caps.stream_clusters, t);
  s = split > 1 ? make_k_split_schedule(p.n_blocks, p.m_blocks, iterations, split, cps)
                : make_stream_k_schedule(p.n_blocks, p.m_blocks, iterations, caps.sm_count * ctas,
                                         mt, mode, cps);
  s.early_stages = t.wo_early_stages >= -1 ? t.wo_early_stages : (p.pdl && stream_bound ? -1 : 0);
  s.max_stages = t.wo_max_stages;
  if (t.wo_group_n > 0) s.group_n = t.wo_group_n;
  s.inline_reduce = split == 1 && wgmma_inline_reduce(s, mt, c.fill_sms, t);
  p.fixup = split == 1 && !s.inline_reduce && stream_k_split_pieces(s) > 0;
  // the TMA-store epilogue only where its staging tiles leave a ring of at least 4 stages
  const int y_rows = wgmma_y_rows(c, mt, t);
  const uint32_t p_stage =
      ws_detail::ws_stage_meta_bytes(ws_detail::ws_stage_pair_bytes(pp, L.pair_f32, w.group_shift, cps), mt, a8);
  const int layout = a8 ? kCodesU4F8 : L.bits;
  s.y_rows = ring_stages(mt, layout, shape, p_stage, ws_detail::ws_y_stage_bytes(y_rows), s.max_stages) >= 4 ? y_rows : 0;
  MIXQ_CHECK(ring_stages(mt, layout, shape, p_stage, ws_detail::ws_y_stage_bytes(s.y_rows), s.max_stages) >= 2,
             ErrorCode::Internal, "wo plan: the wgmma kernel's ring holds fewer than 2 stages");
  p.partial_floats = size_t(ws_partial_floats(caps.sm_count, mt));
  // Only the inline reduction of cut tiles reads flags; whole tiles and the fixup kernel never
  // touch them, so those plans own none and no call clears any for them.
  p.tickets = s.inline_reduce ? size_t(ws_flags(caps.sm_count, mt)) : 0;
  MIXQ_CHECK(!s.inline_reduce || int64_t(s.sk_tiles) * kStreamKFlagsPerTile <= int64_t(p.tickets),
             ErrorCode::Internal, "wo plan: ", s.sk_tiles, " stream-K tiles need more flags than ", p.tickets);
}

void plan_dequant_cublas(WoPlan& p, const WoCall& c, const WoWeight& w, const Tuning& t) {
  const WoLayout& L = w.L;
  p.id.family = Family::WoDequantCublas;
  p.id.act = uint8_t(c.x_type);
  const int64_t elem = c.x_type == kIoF32 ? 4 : 2;
  const size_t chunk_cap = dequant_chunk_cap(t);
  p.chunk_rows = dequant_chunk_rows(L.Np, size_t(L.Kp * elem), chunk_cap, kTileRows);
  p.chunk_bytes = size_t(p.chunk_rows * L.Kp * elem);
  p.gather_bytes = w.gather ? size_t(c.M * L.K * elem) : 0;
  const bool y_direct = c.y_type == c.x_type || c.y_type == kIoF32;
  p.out_bytes = y_direct ? 0 : size_t(c.M * L.N * 4);
}

// The streaming kernel (docs/decisions/wo-stream-splits-cluster-pdl.md): K split so that every
// block is resident at once, splits reduced in a cluster where every cluster of the grid fits at
// once, programmatic dependent launch where the grid fills >= 80% of the block slots or runs short
// splits.
void plan_stream(WoPlan& p, const WoCall& c, const WoWeight& w, const DeviceCaps& caps, const Tuning& t) {
  const WoLayout& L = w.L;
  const int64_t M = c.M;
  const bool x_f32 = c.x_type == kIoF32;
  const int mt = M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : 64;
  p.id.family = Family::WoStream;
  p.id.act = uint8_t(c.x_type);
  p.id.codes = uint8_t(L.code_kind());
  p.id.tile_m = uint16_t(mt);
  p.id.fine = w.group_shift < 6;  // groups shorter than a chunk: the per-tile fold test
  p.m_blocks = ceil_div(M, mt);
  const int n_tiles = ceil_div(L.N, kTileRows);
  const int rt = wo_row_tiles(mt, L.bits, x_f32);
  p.n_blocks = ceil_div(n_tiles, kStreamWarpsPlan * rt);
  const int chunks = int(L.Kp / kChunkK);

  p.x_rows = int(std::min<int64_t>(mt, M));
  const int sx = x_f32 ? 2 : 1;
  auto smem_for = [&](int stage_chunks) {
    // activations (+ zero row; StreamSmem in kernels/wo/sm80_wo_stream.cuh), hi and lo planes
    // for f32 activations
    const int64_t kr = int64_t(stage_chunks) * kChunkK;
    return (size_t(p.x_rows) * size_t(kr + 8) + kChunkK + 8) * 2 * sx;
  };
  const int blocks_per_sm = t.wo_stream_blocks_per_sm > 0 ? t.wo_stream_blocks_per_sm : wo_stream_resident_blocks(mt, L.bits);
  const size_t budget = std::min<size_t>(caps.smem_per_block_optin, caps.smem_per_sm / size_t(blocks_per_sm) - 1024);

  const int min_chunks = t.wo_stream_min_chunks > 0 ? t.wo_stream_min_chunks : 4;
  const int64_t base = int64_t(p.n_blocks) * p.m_blocks;
  const int64_t resident = int64_t(caps.sm_count) * blocks_per_sm;
  int splits = int(std::max<int64_t>(1, resident / base));
  splits = std::min(splits, std::max(1, chunks / min_chunks));
  auto set_splits = [&](int s) {
    p.chunks_per_split = ceil_div(chunks, s);
    p.splits = ceil_div(chunks, p.chunks_per_split);
  };
  set_splits(splits);
  bool cluster = false;
  if (caps.stream_clusters && p.splits > 1) {
    if (t.wo_stream_cluster == Toggle::On) {
      cluster = true;
      set_splits(std::min(splits, kStreamMaxClusterSplits));
    } else if (t.wo_stream_cluster == Toggle::Auto && p.splits <= kStreamMaxClusterSplits) {
      const int b = std::min(blocks_per_sm, DeviceCaps::kMaxClusterBlocksPerSm);
      cluster = base <= caps.cluster_capacity[b][p.splits];
    }
  }
  if (!cluster) {
    const int64_t cap = int64_t(kMaxPartialFloats / size_t(std::max<int64_t>(1, M * L.N)));
    set_splits(int(std::max<int64_t>(1, std::min<int64_t>(p.splits, cap))));
  }
  p.cluster = cluster && p.splits > 1;
  const bool fills = base * p.splits * 5 >= resident * 4;  // >= 80% of the block slots
  const bool short_split = p.chunks_per_split <= kStreamPdlMaxFreeChunks;
  p.pdl = caps.stream_clusters && on(t.wo_stream_pdl, fills || short_split);
  // Stage as much of the split's K range as fits the budget (ideally all of it: one barrier).
  int stage = 1;
  for (int s = p.chunks_per_split; s >= 1; --s) {
    if (smem_for(s) <= budget) { stage = s; break; }
  }
  p.chunks_per_stage = stage;
  p.smem_bytes = smem_for(stage);
  // after the K loop the same memory holds the block's output tile of the cluster reduction
  if (p.cluster)
    p.smem_bytes = std::max(p.smem_bytes, size_t(kStreamWarpsPlan) * rt * kTileRows * p.x_rows * 4);
  const bool global_partials = p.splits > 1 && !p.cluster;
  p.partial_floats = global_partials ? size_t(p.splits) * size_t(M) * size_t(L.N) : 0;
  p.tickets = global_partials ? size_t(base) : 0;
}

}  // namespace

sm90::PairPath wgmma_pair_path(const WoWeight& w, int x_type, int mt, int cps, const Tuning& t) {
  if (x_type == kIoF16) return w.L.pair_f32 ? sm90::PairPath::F32 : sm90::PairPath::Half;
  return wgmma_bf16_zero(w, mt, cps, t) ? sm90::PairPath::Bf16Zero : sm90::PairPath::F32;
}

int wgmma_y_rounds(int mt, int knob) {
  int rows = mt >= 128 ? 128 : 0;
  if (knob >= 0) {
    rows = 0;
    if (knob > 0)
      for (rows = 16; rows * 2 <= std::min(knob, mt);) rows *= 2;
  }
  while (rows > 16 && mt % rows != 0) rows /= 2;  // 192-token tiles: rounds of 64
  return std::min(rows, mt);
}

int wgmma_ring_stages(int mt, int bits, bool two_ctas, uint32_t p_stage, uint32_t y_bytes, int max_stages) {
  return ring_stages(mt, bits, two_ctas ? WsShape::TwoCtas : WsShape::OneCta, p_stage, y_bytes, max_stages);
}

int64_t stream_max_m(bool x_f32) {
  // dequantize + cuBLAS takes over past these M without the wgmma kernel; f32 activations run two
  // MMAs per tile (hi / lo split), so earlier (docs/decisions/wo-kernel-boundaries.md)
  return x_f32 ? 16 : 32;
}

int64_t stream_max_m_wgmma(const WoLayout& L, int sm_count) {
  // Where the streaming kernel hands over to the wgmma kernel: later where the wgmma kernel has few
  // 128-row tiles for the SMs (stream-K cuts every tile), from M = 3 (W4) or even M = 1 (W8) where it
  // has more than two waves of tiles (docs/decisions/wo-kernel-boundaries.md).
  const int64_t mib = L.packed_bytes() >> 20;
  const int64_t tiles = (L.N + 127) / 128;
  if (L.bits == 4) {
    if (mib <= 10) return 6;
    if (mib <= 48) return 8;
    if (tiles < sm_count) return 6;
    if (tiles <= 2 * sm_count) return mib <= 96 ? 4 : 3;
    return 2;
  }
  if (mib <= 20) return 4;
  if (tiles < sm_count) return mib <= 96 ? 6 : 3;
  return tiles <= 2 * sm_count ? 1 : 0;
}

int choose_splits(int64_t tiles, int sm_count, int chunks, int max_splits) {
  int best = 1;
  double best_eff = 0;
  for (int s = 1; s <= max_splits && s * 4 <= std::max(chunks, 4); ++s) {
    const int64_t ctas = tiles * s;
    const int64_t waves = (ctas + sm_count - 1) / sm_count;
    // 2% per extra split for the partial-sum traffic and the reduction
    const double eff = double(ctas) / double(waves * sm_count) * (1.0 - 0.02 * (s - 1));
    if (eff > best_eff + 1e-9) { best_eff = eff; best = s; }
  }
  return best;
}

WoPlan plan_weight_only(const WoCall& c, const WoWeight& w, const DeviceCaps& caps, const Tuning& t,
                        const std::string& force) {
  MIXQ_CHECK_ARG(force.empty() || force == "sm80_wo_stream" || force == "sm90_wo_ws" || force == "wo_dequant_cublas",
                 "force_kernel '", force, "' is not one of sm80_wo_stream, sm90_wo_ws, wo_dequant_cublas");
  MIXQ_CHECK(force != "sm90_wo_ws" || caps.sm90a, ErrorCode::Unsupported,
             "force_kernel 'sm90_wo_ws' needs an sm_90a build on a Hopper GPU");
  MIXQ_CHECK_ARG(c.M >= 1, "wo plan: M (", c.M, ") must be >= 1");
  if (w.L.fp8_act) {  // W4A8: only the wgmma kernel multiplies e4m3 activations
    MIXQ_CHECK(caps.sm90a, ErrorCode::Unsupported, "W4A8 (4-bit weights x e4m3 activations) needs an sm_90a "
               "build on a Hopper GPU (FP8 wgmma); use the cpu backend");
    MIXQ_CHECK_ARG(force.empty() || force == "sm90_wo_ws", "force_kernel '", force, "': W4A8 weights run only "
                   "sm90_wo_ws");
    WoPlan p;
    plan_wgmma(p, c, w, caps, t);
    return p;
  }
  const bool x_f32 = c.x_type == kIoF32;
  // The wgmma kernel takes 16-bit activations with 16-byte aligned rows (TMA), or gathered ones;
  // a forced wgmma kernel that cannot serve this call falls back to the measured rule.
  const bool wgmma_ok = caps.sm90a && !x_f32 && (c.x_aligned || w.gather);
  const std::string f = force == "sm90_wo_ws" && !wgmma_ok ? std::string() : force;
  WoPlan p;
  const int64_t stream_max = wgmma_ok ? stream_max_m_wgmma(w.L, caps.sm_count) : stream_max_m(x_f32);
  const bool stream = f == "sm80_wo_stream" || (f.empty() && c.M <= stream_max);
  const bool big_gemm = w.L.K >= 8192 && w.L.N * w.L.K >= (int64_t(128) << 20);
  const bool y16 = c.y_tma && (c.y_type == kIoF16 || c.y_type == kIoBf16);
  const bool wgmma = f == "sm90_wo_ws" ||
                     (f.empty() && wgmma_ok && (y16 || c.M <= kWgmmaMaxM || (big_gemm && c.M <= kWgmmaBigMaxM)));
  if (!stream && wgmma) plan_wgmma(p, c, w, caps, t);
  else if (!stream) plan_dequant_cublas(p, c, w, t);
  else plan_stream(p, c, w, caps, t);
  return p;
}

WoWorkspaceOffsets wo_workspace_offsets(const WoPlan& p) {
  WoWorkspaceOffsets o;
  o.tickets = align256(p.partial_floats * 4);
  o.chunk = o.tickets + align256(p.tickets * 4);
  o.gather = o.chunk + align256(p.chunk_bytes);
  o.out = o.gather + align256(p.gather_bytes);
  return o;
}

std::string wo_plan_name(const WoPlan& p) {
  std::string s = p.id.name();
  if (p.id.family == Family::WoWgmma && p.sched.k_split > 1 && !s.empty() && s.back() == '>')
    s.insert(s.size() - 1, ",ksplit" + std::to_string(p.sched.k_split));
  return s;
}

size_t wo_workspace_bytes(const WoPlan& p) { return wo_workspace_offsets(p).out + align256(p.out_bytes); }

size_t wo_a8_factors_offset(int64_t M, int64_t K) { return align256(size_t(M * act_row_pitch(K))); }
size_t wo_a8_act_bytes(int64_t M, int64_t K) {
  return wo_a8_factors_offset(M, K) + size_t((K + 127) / 128 * act_meta_pitch(M)) * 8;
}

WoWorkspaceBound wo_max_workspace(const WoWeight& w, const DeviceCaps& caps, const Tuning& t, int64_t max_m,
                                  bool staged_output) {
  const WoLayout& L = w.L;
  const size_t M = size_t(std::max<int64_t>(1, max_m));
  WoWorkspaceBound b;
  // The streaming kernel: global partials capped at kMaxPartialFloats, one ticket per (block of
  // rows, token tile) of its grid, at most every 16-row tile times every 8-token tile.
  const size_t stream_tickets = size_t(ceil_div(L.N, kTileRows)) * size_t(ceil_div(int64_t(M), 8));
  b.tickets = stream_tickets;
  b.bytes = align256(kMaxPartialFloats * 4) + align256(stream_tickets * 4);
  // The wgmma kernel: two stream-K slots of 128 x mt floats per CTA, flags, X gathered (16-bit).
  if (caps.sm90a)
    for (int mt : {16, 32, 64, 128, 256})
      if (mt <= 16 || size_t(mt) / 2 < M || t.wo_token_tile == mt) {
        const size_t flags = size_t(ws_flags(caps.sm_count, mt));
        const size_t gather =
            L.fp8_act ? wo_a8_act_bytes(int64_t(M), L.K) : w.gather ? M * size_t(round_up(L.K, 8)) * 2 : 0;
        b.tickets = std::max(b.tickets, flags);
        b.bytes = std::max(b.bytes, align256(size_t(ws_partial_floats(caps.sm_count, mt)) * 4) +
                                        align256(flags * 4) + align256(gather));
      }
  // Dequantize + cuBLAS: one chunk of W in the activation type (whole rows: the largest of the
  // 16-bit and f32 chunks), X gathered, Y staged in f32.
  const size_t chunk_cap = dequant_chunk_cap(t);
  size_t chunk = 0;
  for (size_t elem : {size_t(2), size_t(4)}) {
    const size_t row_bytes = size_t(L.Kp) * elem;
    chunk = std::max(chunk, size_t(dequant_chunk_rows(L.Np, row_bytes, chunk_cap, kTileRows)) * row_bytes);
  }
  const size_t gather = w.gather ? M * size_t(L.K) * 4 : 0;
  const size_t out = staged_output ? M * size_t(L.N) * 4 : 0;
  b.bytes = std::max(b.bytes, align256(chunk) + align256(gather) + align256(out));
  return b;
}

}  // namespace mixq::cuda
