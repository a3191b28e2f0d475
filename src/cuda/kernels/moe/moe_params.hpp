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

// The unit (token tile, N block) of item i of a grouped GEMM whose items are the tile list x
// num_n N blocks. The list holds each expert's tiles consecutively, so expert e's items are
// [t0 * num_n, (t0 + n_e) * num_n) whichever the order inside; tile_at(ti) is the list's tile ti.
// - N blocks innermost (expert_major false): unit (i / num_n, i % num_n); the CTAs running at once
//   share one token tile and read the expert's weight once per token tile of it.
// - Token tiles innermost (expert_major true): an expert's tiles of one N block are adjacent items,
//   on CTAs that run at once, so its weight block is fetched once for all of them (the block
//   GEMM's FP8 experts of Mixtral-8x7B, 4-8 tiles an expert: 1.05-1.17x; dispatch/moe_plan.cpp).
template <class TileAt>
__host__ __device__ __forceinline__ MoeTile moe_unit_of_item(int i, int num_n, int n_tiles, int tile_m,
                                                             bool expert_major, TileAt&& tile_at, int& nb) {
  const int ti = i / num_n;
  const MoeTile t = tile_at(ti);
  if (!expert_major) {
    nb = i - ti * num_n;
    return t;
  }
  const int t0 = ti - t.m_block;  // the expert's first tile
  const int n_e = (t.rows + tile_m - 1) / tile_m < n_tiles - t0 ? (t.rows + tile_m - 1) / tile_m : n_tiles - t0;
  const int j = i - t0 * num_n;
  nb = j / n_e;
  return MoeTile{t.expert, j - nb * n_e, t.row0, t.rows};
}

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
  int expert_major;         // moe_unit_of_item's order: an expert's token tiles innermost
  int64_t bias_stride;      // elements between experts' bias rows (0: one shared bias)
};

}  // namespace mixq::cuda
