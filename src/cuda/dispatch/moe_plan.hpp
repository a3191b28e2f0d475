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
#include "mixq/tuning.hpp"

namespace mixq::cuda {

// Token tiles the grouped streaming kernel is instantiated for (launch/moe_wo_stream_*.cu).
constexpr int kMoeTileSmall = 16;  // decode: a few rows per expert
constexpr int kMoeTileLarge = 64;  // prefill

struct MoeCall {
  int64_t E = 1;
  int64_t rows = 0;        // rows of X (masked: E * max_tokens)
  bool masked = false;
  int64_t max_tokens = 0;  // masked
  int x_type = 0;          // IoType of X
};

struct MoeWoPlan {
  KernelId id;           // family WoStream: the instantiation's token tile, codes, fine groups
  int x_rows = 1;        // activation rows staged per block (the token tile, or fewer rows)
  int n_blocks = 1;      // blocks along N
  int64_t max_tiles = 0; // grid.z: an upper bound of the (expert, token tile) pairs of any routing
  int chunks_per_split = 1, chunks_per_stage = 1;
  size_t smem_bytes = 0;
};

// The (expert, token tile) pairs any valid routing can produce: contiguous, sum over experts of
// ceil(rows_e / mt) <= ceil(rows / mt) + min(E, rows) - 1 (each non-empty expert adds at most one
// partial tile); masked, E * ceil(max_tokens / mt).
int64_t moe_max_tiles(const MoeCall& c, int mt);

MoeWoPlan plan_moe_weight_only(const MoeCall& c, const WoWeight& w, const DeviceCaps& caps,
                               const Tuning& t);

// Workspace: the tile count (16 bytes) and the tile list (16 bytes a tile), 256-aligned.
size_t moe_schedule_bytes(int64_t max_tiles);

}  // namespace mixq::cuda
