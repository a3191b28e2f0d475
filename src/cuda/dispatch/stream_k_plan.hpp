// The planner's side of the stream-K decomposition (kernels/common/stream_k.hpp): splitting the
// tiles between whole-tile rounds and stream-K ranges, and the cost model that picks the split.
#pragma once

#include <cstdint>

#include "cuda/kernels/common/stream_k.hpp"

namespace mixq::cuda {

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
inline int64_t stream_k_split_pieces(const StreamKSchedule& s) {
  int64_t pieces = 0;
  for (int t = 0; t < s.sk_tiles; ++t) {
    const int64_t b = int64_t(t) * s.chunks;
    const int ways = StreamKCursor::sk_owner(s, b + s.chunks - 1) - StreamKCursor::sk_owner(s, b) + 1;
    if (ways > 1) pieces += ways;
  }
  return pieces;
}

// A schedule's tiles: num_n x num_m output tiles of `chunks` iterations of cps 64-K chunks (the
// rest of the schedule at its defaults).
inline StreamKSchedule stream_k_tiles(int num_n, int num_m, int chunks, int cps) {
  StreamKSchedule s;
  s.cps = cps;
  s.num_n = num_n;
  s.num_m = num_m;
  s.tiles = num_n * num_m;
  s.chunks = chunks;
  return s;
}

// Estimated time of one 64-K stage of a 128 x mt tile on one SM (us), fitted to runs of the kernel
// on H100 with three TMA loads per stage (docs/decisions/wo-wgmma-stream-k-reduction.md: ~0.44 at
// mt = 64 and ~0.72 at 256): a per-stage floor of the dequantize -> wgmma chain plus tensor time.
inline double stream_k_chunk_us(int mt) { return 0.40 + 0.0012 * mt; }
// One iteration of cps chunks: a 128-K stage shares the per-stage floor (waits, descriptors,
// release) between two chunks.
inline double stream_k_iter_us(int mt, int cps) { return stream_k_chunk_us(mt) * (cps == 2 ? 1.6 : 1.0); }

// Estimated time (us) of a schedule: the busiest CTA's chunks (whole-tile rounds, a partial last
// round counting as a round, plus its stream-K range), plus the fixup kernel (launch, and every
// partial written and read once at ~5 TB/s: they are L2-resident) when tiles are cut. (Fitted
// before the inline reduction; the choices it makes were kept when that came: docs/decisions/wo-wgmma-stream-k-reduction.md.)
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
// mode (Tuning::wo_schedule): 0 the cheapest, 1 whole tiles only, 2 the cheaper stream-K
// variant whatever it costs.
inline StreamKSchedule make_stream_k_schedule(int num_n, int num_m, int chunks, int max_ctas, int mt,
                                              int mode = 0, int cps = 1) {
  StreamKSchedule s = stream_k_tiles(num_n, num_m, chunks, cps);
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

// The K split over thread-block clusters (StreamKSchedule::k_split, sm90_wo_ws_k_split.cuh): every
// tile on its own cluster of `split` CTAs, one K range each, no whole tiles and no stream-K
// reduction.
inline StreamKSchedule make_k_split_schedule(int num_n, int num_m, int chunks, int split, int cps) {
  StreamKSchedule s = stream_k_tiles(num_n, num_m, chunks, cps);
  s.k_split = split;
  s.dp_tiles = 0;
  s.sk_tiles = s.tiles;
  s.sk_iters = int64_t(s.tiles) * chunks;
  s.sk_ctas = s.grid = s.tiles * split;
  s.inline_reduce = false;
  return s;
}

}  // namespace mixq::cuda
