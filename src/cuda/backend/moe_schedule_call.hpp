// Internal: the tile schedule of a grouped call (kernels/moe/moe_schedule.cuh), shared by the
// weight-only and the FP8 block experts. The workspace starts with the tile count (16 bytes) and
// the tile list (moe_schedule_bytes of the capacity).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/moe_prepared.hpp"
#include "cuda/kernels/moe/moe_params.hpp"
#include "cuda/launch/moe_kernels.hpp"

namespace mixq::cuda {

struct MoeScheduleSlots {
  int* n_tiles;
  MoeTile* tiles;
};

inline MoeScheduleSlots moe_schedule_slots(void* workspace) {
  char* ws = static_cast<char*>(workspace);
  return {reinterpret_cast<int*>(ws), reinterpret_cast<MoeTile*>(ws + 16)};
}

// Launches the schedule of call c (R rows of X over E experts) into the workspace's slots: tiles
// of tile_m rows, at most capacity of them.
inline MoeScheduleSlots launch_moe_schedule_of(const GroupedCall& c, int64_t E, int64_t R, int tile_m,
                                               int64_t capacity, void* workspace, cudaStream_t stream) {
  const MoeScheduleSlots slots = moe_schedule_slots(workspace);
  const bool masked = c.rows.layout == MoeRows::Layout::Masked;
  MoeScheduleParams s{};
  s.offsets = masked ? nullptr : c.rows.offsets.ptr<const int32_t>();
  s.counts = masked ? c.rows.counts.ptr<const int32_t>() : nullptr;
  s.E = int(E);
  s.rows = int(R);
  s.max_tokens = int(c.rows.max_tokens);
  s.tile_m = tile_m;
  s.capacity = int(capacity);
  s.error = c.rows.error.empty() ? nullptr : c.rows.error.ptr<int32_t>();
  s.n_tiles = slots.n_tiles;
  s.tiles = slots.tiles;
  launch_moe_schedule(s, stream);
  return slots;
}

}  // namespace mixq::cuda
