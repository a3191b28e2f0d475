// The work items of the warp-specialized Hopper weight-only kernel (sm90_wo_ws.cuh): one output
// tile of 128 weight rows x MT tokens and the K chunks of it the CTA computes. The plain GEMM walks
// its hybrid data-parallel + stream-K schedule; the grouped (mixture-of-experts) GEMM walks the
// (expert, token tile) list the schedule kernel wrote on the device (kernels/moe/moe_schedule.cuh)
// times the N blocks, whole tiles only, round-robin over the persistent grid. The producer and the
// consumers walk the same items in the same order (their rings stay in step).
#pragma once

#include <cuda.h>

#include "cuda/kernels/common/stream_k.hpp"
#include "cuda/kernels/moe/moe_params.hpp"

namespace mixq::cuda {

namespace ws_detail {

struct WsItem {
  StreamKWork w;
  int mb, nb;    // token tile (of X, or of the expert's rows), 128-row weight block
  int expert;    // grouped: the expert (0 otherwise)
  int row0;      // the tile's first row of X and Y
  int rows;      // rows of X / Y from row0 on that belong to the tile's GEMM (may exceed MT)
};

// Calls f(work, m block, n block) for every piece of work of this CTA (cur: a fresh
// StreamKCursor of it, built once: its construction divides).
template <class F>
__device__ __forceinline__ void ws_for_each_work(const StreamKSchedule& sched, StreamKCursor cur, F&& f) {
  StreamKWork w;
  while (cur.next(sched, w)) {
    int mb, nb;
    stream_k_tile_coords(sched, w.tile, mb, nb);
    f(w, mb, nb);
  }
}

template <bool GROUPED, int MT, class F>
__device__ __forceinline__ void ws_for_each_item(const StreamKSchedule& sched, const StreamKCursor& cur,
                                                 const MoeWsGroup& g, int M, F&& f) {
  if constexpr (GROUPED) {
    const int n_tiles = *g.n_tiles;
    const int items = n_tiles * g.n_blocks;
    for (int i = int(blockIdx.x); i < items; i += int(gridDim.x)) {
      int nb;
      const MoeTile t = moe_unit_of_item(i, g.n_blocks, n_tiles, MT, g.expert_major != 0,
                                         [&](int ti) { return g.tiles[ti]; }, nb);
      f(WsItem{StreamKWork{i, 0, sched.chunks, false, false}, t.m_block, nb, t.expert, t.row0 + t.m_block * MT,
               t.rows - t.m_block * MT});
    }
  } else {
    ws_for_each_work(sched, cur, [&](const StreamKWork& w, int mb, int nb) {
      f(WsItem{w, mb, nb, 0, mb * MT, M - mb * MT});
    });
  }
}

}  // namespace ws_detail

}  // namespace mixq::cuda
