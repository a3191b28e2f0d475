// Internal: what the grouped weight-only call needs of one expert's prepared weight (the CUDA
// weight-only PreparedImpl of backend/weight_only.cpp): its repacked buffers and traits.
#pragma once

#include <cstdint>

#include "core/prepared.hpp"
#include "cuda/dispatch/wo_plan.hpp"

namespace mixq::cuda {

struct WoExpertView {
  WoWeight w;                 // the planner's view (layout, groups, zeros)
  const void* codes = nullptr;
  const void* pairs_stream = nullptr;
  const int32_t* k_perm = nullptr;
  // the group-major pairs of the wgmma kernel (null where the device has none), [groups][ld]
  const void* pairs_gm = nullptr;
  const void* pairs_gm_bz = nullptr;  // the bf16 integer-zero path's packed copy (nullable)
  int64_t pairs_gm_ld = 0;
  bool pair_f32 = false;
  int device = 0;
};

// Throws Unsupported when impl is not a CUDA weight-only prepared weight.
WoExpertView weight_only_expert_view(const PreparedImpl& impl);

}  // namespace mixq::cuda
