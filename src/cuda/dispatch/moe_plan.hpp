// The grouped (mixture-of-experts) weight-only plan: a pure function of the call's host-known
// sizes (rows of X, E, the layout), the weight's traits and the device, so that one plan serves
// every routing (graph replays with new counts included). Tested without a GPU
// (tests/unit/test_moe_plan.cpp). Rules: docs/decisions/moe-stacked-experts.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/dispatch/device_caps.hpp"
#include "cuda/dispatch/kernel_id.hpp"
#include "cuda/dispatch/wo_plan.hpp"
#include "cuda/kernels/common/stream_k.hpp"
#include "mixq/tuning.hpp"

namespace mixq::cuda {

// Token tiles the grouped streaming kernel is instantiated for (launch/moe_wo_stream_*.cu).
constexpr int kMoeTileTiny = 8;    // decode: a row or a few per expert
constexpr int kMoeTileSmall = 16;  // a few more
constexpr int kMoeTileLarge = 64;  // prefill

// The grouped wgmma kernel (kernels/wo/sm90_wo_ws.cuh, GROUPED). Each expert holds its TMA
// descriptors (backend/moe_experts.cpp): its weight tiles, pairs and bf16 integer-zero pairs, each
// for stages of one and of two 64-K chunks (the token tiles' shapes), at moe_ws_map(kind, cps).
enum MoeWsMapKind : int { kMoeMapWeight = 0, kMoeMapPairs = 1, kMoeMapPairsBf16Zero = 2 };
constexpr int kMoeMapsPerExpert = 6;
constexpr int moe_ws_map(MoeWsMapKind kind, int cps) { return 2 * int(kind) + (cps == 2 ? 1 : 0); }
// Rows an expert is expected to get (uniform routing, or max_tokens) from which the wgmma kernel
// serves a grouped call; below, the wgmma kernel or the streaming kernel's 8-token tile with K split
// over clusters, whichever fills more of the GPU (moe_plan.cpp: stream_beats_wgmma).
// Tuning::moe_wgmma_min_rows replaces both: wgmma from that share on, streaming below.
constexpr int64_t kMoeWgmmaMinRows = 9;
// The wgmma kernel's token tile for that share (Tuning::moe_token_tile overrides).
int moe_ws_token_tile(int64_t share);
// Whether a grouped GEMM walks an expert's token tiles innermost (kernels/moe/moe_params.hpp,
// moe_unit_of_item) rather than its N blocks, for experts of expert_bytes of weights: the block
// GEMM (FP8 block / INT8 W8A8 experts, block_gemm) for experts over a quarter of L2, the
// weight-only wgmma kernel never. Tuning::moe_expert_major On / Off forces the order for both.
bool moe_expert_major(bool block_gemm, int64_t expert_bytes, size_t l2_bytes, const Tuning& t);

struct MoeCall {
  int64_t E = 1;
  int64_t rows = 0;        // rows of X (masked: E * max_tokens)
  bool masked = false;
  int64_t max_tokens = 0;  // masked
  int x_type = 0;          // IoType of X
  bool ws_maps = false;    // the experts hold the wgmma kernel's descriptors (sm_90a, no act-order)
  bool y_tma = false;      // Y is 16-bit and TMA can store its rows (tma_stores_16bit_rows)
};

struct MoeWoPlan {
  // family WoStream: the instantiation's token tile, codes, fine groups; WoWgmma: the grouped
  // wgmma kernel (token tile, codes, pair path; one CTA, no fold)
  KernelId id;
  int x_rows = 1;        // activation rows staged per block (the token tile, or fewer rows)
  int n_blocks = 1;      // blocks along N
  int64_t max_tiles = 0; // grid.z: an upper bound of the (expert, token tile) pairs of any routing
  int chunks_per_split = 1, chunks_per_stage = 1;  // WoStream (WoWgmma: sched.chunks, sched.cps)
  // WoStream: K splits of a tile (grid.y), reduced in a cluster of that many blocks when > 1
  int splits = 1;
  // a programmatic dependent launch of the schedule kernel (the GEMM's launch and set-up overlap
  // it; its blocks wait for it before they read the tile list)
  bool pdl = false;
  size_t smem_bytes = 0;
  // WoWgmma: the persistent grid (sched.grid CTAs) walking the tile list x n_blocks whole tiles,
  // sched.chunks stages each; the pair descriptor it reads
  StreamKSchedule sched;
  int w_map = 0, p_map = 0;  // moe_ws_map of the weight and pair descriptors it reads
};

// The (expert, token tile) pairs any valid routing can produce: contiguous, sum over experts of
// ceil(rows_e / mt) <= ceil(rows / mt) + min(E, rows) - 1 (each non-empty expert adds at most one
// partial tile); masked, E * ceil(max_tokens / mt).
int64_t moe_max_tiles(const MoeCall& c, int mt);

MoeWoPlan plan_moe_weight_only(const MoeCall& c, const WoWeight& w, const DeviceCaps& caps,
                               const Tuning& t);

// What a grouped call's workspace is sized for before the layout is known
// (grouped_linear_workspace_size of the FP8 block experts): the tiles any routing of `rows` rows
// over E experts can give with token tiles of mt rows or more, in either layout (masked: rows =
// E * max_tokens), i.e. at least moe_max_tiles of both: ceil(rows / mt) + E.
int64_t moe_tiles_any_layout(int64_t rows, int64_t E, int mt);

// The grouped 8-bit block GEMMs (FP8 block and INT8 W8A8 experts): the block GEMM's 128-row
// tiles, or, for decode shares, the few-token kernel's grouped form (weights on the MMA's 128-row
// side, 16-64 tokens of an expert on its narrow side; kernels/w8a8/sm90_skinny_grouped.cuh).
constexpr int kMoeBlockTileM = 128;
// Rows per expert (a uniform routing's share, or max_tokens) up to which the few-token form runs.
constexpr int64_t kMoeSkinnyMaxShare = 32;
// Experts up to which the few-token form lists its tiles itself (sm90_skinny_grouped.cuh's
// kSkinnyScheduleMaxE: the prefix sums in each CTA's shared memory).
constexpr int64_t kMoeOwnScheduleMaxE = 1024;
struct MoeBlockPlan {
  bool skinny = false;
  int tile_m = kMoeBlockTileM;  // the schedule's token tile
  int splits = 1;               // skinny: K ranges of a (token tile, 128-row weight tile) unit
  bool own_schedule = false;    // skinny: the GEMM lists the tiles from the routing (no schedule kernel)
  int64_t max_tiles = 0;        // the tile list's bound (moe_max_tiles)
  int64_t tickets = 0;          // skinny, splits > 1: one per unit (max_tiles x weight tiles)
  int64_t partial_floats = 0;   // ... and a slot of 128 x tile_m floats per piece
};
// N, K: the experts' shape; sms: the persistent grid.
MoeBlockPlan plan_moe_block(const MoeCall& c, int64_t N, int64_t K, int sms, const Tuning& t);
// The pieces' workspace of a plan (partial slots, then the tickets), 256-byte aligned; 0 without splits.
size_t moe_block_split_bytes(const MoeBlockPlan& p);

// Workspace: the tile count (16 bytes) and the tile list (16 bytes a tile), 256-aligned.
size_t moe_schedule_bytes(int64_t max_tiles);

}  // namespace mixq::cuda
