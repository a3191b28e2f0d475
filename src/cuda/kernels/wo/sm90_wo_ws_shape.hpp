// Shape of the warp-specialized Hopper weight-only kernel (kernels/wo/sm90_wo_ws.cuh) per
// configuration: CTAs per SM, chunks per stage, register buffers and budgets, the shared-memory
// ring and the TMA-store staging tiles. Plain C++ (host and device): the planner
// (dispatch/wo_plan.cpp) sizes the launch from the same numbers the kernel is compiled with.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cuda/kernels/common/sm90_pair_path.hpp"
#include "cuda/kernels/common/stream_k.hpp"
#include "cuda/kernels/common/wo_layout.hpp"

namespace mixq::cuda {

// Named (not anonymous) so that the host pass does not warn about the tile constants only the
// device code reads.
namespace ws_detail {

constexpr int kWsRowTiles = 8;       // 16-row weight tiles per CTA (128 rows)
constexpr int kWsThreads = 384;      // producer + 2 consumer warpgroups
// Pairs of a 64-K chunk: [group of the chunk (at most 4: groups of >= 16)][128 rows] x 4 / 8 bytes.
// (Before: 128 per-row cp.async into 40-byte row slots; their latency cost 10-17% at M >= 256.)
constexpr int kMaxPairGroups = 4;
constexpr size_t kWsSmemBudget = 227 * 1024;

// Shape of the consumer work, per token tile (WsConfig):
// - chunks per stage: every stage costs a consumer warp a fixed ~70 instructions (barrier wait
//   and release, descriptors, loop) besides its 16 dequantized registers per 64-K chunk, and with
//   two consumer warps per scheduler a warp issues only every ~4.6 cycles (H100 W4 M = 16, ncu
//   source counters: docs/decisions/wo-wgmma-stages-and-ring.md); two chunks per stage halve that
//   floor per byte. Token tile 256 keeps one chunk: its accumulators leave no registers for two
//   32-register A buffers; token tile 128 has both (OneCta: 64-K, OneCtaWide: 128-K with one
//   accumulator set; the plan picks by K and tile count).
// - CTAs per SM: two CTAs give the latency-bound consumers of small tiles four warps per
//   scheduler, each CTA with half the shared memory and registers (104 per consumer thread).
// - A register buffers: two let the dequantization of stage i overlap the MMAs of stage i - 1;
//   one (wait for the MMAs before the next stage) leaves the overlap to the other warpgroups.
//   Two CTAs need the single buffer: with two, ptxas serializes the wgmmas (C7512, too few
//   registers); two CTAs with 64-K stages and two buffers measured 4-20% slower than one CTA.
// OneCtaWide: one CTA with 128-K stages (two chunks) at token tile 128, whose OneCta stages are
// 64-K: the fixed per-stage chain (barrier wait, code loads, dequantization, descriptors) is paid
// once per 128 K (docs/decisions/wo-wgmma-stages-and-ring.md).
enum class WsShape { OneCta, TwoCtas, OneCtaWide };
// log2 of a stage's K (64 per chunk)
MIXQ_HD constexpr int ws_stage_shift(int chunks_per_stage) { return chunks_per_stage == 2 ? 7 : 6; }
// Groups (of 2^group_shift) whose pairs one stage loads: one when a group covers the stage.
MIXQ_HD constexpr int ws_stage_groups(int chunks_per_stage, int group_shift) {
  return group_shift >= ws_stage_shift(chunks_per_stage) ? 1 : 1 << (ws_stage_shift(chunks_per_stage) - group_shift);
}
// Ring depth the shared memory reserves barriers for (Tuning::wo_max_stages may ask for this many).
constexpr int kWsRingMaxStages = 24;
// Named barriers of the TMA-store epilogue, one per consumer warpgroup (0 is __syncthreads, 1 the
// stream-K piece barrier: sm90_wo_stream_k_reduce.cuh).
constexpr int kWsEpilogueBarrier0 = 2;
template <int MT, WsShape SHAPE>
struct WsConfig {
  static constexpr int kCtas = SHAPE == WsShape::TwoCtas ? 2 : 1;
  static constexpr int kCps = SHAPE == WsShape::TwoCtas || SHAPE == WsShape::OneCtaWide ? 2
                              : MT <= 64                                                ? 2
                                                                                        : 1;
  static_assert(SHAPE != WsShape::OneCtaWide || MT == 128,
                "128-K stages are built at token tile 128 only");
  static constexpr int kBufs = SHAPE == WsShape::TwoCtas ? 1 : 2;
  static_assert(kCtas <= ws_max_ctas_per_sm(MT), "the stream-K workspace is sized for fewer CTAs");
};

// W4A8 (kCodesU4F8, e4m3 activations): a stage is always two chunks, 128 K, one weight group and
// one activation block, so that the fold applies both scales once per stage; two A register
// buffers (at token tiles of 128 with one set of stage sums: sm90_wo_ws.cuh).
template <int MT, int CODES, WsShape SHAPE>
struct WsTile {
  static constexpr bool kA8 = CODES == kCodesU4F8;
  static constexpr int BITS = CODES == 4 || kA8 ? 4 : 8;  // e4m3 (kCodesE4M3) uses the 8-bit layout
  static constexpr int kCtas = WsConfig<MT, SHAPE>::kCtas;
  static constexpr int kCps = kA8 ? 2 : WsConfig<MT, SHAPE>::kCps;
  static constexpr int kBufs = kA8 ? 2 : WsConfig<MT, SHAPE>::kBufs;
  // registers per thread: the launch-bound share (65536 / 384 / kCtas, a multiple of 8); the
  // producer gives all but 24 (1 CTA: 56, its address arithmetic spills below) away, the
  // consumers take what that frees
  static constexpr int kRegs = (65536 / (kWsThreads * kCtas)) / 8 * 8;
  static constexpr int kProducerRegs = kCtas == 1 ? 56 : 24;
  static constexpr int kConsumerRegs = std::min(256, (kRegs + (kRegs - kProducerRegs) / 2) / 8 * 8);
  // one swizzled [MT][64] 16-bit box (1024-byte multiple); W4A8: half of the stage's one [MT][128]
  // e4m3 box (the same 128-byte swizzled rows)
  static constexpr int kXBytes = MT * kChunkK * (kA8 ? 1 : 2);
  static constexpr int kTileBytes = 32 * (BITS == 4 ? 16 : 32);  // one 16x64 packed tile
  static constexpr int kXStage = kCps * kXBytes;
  static constexpr int kWStage = kWsRowTiles * kCps * kTileBytes;  // [row tile][chunk][tile]
  // pairs of a stage at most (groups of 16, f32 pairs); a launch sizes its ring for its own
  // (ws_stages: W4 g128 f16 pairs take 512 bytes a stage, not 8 KB, so the ring is deeper)
  static constexpr int kPStageMax = kCps * kMaxPairGroups * kWsRowTiles * kTileRows * 8 + (kA8 ? (MT + 2) * 8 : 0);
  // Deeper is not faster (H100, a sweep of the ring cap, docs/decisions/wo-wgmma-stages-and-ring.md):
  // W4 M = 16 on 14336x21504 with two CTAs takes 66.7 us at 4 stages a CTA, 69 at 8-24; W8 M = 4
  // 113.5 at 8, 120.7 at 24; fewer than 4 (one CTA: 6) lose up to 20%.
  // Tuning::wo_max_stages caps it (up to 24: the barriers reserved).
  static constexpr int kMaxStages = kCtas == 2 ? 4 : 8;
  // this CTA's share of the SM's shared memory; the ring (as deep as fits, at most kMaxStages:
  // more weight bytes in flight per SM), then 2 barriers per stage
  static constexpr size_t kSmem = kWsSmemBudget / kCtas / 1024 * 1024;
  static constexpr size_t kRingBytes = kSmem - 1024 - 2 * 8 * kWsRingMaxStages;
  static_assert(kRingBytes / (kXStage + kWStage + kPStageMax) >= 3, "ring too shallow");
};

// Bytes per (s, o') pair in the stage ring: half2 (Half), the packed bf16 word (Bf16Zero), else
// float2 or half2.
MIXQ_HD constexpr uint32_t ws_pair_bytes(sm90::PairPath pp, bool pair_f32) {
  return pp == sm90::PairPath::Half || pp == sm90::PairPath::Bf16Zero ? 4u : (pair_f32 ? 8u : 4u);
}
// The pairs of a stage: its groups x 128 rows.
MIXQ_HD constexpr uint32_t ws_stage_pair_bytes(sm90::PairPath pp, bool pair_f32, int group_shift, int cps) {
  return uint32_t(ws_stage_groups(cps, group_shift) * kWsRowTiles * kTileRows) * ws_pair_bytes(pp, pair_f32);
}
// W4A8: the activations' block factors a stage loads, one 8-byte (512 s, -s sum) pair per token:
// mt + 2 of them from the even token at or before the tile's first (a TMA box must start on a
// 16-byte boundary of the row; a grouped tile's first row is any row).
MIXQ_HD constexpr uint32_t ws_a8_factor_box(int mt) { return uint32_t(mt) + 2u; }
// A stage's metadata slot: its pairs (128-byte aligned), then for W4A8 the factors' box.
MIXQ_HD constexpr uint32_t ws_stage_meta_bytes(uint32_t pair_bytes, int mt, bool a8) {
  return ((pair_bytes + 127u) & ~127u) + (a8 ? ((ws_a8_factor_box(mt) * 8u + 127u) & ~127u) : 0u);
}
// The output staging tile of one consumer warpgroup in the TMA-store epilogue: [y_rows tokens][64
// rows] 16-bit, 128-byte rows in the 128-byte swizzle (a 1024-byte multiple); none without it.
MIXQ_HD constexpr uint32_t ws_y_stage_bytes(int y_rows) { return uint32_t(y_rows) * 128u; }
// Ring depth: as deep as the shared memory left by the two staging tiles holds stages (pairs
// p_stage bytes, TMA destinations 128-byte aligned), at most kMaxStages (or max_stages, a knob).
template <int MT, int CODES, WsShape SHAPE>
MIXQ_HD int ws_ring_stages(uint32_t p_stage, uint32_t y_bytes, int max_stages) {
  using Tile = WsTile<MT, CODES, SHAPE>;
  const int cap = max_stages > 0 ? (max_stages < kWsRingMaxStages ? max_stages : kWsRingMaxStages) : Tile::kMaxStages;
  const int fit = int((Tile::kRingBytes - 2 * y_bytes) / (Tile::kXStage + Tile::kWStage + p_stage));
  return cap < fit ? cap : fit;
}

}  // namespace ws_detail

}  // namespace mixq::cuda
