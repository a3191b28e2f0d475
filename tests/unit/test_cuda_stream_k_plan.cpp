// The stream-K and K-split work decompositions of the warp-specialized Hopper weight-only kernel
// (kernels/common/stream_k.hpp, dispatch/stream_k_plan.hpp): plain C++ walked here exactly as every
// CTA of a launch walks it, without a GPU. The planner's choices between them: test_cuda_plan.cpp.
#if defined(MIXQ_WITH_CUDA)
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda/dispatch/stream_k_plan.hpp"
#include "cuda/kernels/common/stream_k.hpp"

using namespace mixq::cuda;

// The stream-K walk of the warp-specialized kernel, exactly as every CTA of a launch walks it:
// each (tile, chunk) once, every SM the same work to within one chunk plus the whole-tile rounds,
// a split piece only at the ends of a CTA's range, and the fixup's contributor enumeration
// (owners, slots) naming exactly the CTAs and slots that wrote the tile's pieces.
TEST(CudaPlan, StreamKScheduleCoversEveryChunkOnce) {
  struct Case { int num_n, num_m, chunks, sms, mt; };
  for (const Case c : {Case{168, 1, 224, 132, 256}, Case{168, 4, 224, 132, 256}, Case{32, 1, 64, 132, 256},
                       Case{32, 1, 224, 132, 256}, Case{132, 2, 10, 132, 128}, Case{1, 1, 1, 132, 16},
                       Case{3, 1, 2, 132, 64}, Case{86, 1, 116, 132, 128}, Case{448, 1, 128, 132, 16},
                       Case{200, 3, 7, 46, 256}, Case{5, 1, 1000, 108, 32}, Case{140, 1, 3, 132, 64},
                       Case{32, 4, 64, 132, 256}, Case{168, 1, 112, 264, 16}, Case{224, 1, 64, 264, 16},
                       Case{448, 1, 64, 264, 16}, Case{10, 1, 9, 20, 16}}) {
    const StreamKSchedule s = make_stream_k_schedule(c.num_n, c.num_m, c.chunks, c.sms, c.mt);
    SCOPED_TRACE(::testing::Message() << c.num_n << "x" << c.num_m << " tiles, " << c.chunks
                                      << " chunks, " << c.sms << " SMs, mt " << c.mt);
    ASSERT_EQ(s.tiles, c.num_n * c.num_m);
    ASSERT_GE(s.grid, 1);
    ASSERT_LE(s.grid, c.sms);
    ASSERT_EQ(s.dp_tiles + s.sk_tiles, s.tiles);
    if (s.sk_tiles) {
      ASSERT_EQ(s.dp_tiles % s.grid, 0) << "whole rounds before the stream-K part";
      ASSERT_LE(s.sk_ctas, s.grid);
      ASSERT_LE(s.sk_ctas, s.sk_iters) << "an empty stream-K range";
    }
    std::vector<int> seen(size_t(s.tiles) * c.chunks, 0);
    std::vector<std::vector<std::pair<int, int>>> writers(size_t(s.tiles));  // (cta, slot)
    int64_t most = 0, least = INT64_MAX;
    for (int b = 0; b < s.grid; ++b) {
      StreamKCursor cur(s, b);
      StreamKWork w;
      int64_t work = 0;
      int split_pieces = 0;
      std::vector<bool> sk_split;
      while (cur.next(s, w)) {
        ASSERT_GE(w.tile, 0);
        ASSERT_LT(w.tile, s.tiles);
        ASSERT_LT(w.c0, w.c1);
        ASSERT_LE(w.c1, s.chunks);
        for (int k = w.c0; k < w.c1; ++k) ++seen[size_t(w.tile) * c.chunks + k];
        work += w.c1 - w.c0;
        EXPECT_EQ(w.split, w.c0 != 0 || w.c1 != s.chunks);
        if (w.split) {
          ++split_pieces;
          ASSERT_GE(w.tile, s.dp_tiles);
          writers[size_t(w.tile)].push_back({b, 2 * b + (w.first ? 0 : 1)});
        }
        if (w.tile >= s.dp_tiles) sk_split.push_back(w.split);
      }
      // only the first and the last piece of a range may be cut
      for (size_t i = 1; i + 1 < sk_split.size(); ++i) EXPECT_FALSE(sk_split[i]) << "CTA " << b;
      EXPECT_LE(split_pieces, 2);
      most = std::max(most, work);
      least = std::min(least, work);
    }
    for (size_t i = 0; i < seen.size(); ++i)
      ASSERT_EQ(seen[i], 1) << "tile " << i / c.chunks << " chunk " << i % c.chunks;
    if (s.sk_tiles && s.sk_ctas == s.grid) {
      EXPECT_LE(most - least, 1) << "unbalanced";
    }
    // the fixup's enumeration names exactly the CTAs and slots that wrote each cut tile
    int64_t pieces = 0;
    for (int t = s.dp_tiles; t < s.tiles; ++t) {
      const auto& wr = writers[size_t(t)];
      if (wr.empty()) continue;  // the whole tile in one CTA
      pieces += int64_t(wr.size());
      const int tk = t - s.dp_tiles;
      const int64_t tb = int64_t(tk) * s.chunks;
      const int lo = StreamKCursor::sk_owner(s, tb), hi = StreamKCursor::sk_owner(s, tb + s.chunks - 1);
      ASSERT_EQ(size_t(hi - lo + 1), wr.size());
      // what the inline reduction's owner waits for, resolved at its start
      if (hi > lo) {
        EXPECT_EQ(StreamKCursor::last_contributor(s, lo), hi) << "tile " << tk;
      }
      for (int b = lo; b <= hi; ++b) {
        EXPECT_EQ(wr[size_t(b - lo)].first, b);
        EXPECT_EQ(StreamKCursor::slot_of(s, b, tk), wr[size_t(b - lo)].second);
        // the inline reduction's owner reads every other contributor's first-piece slot
        if (b > lo) {
          EXPECT_EQ(wr[size_t(b - lo)].second, 2 * b);
        }
      }
    }
    EXPECT_EQ(pieces, stream_k_split_pieces(s));
    // the owner of every stream-K iteration is the CTA whose range holds it
    for (int b = 0; b < s.sk_ctas && s.sk_tiles; ++b)
      for (int64_t i = StreamKCursor::sk_start(s, b); i < StreamKCursor::sk_start(s, b + 1); ++i)
        ASSERT_EQ(StreamKCursor::sk_owner(s, i), b) << "iteration " << i;
  }
  // 168 tiles on 132 SMs (14336x21504, M = 256): stream-K instead of two rounds
  const StreamKSchedule a = make_stream_k_schedule(168, 1, 224, 132, 256);
  EXPECT_GT(a.sk_tiles, 0);
  EXPECT_EQ(a.sk_ctas, 132);
  EXPECT_LT(stream_k_cost_us(a, 256), 0.75 * 2 * 224 * stream_k_chunk_us(256));
  // 128 tiles of 64 chunks (4096x4096, M = 1024): one round of whole tiles beats cutting them
  const StreamKSchedule b = make_stream_k_schedule(32, 4, 64, 132, 256);
  EXPECT_EQ(b.sk_tiles, 0);
  EXPECT_EQ(b.grid, 128);
  // an exact multiple: no stream-K
  EXPECT_EQ(make_stream_k_schedule(132, 2, 10, 132, 128).sk_tiles, 0);
}

