// Work decomposition of the persistent Hopper kernels (kernels/wo/sm90_wo_ws.cuh, the few-token
// W8A8 kernels): hybrid data-parallel + stream-K over a persistent grid of G CTAs. Plain C++ usable
// on host and device, so the unit tests walk exactly what the kernel walks. The planner's side
// (the cost model that picks a schedule) is dispatch/stream_k_plan.hpp.
//
// The first dp_tiles tiles (a multiple of G) run whole, tile t on CTA t % G. The iterations (64-K
// chunks) of the remaining sk_tiles tiles are cut into sk_ctas equal contiguous ranges, one per
// CTA, so every SM gets the same amount of work and no partial wave is left (before: 168 tiles on
// 132 SMs ran in 2 full rounds, 64% of the tensor rate). The pieces of a tile cut between CTAs go
// to per-CTA partial slots, summed in CTA order, so the result is the same on every run: by the CTA
// holding the tile's first piece (its owner; that piece is the last of the owner's range, the
// others start their CTAs' ranges), once per-tile flags say the other pieces are in
// (inline_reduce), or else by a fixup kernel after the grid. make_stream_k_schedule picks the
// variant with a cost model (dispatch/stream_k_plan.hpp).
#pragma once

#include <cstdint>

#include "mixq/numeric.hpp"  // MIXQ_HD (host + device inline)

namespace mixq::cuda {

struct StreamKSchedule {
  int num_n = 1, num_m = 1, tiles = 1, group_n = 8;
  int chunks = 1;        // iterations per tile (stages of cps 64-K chunks)
  int cps = 1;           // 64-K chunks per iteration (the kernel's stage)
  int grid = 1;          // CTAs launched
  int dp_tiles = 0;      // whole tiles, tile t on CTA t % grid
  int sk_tiles = 0;      // tiles dp_tiles .. tiles-1, split by iteration ranges
  int sk_ctas = 1;       // CTAs 0 .. sk_ctas-1 share the sk_tiles * chunks iterations
  int64_t sk_iters = 0;  // sk_tiles * chunks
  int max_stages = 0;    // ring depth cap of the warp-specialized kernel (0: as deep as fits)
  int early_stages = 0;  // stages whose weights load before the wait for the previous grid (<0: the ring)
  bool inline_reduce = true;  // cut tiles summed by their owner CTA (else the fixup kernel)
  int y_rows = 0;  // > 0: 16-bit output tiles staged in shared memory, y_rows tokens at a time, and TMA-stored
  bool ragged = true;  // the grouped warp-specialized kernel's 192-token tiles: MMAs over a tile's rows only (Tuning::wo_ragged_tiles)
  // K split over a thread-block cluster (the warp-specialized kernel, make_k_split_schedule): > 1,
  // tile t's iterations are cut into k_split contiguous ranges run by the k_split CTAs of cluster
  // t (CTA k_split t + r, cluster rank r), one piece each; the pieces are summed through
  // distributed shared memory by rank 0, which stores the tile. No flags, slots or fixup.
  int k_split = 1;
};

// Chunks [c0, c1) of tile `tile`. split: other CTAs own the rest of the tile (fixup); first: the
// piece starts this CTA's stream-K range (partial slot 0, else slot 1).
struct StreamKWork {
  int tile, c0, c1;
  bool split, first;
};

struct StreamKCursor {
  int dp_tile;
  int64_t it, it_end, it_begin;
  int sk_tile = 0, c = 0;  // the stream-K tile (0-based) and chunk of iteration it

  MIXQ_HD static int64_t sk_start(const StreamKSchedule& s, int cta) {
    return int64_t(cta) * s.sk_iters / s.sk_ctas;
  }
  // The CTA whose stream-K range holds iteration i (ranges are never empty: sk_ctas <= sk_iters).
  // A tile's owner (the CTA of its first piece) is sk_owner of its first iteration, its last
  // contributor sk_owner of its last.
  MIXQ_HD static int sk_owner(const StreamKSchedule& s, int64_t i) {
    return int(((i + 1) * s.sk_ctas - 1) / s.sk_iters);
  }
  // The last contributor to the tile CTA cta's stream-K range ends in: when cta owns that tile
  // cut (the owner's piece is the last of its range), the CTAs cta + 1 .. this one hold its other
  // pieces, each the first of its range (slot 2 b).
  MIXQ_HD static int last_contributor(const StreamKSchedule& s, int cta) {
    const int64_t t = (sk_start(s, cta + 1) - 1) / s.chunks;
    return sk_owner(s, t * s.chunks + s.chunks - 1);
  }
  // Partial slot of CTA b's piece of stream-K tile t (0-based among the stream-K tiles).
  MIXQ_HD static int slot_of(const StreamKSchedule& s, int b, int t) {
    return 2 * b + (sk_start(s, b) >= int64_t(t) * s.chunks ? 0 : 1);
  }

