// The native GGUF kernels' host-side plans (src/cuda/launch/ggml_native.cu): the GEMV's token
// instances and the K splits of the three tensor-core kernels, checked without a GPU against the
// rules their comments state, over every type and a grid of layer shapes and GPU sizes.
#if defined(MIXQ_WITH_CUDA)

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/launch/ggml_native.hpp"

namespace mixq::cuda::ggml {
namespace {

const GType kTypes[] = {GType::Q4_0, GType::Q4_1,  GType::Q5_0, GType::Q5_1, GType::Q8_0, GType::IQ4_NL,
                        GType::Q2_K, GType::Q3_K,  GType::Q4_K, GType::Q5_K, GType::Q6_K, GType::IQ4_XS};

struct Shape {
  int64_t N, K;
};
// Llama layers, odd row counts, rows shorter than a CTA's K range and K of one super-block.
const Shape kShapes[] = {{4096, 4096},  {14336, 4096}, {4096, 14336}, {6144, 4096}, {21504, 14336},
                         {77, 768},     {4099, 512},   {33, 14336},   {1000, 7392}, {8192, 256},
                         {128256, 4096}};
const int kSms[] = {1, 8, 78, 114, 132};

std::string where(GType t, int M, const Shape& s, int sms) {
  return "type " + std::to_string(int(t)) + " M " + std::to_string(M) + " N x K " + std::to_string(s.N) +
         " x " + std::to_string(s.K) + " on " + std::to_string(sms) + " SMs";
}

// A plan's pieces cover the row's chunks exactly: whole steps each, none empty.
void expect_covers(int64_t K, int splits, int64_t split_chunks, int64_t step, const std::string& w) {
  const int64_t chunks = K / 32;
  EXPECT_GE(splits, 1) << w;
  EXPECT_GT(split_chunks, 0) << w;
  EXPECT_EQ(split_chunks % step, 0) << w << ": a piece of " << split_chunks << " chunks, steps of " << step;
  EXPECT_GE(int64_t(splits) * split_chunks, chunks) << w;
  EXPECT_LT(int64_t(splits - 1) * split_chunks, chunks) << w << ": an empty piece";
}

// The rule the dequantizing kernels' splits follow, written out: of 1..max_s pieces of `steps`,
// the one whose CTAs (tiles x pieces that hold steps) fill their last wave over `slots` best, a
// count taken only where it fills at least 0.02 more than the best before it (one piece where
// none fills more than 0.02).
int64_t fullest_split_rule(int64_t steps, int64_t tiles, int64_t slots, int64_t max_s) {
  int64_t best = 1;
  double best_fill = 0;
  for (int64_t s = 1; s <= max_s; ++s) {
    const int64_t per = (steps + s - 1) / s;
    const int64_t pieces = (steps + per - 1) / per;
    const int64_t ctas = tiles * pieces;
    const double fill = double(ctas) / double((ctas + slots - 1) / slots * slots);
    if (fill > best_fill + 0.02) {
      best_fill = fill;
      best = s;
    }
  }
  return (steps + best - 1) / best;
}

TEST(CudaGgmlPlan, GemvTokenInstanceIsTheSmallestThatHoldsM) {
  const std::vector<int> instances = {1, 2, 3, 4, 6, 8, 12, 16};
  for (int M = 1; M <= kGemvMaxRows; ++M) {
    const int tile = gemv_token_tile(M);
    const int want = *std::find_if(instances.begin(), instances.end(), [&](int i) { return i >= M; });
    EXPECT_EQ(tile, want) << "M " << M;
  }
}

TEST(CudaGgmlPlan, SplitsCoverEveryRowInWholeSteps) {
  for (const GType t : kTypes)
    for (const Shape& s : kShapes)
      for (const int sms : kSms)
        for (const int M : {1, 3, 8, 16, 17, 64, 128}) {
          const std::string w = where(t, M, s, sms);
          const MmaSplit ms = mma_split(t, M, s.N, s.K, sms);
          expect_covers(s.K, ms.splits, ms.split_chunks, mma_step_chunks(t), w + " (q8 tensor cores)");
          const HmmaPlan hp = hmma_plan(t, M, s.N, s.K, sms);
          expect_covers(s.K, hp.splits, hp.split_chunks, 8, w + " (dequantizing, staged)");
          EXPECT_EQ(hp.token_tile, hmma_token_tile(M)) << w;
          EXPECT_LE(hp.splits, 8) << w;
          if (hp.splits > 1) {
            EXPECT_GE(hp.split_chunks, 3 * 8) << w << ": a piece shorter than the ring";
          }
          if (M > kStreamMaxRows) continue;
          const StreamPlan sp = stream_plan(t, s.N, s.K, sms);
          expect_covers(s.K, sp.splits, sp.split_chunks, 4, w + " (few-token)");
          EXPECT_LE(sp.splits, 16) << w;
          // four warps a CTA, each at least two groups of four chunks a piece
          if (sp.splits > 1) {
            EXPECT_GE(sp.split_chunks, 2 * 4 * 4) << w;
          }
        }
}

// The few-token kernel's split fills the slots of its own instance: six CTAs an SM for Q4_0,
// four for the others. The grid holds shapes where the two slot counts pick different splits, so
// a plan that ignored the type's instance would fail here.
TEST(CudaGgmlPlan, FewTokenSplitFillsItsInstancesSlots) {
  EXPECT_EQ(stream_ctas_per_sm(GType::Q4_0), 6);
  int differ = 0;
  for (const GType t : kTypes)
    for (const Shape& s : kShapes)
      for (const int sms : kSms) {
        const int64_t chunks = s.K / 32, groups = (chunks + 3) / 4, tiles = (s.N + 15) / 16;
        const int64_t max_s = std::max<int64_t>(1, std::min<int64_t>(16, groups / 8));
        const int64_t own = fullest_split_rule(groups, tiles, int64_t(sms) * stream_ctas_per_sm(t), max_s) * 4;
        const int64_t other =
            fullest_split_rule(groups, tiles, int64_t(sms) * (stream_ctas_per_sm(t) == 6 ? 4 : 6), max_s) * 4;
        EXPECT_EQ(stream_plan(t, s.N, s.K, sms).split_chunks, own) << where(t, 8, s, sms);
        differ += own != other;
      }
  EXPECT_GT(differ, 0) << "no shape of the grid tells the two instances apart";
}

// The staged kernel's split, by the same rule over its slots: two CTAs an SM where its tile's
// shared memory allows (the 4-bit types' 16-token tile does), else one.
TEST(CudaGgmlPlan, StagedSplitFillsTheLastWave) {
  for (const GType t : {GType::Q4_0, GType::Q4_K, GType::IQ4_XS})
    for (const Shape& s : kShapes)
      for (const int sms : kSms) {
        const int M = 16;
        const int64_t steps = (s.K / 32 + 7) / 8, tiles = (s.N + 127) / 128;
        const int64_t slots = int64_t(sms) * (hmma_smem_bytes(t, 16) <= 112 * 1024 ? 2 : 1);
        const int64_t max_s = std::max<int64_t>(1, std::min<int64_t>(8, steps / 3));
        EXPECT_EQ(hmma_plan(t, M, s.N, s.K, sms).split_chunks, fullest_split_rule(steps, tiles, slots, max_s) * 8)
            << where(t, M, s, sms);
      }
}

}  // namespace
}  // namespace mixq::cuda::ggml

#endif  // MIXQ_WITH_CUDA
