// The grouped weight-only GEMM for decode and small prefill: the weight-streaming kernel
// (kernels/wo/sm80_wo_stream.cuh) with grid.y over the K splits of a tile (one cluster, reduced
// through distributed shared memory) and grid.z over the (expert, token tile) pairs of the
// device-side schedule (moe_schedule.cuh). Each block takes its pair, points the kernel's parameters at its
// expert's repacked weight, pairs and bias and at the expert's rows of X and Y, and runs the
// streaming kernel's block body: one launch for every expert, nothing read back by the host.
// Blocks past the schedule's end (experts with few or no rows) exit before any load.
#pragma once

#include "cuda/kernels/moe/moe_params.hpp"
#include "cuda/kernels/wo/sm80_wo_stream.cuh"

namespace mixq::cuda {

__device__ __forceinline__ int io_bytes(IoType t) { return t == IoType::F32 ? 4 : 2; }

template <typename MmaT, int MT, int BITS, bool SPLIT_X, bool FINE, int WARPS>
__global__ void __launch_bounds__(WARPS * 32, moe_stream_min_blocks(MT, BITS == 4 ? 4 : 8))
    moe_wo_stream_kernel(const WoStreamParams base, const MoeWoExperts g) {
  // a dependent launch of the schedule kernel (the plan's pdl): its list is read after it ends
  grid_dependency_wait();
  // the count and this block's entry load together (the list has room for every block of the
  // grid; an entry past the count is never used): one round trip less before the weight stream
  const int n_tiles = *g.n_tiles;
  const MoeTile t = g.tiles[blockIdx.z];
  // uniform per block, and per cluster (a cluster is the splits of one tile): before any barrier
  if (int(blockIdx.z) >= n_tiles) return;
  WoStreamParams p = base;
  p.x = static_cast<const char*>(base.x) + int64_t(t.row0) * base.ldx * io_bytes(base.x_type);
  p.y = static_cast<char*>(base.y) + int64_t(t.row0) * base.ldy * io_bytes(base.y_type);
  p.M = t.rows;
  p.codes = g.codes[t.expert];
  p.pairs_stream = g.pairs_stream[t.expert];
  p.k_perm = g.k_perm[t.expert];
  p.pair_f32 = g.pair_f32[t.expert] != 0;
  if (base.bias)
    p.bias = static_cast<const char*>(base.bias) + int64_t(t.expert) * g.bias_stride * io_bytes(base.bias_type);
  wo_stream_block<MmaT, MT, BITS, SPLIT_X, FINE, WARPS>(
      p, make_uint3(blockIdx.x, blockIdx.y, unsigned(t.m_block)), gridDim.x);
}

}  // namespace mixq::cuda
