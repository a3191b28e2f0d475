// Internal: what the FP8 block and INT8 W8A8 experts on CUDA share (moe_fp8_experts.cpp,
// moe_int8_experts.cpp): each expert's TMA descriptors in device memory, and a grouped call's
// steps around the quantizer: the argument and workspace checks, then the tile schedule (the GEMM
// is its dependent launch; the few-token form lists its tiles itself) and the launch fields of the
// Hopper block GEMM's grouped form. The workspace starts with the tile list, bounded for either
// row layout.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/moe_prepared.hpp"
#include "cuda/dispatch/moe_plan.hpp"
#include "cuda/launch/sm90_block_grouped.hpp"

namespace mixq::cuda {

class CudaBlockExperts : public PreparedExpertsImpl {
 protected:
  // After adopt(): the experts' device (every expert's, checked), its SM count, and their
  // descriptors [E][maps_per_expert] copied to device memory.
  void set_device(const std::vector<int>& expert_devices);
  void upload_maps(const std::vector<CUtensorMap>& maps);

  // One grouped call: the rows of x, the stream, the workspace and the plan (the block GEMM or the
  // few-token kernel's grouped form, dispatch/moe_plan.hpp). rows == 0: nothing to do.
  struct Call {
    int64_t rows = 0;
    cudaStream_t stream = nullptr;
    char* workspace = nullptr;
    MoeBlockPlan plan;
  };
  // Checks the call's devices, rows and workspace (workspace_size(rows) bytes, 16-byte aligned) and
  // plans it. The caller holds a DeviceGuard of device_.
  Call begin_call(const GroupedCall& c, const ExecContext& ctx) const;
  // The plan of a call of `rows` rows in either layout (masked: rows = E * max_tokens).
  MoeBlockPlan plan_for(int64_t rows, bool masked) const;
  // The tile list's part of the workspace, at its start (the quantized rows follow it), bounded
  // for either layout and every token tile.
  size_t schedule_bytes(int64_t rows) const;
  // The quantized rows' 8-bit codes, [rows][act_row_pitch(K)], 256-byte aligned size.
  size_t codes_bytes(int64_t rows) const;
  // The few-token form's partial slots and tickets (moe_block_split_bytes), bounded for either layout.
  size_t split_bytes(int64_t rows) const;
  // The few-token form's pieces at `at` (split_bytes(rows) there); the caller's workspace holds
  // anything, so the quantizer launched before the GEMM zeroes the tickets (ActQuantClear).
  SkinnyGroupedWork skinny_work(const Call& call, char* at) const;
  // Launches the tile schedule and the quantizer (quantize()) in the plan's order and returns the
  // GEMM's call fields. The block GEMM is the schedule's dependent launch and waits for it alone:
  // the quantizer goes first. The few-token form is the quantizer's dependent launch and reads the
  // tile list as it starts, to stream its first weight stages while the quantizer runs: the
  // schedule goes first.
  // With the plan's own_schedule there is no schedule kernel: the GEMM lists the tiles from the
  // routing, which is complete before the quantizer starts.
  template <class Quantize>
  BlockGroupedCall schedule_and_quantize(const GroupedCall& c, const Epilogue& ep, const Call& call,
                                         Quantize quantize) const {
    BlockGroupedCall g;
    if (call.plan.skinny) g = call.plan.own_schedule ? routed(c, ep, call) : schedule(c, ep, call);
    quantize();
    if (!call.plan.skinny) g = schedule(c, ep, call);
    return g;
  }
  // Launches the tile schedule and returns the GEMM's call fields with its list.
  BlockGroupedCall schedule(const GroupedCall& c, const Epilogue& ep, const Call& call) const;
  // The GEMM's call fields with the routing instead of a list (the in-kernel schedule).
  BlockGroupedCall routed(const GroupedCall& c, const Epilogue& ep, const Call& call) const;
  // The call fields both share: shapes, output, epilogue, descriptors, the list's bound.
  BlockGroupedCall fields(const GroupedCall& c, const Epilogue& ep, const Call& call) const;
  // "grouped<kernel>" of a call of `rows` rows (contiguous), block: the block GEMM's name,
  // skinny(mt): the few-token form's ("_splitN": units cut in N K ranges).
  template <class Block, class Skinny>
  std::string grouped_name(int64_t rows, Block block, Skinny skinny) const {
    const MoeBlockPlan p = plan_for(rows, false);
    std::string s = std::string("grouped<") + (p.skinny ? skinny(p.tile_m) : block());
    if (p.splits > 1) s += "_split" + std::to_string(p.splits);
    return s + ">";
  }

  int device_ = 0, sms_ = 0;
  size_t l2_bytes_ = 0;
  DeviceBuffer maps_;  // [E][descriptors per expert] CUtensorMap
};

}  // namespace mixq::cuda