  // The 64-bit divisions are all here, at the kernel's start: next() only adds (in the kernel a
  // division per piece boundary was a ~0.3 us bubble in the consumers' stream).
  MIXQ_HD StreamKCursor(const StreamKSchedule& s, int cta) : dp_tile(cta), it(0), it_end(0) {
    if (s.k_split > 1) {  // one piece: range r of tile t (a stream-K range inside one tile)
      const int t = cta / s.k_split, r = cta - t * s.k_split;
      sk_tile = t;
      c = int(int64_t(r) * s.chunks / s.k_split);
      it = int64_t(t) * s.chunks + c;
      it_end = int64_t(t) * s.chunks + int64_t(r + 1) * s.chunks / s.k_split;
    } else if (cta < s.sk_ctas) {
      it = sk_start(s, cta);
      it_end = sk_start(s, cta + 1);
      sk_tile = int(it / s.chunks);
      c = int(it - int64_t(sk_tile) * s.chunks);
    }
    it_begin = it;
  }
  // The CTA's work in order: its whole tiles, then its stream-K range. (The range first, which
  // moves the inline reduction's sums off the grid's end, measured no faster: docs/decisions/wo-wgmma-stream-k-reduction.md.)
  MIXQ_HD bool next(const StreamKSchedule& s, StreamKWork& w) {
    if (dp_tile < s.dp_tiles) {
      w = StreamKWork{dp_tile, 0, s.chunks, false, false};
      dp_tile += s.grid;
      return true;
    }
    if (it >= it_end) return false;
    w.tile = s.dp_tiles + sk_tile;
    w.c0 = c;
    const int64_t c1 = w.c0 + (it_end - it);
    w.c1 = c1 < s.chunks ? int(c1) : s.chunks;
    w.split = w.c0 != 0 || w.c1 != s.chunks;
    w.first = it == it_begin;
    it += w.c1 - w.c0;
    ++sk_tile;  // the next piece starts the next tile
    c = 0;
    return true;
  }
};

// Output tile t -> (m block, n block): groups of group_n N-blocks with the M-blocks inside a group,
// so CTAs running at the same time share X and W in L2.
MIXQ_HD void stream_k_tile_coords(const StreamKSchedule& s, int t, int& mb, int& nb) {
  if (s.num_m == 1) {  // decode: the same mapping without its three divisions (a piece boundary's latency)
    mb = 0;
    nb = t;
    return;
  }
  const int per_group = s.group_n * s.num_m;
  const int g = t / per_group;
  const int first = g * s.group_n;
  const int left = s.num_n - first;
  const int gn = s.group_n < left ? s.group_n : left;
  const int in = t - g * per_group;
  mb = in / gn;
  nb = first + in % gn;
}


// CTAs per SM of the warp-specialized kernel at most (its small token tiles may run two per SM,
// sm90_wo_wgmma_ws.cu): sizes the stream-K workspace.
MIXQ_HD constexpr int ws_max_ctas_per_sm(int mt) { return mt <= 32 ? 2 : 1; }

// Completion flags of the inline reduction: one per stream-K tile and 16-row weight tile (the
// consumer warp that owns those rows on every CTA), counting the non-owner pieces stored. Stream-K
// tiles are fewer than two rounds of the grid (make_stream_k_schedule). Zero before a launch; the
// owner resets its flags, so every launch leaves them zero.
constexpr int kStreamKFlagsPerTile = 8;
inline int64_t stream_k_flags(int max_ctas) { return int64_t(2) * max_ctas * kStreamKFlagsPerTile; }
inline int64_t ws_flags(int sm_count, int mt) { return stream_k_flags(sm_count * ws_max_ctas_per_sm(mt)); }

// Workspace of one launch: 2 partial slots per CTA of 128 rows x mt f32 sums.
inline int64_t stream_k_partial_floats(int max_ctas, int mt) { return int64_t(2) * max_ctas * 128 * mt; }
// ... for the warp-specialized kernel's grid on sm_count SMs
inline int64_t ws_partial_floats(int sm_count, int mt) {
  return stream_k_partial_floats(sm_count * ws_max_ctas_per_sm(mt), mt);
}

}  // namespace mixq::cuda

