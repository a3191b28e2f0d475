// Parameters of the mixture-of-experts kernels (plain C++: shared by host and device).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mixq::cuda {

// One (expert, token tile) pair of a grouped call: the expert's rows are [row0, row0 + rows) of
// X / Y, and this tile covers its rows [m_block * MT, m_block * MT + MT).
struct MoeTile {
  int expert, m_block, row0, rows;
};

// The tile schedule, computed on the device from the offsets (contiguous) or counts (masked), so
// that no count reaches the host: n_tiles, then the tiles in expert order.
struct MoeScheduleParams {
  const int32_t* offsets;  // contiguous layout: [E + 1], else null
  const int32_t* counts;   // masked layout: [E], else null
  int E;
  int rows;                // rows of X (contiguous: what offsets[E] must be)
  int max_tokens;          // masked
  int tile_m;
  int capacity;            // tiles the list has room for (the plan's max_tiles)
  int32_t* error;          // nullable: kMoeError* bits
  int* n_tiles;
  MoeTile* tiles;
};

// The experts of a grouped weight-only call: their repacked weights (kernels/common/wo_layout.hpp)
// by expert index, read by the block that serves the expert.
struct MoeWoExperts {
  const int* n_tiles;
  const MoeTile* tiles;
  const uint4* const* codes;          // [E]
  const void* const* pairs_stream;    // [E] (lane-order scale pairs)
  const int32_t* const* k_perm;       // [E], entries nullable (act-order)
  const uint8_t* pair_f32;            // [E]: the expert's pairs are f32 (else f16)
  int64_t bias_stride;                // elements between experts' bias rows (0: one shared bias)
};

// The grouped call of the warp-specialized Hopper kernel (kernels/wo/sm90_wo_ws.cuh, GROUPED): the
// tile list, and per expert the TMA descriptors of its weight tiles and group-major pairs in global
// memory (built at prepare, backend/moe_experts.cpp; a CTA fetches a descriptor once per item of
// ~100 stages).
struct MoeWsGroup {
  const int* n_tiles;
  const MoeTile* tiles;
  const CUtensorMap* maps;  // [E][maps_per_expert], 64-byte aligned
  int maps_per_expert;
  int w_map, p_map;         // which of an expert's maps this launch reads
  int n_blocks;             // 128-row weight blocks along N
  int64_t bias_stride;      // elements between experts' bias rows (0: one shared bias)
};

}  // namespace mixq::cuda
