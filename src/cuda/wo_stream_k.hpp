// Work decomposition of the warp-specialized Hopper wgmma kernel (sm90_wo_wgmma_ws.cu): hybrid
// data-parallel + stream-K over a persistent grid of G CTAs. Plain C++ usable on host and device,
// so the unit tests walk exactly what the kernel walks.
//
// The first dp_tiles tiles (a multiple of G) run whole, tile t on CTA t % G. The iterations (64-K
// chunks) of the remaining sk_tiles tiles are cut into sk_ctas equal contiguous ranges, one per
// CTA, so every SM gets the same amount of work and no partial wave is left (before: 168 tiles on
// 132 SMs ran in 2 full rounds, 64% of the tensor rate). The pieces of a tile cut between CTAs go
// to per-CTA partial slots, summed in CTA order, so the result is the same on every run: by the CTA
// holding the tile's first piece (its owner; that piece is the last of the owner's range, the
// others start their CTAs' ranges), once per-tile flags say the other pieces are in
// (inline_reduce), or else by a fixup kernel after the grid. make_stream_k_schedule picks the
// variant with a cost model.
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
  int diag = 0;          // MIXQ_WS_DIAG (timing experiments only): 1 no pairs, 2 no W, 4 no X
  int max_stages = 0;    // ring depth cap of the warp-specialized kernel (0: its default)
  int early_stages = 0;  // stages whose weights load before the wait for the previous grid (<0: the ring)
  bool inline_reduce = true;  // cut tiles summed by their owner CTA (else the fixup kernel)
  int y_rows = 0;  // > 0: 16-bit output tiles staged in shared memory, y_rows tokens at a time, and TMA-stored
};

// A stream-K range shorter than this many chunks costs more in partial-sum traffic than it saves.
constexpr int kStreamKMinChunks = 4;

// Fills the stream-K part of s for its first dp_tiles whole tiles on G CTAs.
inline void stream_k_split(StreamKSchedule& s, int dp_tiles, int G) {
  s.dp_tiles = dp_tiles;
  s.sk_tiles = s.tiles - dp_tiles;
  s.sk_iters = int64_t(s.sk_tiles) * s.chunks;
  int64_t sk = s.sk_iters / kStreamKMinChunks;
  if (sk > G) sk = G;
  if (sk < s.sk_tiles) sk = s.sk_tiles < G ? s.sk_tiles : G;  // never fewer CTAs than tiles
  if (sk < 1) sk = 1;
  s.sk_ctas = int(sk);
  s.grid = dp_tiles > 0 ? G : s.sk_ctas;
}

// Pieces of tiles cut between CTAs (each writes a partial slot the fixup kernel reads).
inline int64_t stream_k_split_pieces(const StreamKSchedule& s);

// Estimated time of one 64-K stage of a 128 x mt tile on one SM (us), fitted to runs of the kernel
// on H100 with three TMA loads per stage (bench/results/cuda_wo_wgmma_ws_streamk.md: ~0.44 at
// mt = 64 and ~0.72 at 256): a per-stage floor of the dequantize -> wgmma chain plus tensor time.
inline double stream_k_chunk_us(int mt) { return 0.40 + 0.0012 * mt; }
// One iteration of cps chunks: a 128-K stage shares the per-stage floor (waits, descriptors,
// release) between two chunks.
inline double stream_k_iter_us(int mt, int cps) { return stream_k_chunk_us(mt) * (cps == 2 ? 1.6 : 1.0); }

// Estimated time (us) of a schedule: the busiest CTA's chunks (whole-tile rounds, a partial last
// round counting as a round, plus its stream-K range), plus the fixup kernel (launch, and every
// partial written and read once at ~5 TB/s: they are L2-resident) when tiles are cut. (Fitted
// before the inline reduction; the choices it makes were kept when that came, session 20.)
inline double stream_k_cost_us(const StreamKSchedule& s, int mt) {
  const int64_t dp_rounds = (s.dp_tiles + s.grid - 1) / s.grid;
  const int64_t sk_per_cta = s.sk_tiles ? (s.sk_iters + s.sk_ctas - 1) / s.sk_ctas : 0;
  double t = double(dp_rounds * s.chunks + sk_per_cta) * stream_k_iter_us(mt, s.cps);
  const int64_t pieces = stream_k_split_pieces(s);
  if (pieces) t += 2.0 + double(pieces) * 128.0 * mt * 4 * 2 / 5.0e6;
  return t;
}

// tiles = num_n x num_m output tiles of `chunks` iterations, token tile mt, on at most max_ctas
// CTAs (one per SM): the cheapest (stream_k_cost_us) of whole tiles only (with a partial last
// round) and whole rounds + stream-K over the rest, with or without one more round in the
// stream-K part (a small remainder spread over every CTA gives each a sliver of many tiles).
// mode (tuning knob MIXQ_WS_SCHEDULE): 0 the cheapest, 1 whole tiles only, 2 the cheaper stream-K
// variant whatever it costs.
inline StreamKSchedule make_stream_k_schedule(int num_n, int num_m, int chunks, int max_ctas, int mt,
                                              int mode = 0, int cps = 1) {
  StreamKSchedule s;
  s.cps = cps;
  s.num_n = num_n;
  s.num_m = num_m;
  s.tiles = num_n * num_m;
  s.chunks = chunks;
  const int G = max_ctas < 1 ? 1 : max_ctas;
  StreamKSchedule best = s;
  stream_k_split(best, s.tiles, s.tiles < G ? s.tiles : G);
  double best_cost = stream_k_cost_us(best, mt);
  const int rounds = s.tiles / G, rest = s.tiles % G;
  if (rest != 0 && mode != 1) {
    if (mode == 2) best_cost = 1e30;
    for (int extra = 0; extra <= (rounds >= 1 ? 1 : 0); ++extra) {
      StreamKSchedule c = s;
      stream_k_split(c, (rounds - extra) * G, G);
      const double cost = stream_k_cost_us(c, mt);
      if (cost < best_cost * 0.97) {  // stream-K only for a clear gain
        best_cost = cost;
        best = c;
      }
    }
  }
  return best;
}

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
    if (cta < s.sk_ctas) {
      it = sk_start(s, cta);
      it_end = sk_start(s, cta + 1);
      sk_tile = int(it / s.chunks);
      c = int(it - int64_t(sk_tile) * s.chunks);
    }
    it_begin = it;
  }
  // The CTA's work in order: its whole tiles, then its stream-K range. (The range first, which
  // moves the inline reduction's sums off the grid's end, measured no faster: session 25 call 5.)
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

inline int64_t stream_k_split_pieces(const StreamKSchedule& s) {
  int64_t pieces = 0;
  for (int t = 0; t < s.sk_tiles; ++t) {
    const int64_t b = int64_t(t) * s.chunks;
    const int ways = StreamKCursor::sk_owner(s, b + s.chunks - 1) - StreamKCursor::sk_owner(s, b) + 1;
    if (ways > 1) pieces += ways;
  }
  return pieces;
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