// The K split over a thread-block cluster (StreamKSchedule::k_split): CTA b runs one piece, range
// b % split of tile b / split, the ranges of a tile contiguous, in rank order and never empty,
// every iteration once; no whole tiles, no stream-K reduction.
TEST(CudaPlan, KSplitScheduleCutsEachTileOverItsCluster) {
  struct Case {
    int tiles, chunks, split;
  };
  for (const Case c : {Case{1, 2, 2}, Case{4, 36, 8}, Case{26, 18, 8}, Case{32, 32, 4},
                       Case{7, 3, 2}, Case{2, 9, 8}, Case{3, 8, 8}}) {
    const StreamKSchedule s = make_k_split_schedule(c.tiles, 1, c.chunks, c.split, 2);
    SCOPED_TRACE(::testing::Message()
                 << c.tiles << " tiles of " << c.chunks << " iterations, split " << c.split);
    ASSERT_EQ(s.grid, c.tiles * c.split);
    EXPECT_EQ(s.k_split, c.split);
    EXPECT_FALSE(s.inline_reduce);
    EXPECT_EQ(s.dp_tiles, 0);
    std::vector<int> seen(size_t(c.tiles) * c.chunks, 0);
    for (int b = 0; b < s.grid; ++b) {
      StreamKCursor cur(s, b);
      StreamKWork w;
      ASSERT_TRUE(cur.next(s, w));
      EXPECT_EQ(w.tile, b / c.split);
      EXPECT_LT(w.c0, w.c1) << "CTA " << b << ": an empty range";
      EXPECT_EQ(w.c0, (b % c.split) * c.chunks / c.split);
      EXPECT_EQ(w.c1, (b % c.split + 1) * c.chunks / c.split);
      EXPECT_TRUE(w.split);
      for (int k = w.c0; k < w.c1; ++k) ++seen[size_t(w.tile) * c.chunks + k];
      EXPECT_FALSE(cur.next(s, w)) << "CTA " << b << ": one piece only";
    }
    for (size_t i = 0; i < seen.size(); ++i)
      ASSERT_EQ(seen[i], 1) << "tile " << i / c.chunks << " iteration " << i % c.chunks;
  }
}

// Tile -> (m block, n block) is a bijection onto the num_m x num_n blocks, grouped by group_n
// N-blocks; with one M-block (decode, the division-free path) tile t is N-block t.
TEST(CudaPlan, StreamKTileCoordsAreABijection) {
  for (int num_n : {1, 7, 8, 9, 20, 168})
    for (int num_m : {1, 2, 3, 5}) {
      StreamKSchedule s;
      s.num_n = num_n;
      s.num_m = num_m;
      s.tiles = num_n * num_m;
      std::vector<int> seen(size_t(s.tiles), 0);
      for (int t = 0; t < s.tiles; ++t) {
        int mb = -1, nb = -1;
        stream_k_tile_coords(s, t, mb, nb);
        ASSERT_GE(mb, 0);
        ASSERT_LT(mb, num_m);
        ASSERT_GE(nb, 0);
        ASSERT_LT(nb, num_n);
        ++seen[size_t(mb * num_n + nb)];
        if (num_m == 1) EXPECT_EQ(nb, t);
        else EXPECT_EQ(nb / s.group_n, t / (s.group_n * num_m)) << "tile " << t << " left its group";
      }
      for (int v : seen) EXPECT_EQ(v, 1) << num_n << " x " << num_m;
    }
}

#endif  // MIXQ_WITH_CUDA
