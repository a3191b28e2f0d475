// Internal: what the FP8 block and INT8 W8A8 experts on CUDA share (moe_fp8_experts.cpp,
// moe_int8_experts.cpp): each expert's TMA descriptors in device memory, and a grouped call's
// steps around the quantizer: the argument and workspace checks, then the tile schedule (the GEMM
// is its dependent launch) and the launch fields of the Hopper block GEMM's grouped form. The
// workspace starts with the tile list, bounded for either row layout.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/moe_prepared.hpp"
#include "cuda/launch/sm90_block_grouped.hpp"

namespace mixq::cuda {

class CudaBlockExperts : public PreparedExpertsImpl {
 protected:
  // After adopt(): the experts' device (every expert's, checked), its SM count, and their
  // descriptors [E][maps_per_expert] copied to device memory.
  void set_device(const std::vector<int>& expert_devices);
  void upload_maps(const std::vector<CUtensorMap>& maps);

  // One grouped call: the rows of x, the stream and the workspace. rows == 0: nothing to do.
  struct Call {
    int64_t rows = 0;
    cudaStream_t stream = nullptr;
    char* workspace = nullptr;
    int64_t max_tiles = 0;  // the tile list's bound for the call's layout
  };
  // Checks the call's devices, rows and workspace (workspace_size(rows) bytes, 16-byte aligned);
  // tile_m: the GEMM's token tile. The caller holds a DeviceGuard of device_.
  Call begin_call(const GroupedCall& c, const ExecContext& ctx, int tile_m) const;
  // The tile list's part of the workspace, at its start (the quantized rows follow it).
  size_t schedule_bytes(int64_t rows, int tile_m) const;
  // The quantized rows' 8-bit codes, [rows][act_row_pitch(K)], 256-byte aligned size.
  size_t codes_bytes(int64_t rows) const;
  // Launches the tile schedule (after the quantizer) and returns the GEMM's call fields.
  BlockGroupedCall schedule(const GroupedCall& c, const Epilogue& ep, const Call& call,
                            int tile_m) const;

  int device_ = 0, sms_ = 0;
  DeviceBuffer maps_;  // [E][descriptors per expert] CUtensorMap
};

}  // namespace mixq::cuda
