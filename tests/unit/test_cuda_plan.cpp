// The weight-only CUDA planner is a pure host function: its decisions are tested without a GPU.
#if defined(MIXQ_WITH_CUDA)
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/wo_plan.hpp"
#include "cuda/wo_stream_k.hpp"
#include "mixq/error.hpp"

using namespace mixq;
using namespace mixq::cuda;

namespace {
WoLayout layout(int64_t N, int64_t K, int bits, int64_t group) {
  WoLayout L;
  L.N = N;
  L.K = K;
  L.Np = round_up(N, kTileRows);
  L.Kp = round_up(K, kChunkK);
  L.bits = bits;
  L.group = group;
  L.groups = (L.Kp + group - 1) / group;
  return L;
}
}  // namespace

TEST(CudaPlan, KernelChoiceFollowsTheMeasuredThreshold) {
  const DeviceCaps caps;  // H100/H200-like defaults
  const WoLayout L = layout(21504, 14336, 4, 128);
  for (int64_t M : {1, 8, 16, 32}) {
    EXPECT_EQ(plan_weight_only(M, L, 2, false, false, true, caps, "").kernel, WoKernel::Stream) << M;
  }
  for (int64_t M : {33, 64, 1000, 4096}) {
    EXPECT_EQ(plan_weight_only(M, L, 2, false, false, true, caps, "").kernel, WoKernel::DequantCublas) << M;
  }
  EXPECT_EQ(plan_weight_only(17, L, 4, true, false, true, caps, "").kernel, WoKernel::DequantCublas);
  EXPECT_EQ(plan_weight_only(4096, L, 2, false, false, true, caps, "stream").kernel, WoKernel::Stream);
  EXPECT_EQ(plan_weight_only(1, L, 2, false, false, true, caps, "cublas").kernel, WoKernel::DequantCublas);
  EXPECT_THROW(plan_weight_only(1, L, 2, false, false, true, caps, "fast"), Error);
}

TEST(CudaPlan, StreamDecompositionCoversKAndRespectsLimits) {
  DeviceCaps caps;
  // cluster capacity: none known, a GPU that holds any grid, one that holds 20 clusters at most
  for (int capacity : {0, 1 << 20, 20})
    for (int knob : {-1, 0, 1})
      for (int sms : {46, 108, 132}) {
        caps.sm_count = sms;
        caps.stream_clusters = capacity > 0;
        for (auto& row : caps.cluster_capacity)
          for (int& c : row) c = capacity;
        for (auto [N, K] : {std::pair<int64_t, int64_t>{4096, 4096}, {21504, 14336}, {10944, 7392}, {17, 31}})
          for (int bits : {4, 8})
            for (int64_t g : {int64_t(32), int64_t(128), int64_t(1) << 30})
              for (int64_t M : {1, 3, 8, 9, 16, 31, 32, 64, 200}) {
                const WoLayout L = layout(N, K, bits, g);
                const WoPlan p = plan_weight_only(M, L, 2, false, false, true, caps, "stream", false,
                                                  StreamKnobs{knob});
                const int chunks = int(L.Kp / kChunkK);
                EXPECT_GE(p.splits * p.chunks_per_split, chunks);
                EXPECT_LT((p.splits - 1) * p.chunks_per_split, chunks) << "an empty split";
                EXPECT_GE(p.chunks_per_stage, 1);
                EXPECT_LE(p.chunks_per_stage, p.chunks_per_split);
                EXPECT_LE(p.smem_bytes, caps.smem_per_block_optin);
                EXPECT_GE(p.mt, std::min<int64_t>(M, 64));
                EXPECT_EQ(p.x_rows, std::min<int64_t>(p.mt, M));
                EXPECT_EQ(p.m_blocks, (M + p.mt - 1) / p.mt);
                // clusters only where the kernel can launch them and (unless forced) where the whole
                // grid of clusters fits at once; then neither partials nor tickets in global memory
                if (capacity == 0 || knob == 0 || p.splits == 1) {
                  EXPECT_FALSE(p.cluster);
                }
                if (capacity > 0 && knob == 1 && p.splits > 1) {
                  EXPECT_TRUE(p.cluster);
                }
                if (p.cluster) {
                  EXPECT_LE(p.splits, kStreamMaxClusterSplits);
                  if (knob < 0) {
                    EXPECT_LE(int64_t(p.n_blocks) * p.m_blocks, capacity);
                  }
                  EXPECT_EQ(p.partial_floats, 0u);
                  EXPECT_EQ(p.tickets, 0u);
                  EXPECT_GE(p.smem_bytes, size_t(4) * wo_row_tiles(p.mt, bits, false) * kTileRows * p.x_rows * 4);
                } else {
                  EXPECT_LE(p.partial_floats, kMaxPartialFloats > size_t(M * N) ? kMaxPartialFloats : size_t(M * N) * 1);
                  EXPECT_EQ(p.tickets, p.splits > 1 ? size_t(p.n_blocks) * p.m_blocks : 0u);
                  EXPECT_EQ(p.partial_floats, p.splits > 1 ? size_t(p.splits) * M * N : 0u);
                }
                EXPECT_GE(wo_workspace_bytes(p), p.partial_floats * 4 + p.tickets * 4);
              }
      }
}

// The automatic choice keeps the split count of the global-partials plan: a cluster never costs
// splits (14336x4096 at M = 1 wants 32; capping it at 16 for a cluster measured 10% slower).
TEST(CudaPlan, StreamClusterKeepsTheSplitCount) {
  DeviceCaps caps;
  caps.stream_clusters = true;
  for (auto& row : caps.cluster_capacity)
    for (int& c : row) c = 1 << 20;
  for (auto [N, K] : {std::pair<int64_t, int64_t>{4096, 4096}, {4096, 14336}, {21504, 14336}}) {
    const WoLayout L = layout(N, K, 4, 128);
    const WoPlan a = plan_weight_only(1, L, 2, false, false, true, caps, "stream", false, StreamKnobs{0});
    const WoPlan b = plan_weight_only(1, L, 2, false, false, true, caps, "stream");
    EXPECT_EQ(a.splits, b.splits) << N << "x" << K;
    EXPECT_EQ(b.cluster, a.splits > 1 && a.splits <= kStreamMaxClusterSplits) << N << "x" << K;
  }
}

// Programmatic dependent launch only where the loaded image has the sm_90 grid-dependency wait
// (a launch without it on an older image would let the kernel read activations too early).
TEST(CudaPlan, StreamDependentLaunchOnlyOnTheSm90Image) {
  const WoLayout L = layout(4096, 4096, 4, 128);
  DeviceCaps caps;
  for (bool image : {false, true}) {
    caps.stream_clusters = image;
    EXPECT_EQ(plan_weight_only(1, L, 2, false, false, true, caps, "stream", false, StreamKnobs{-1, -1}).pdl, image);
    EXPECT_EQ(plan_weight_only(1, L, 2, false, false, true, caps, "stream", false, StreamKnobs{-1, 1}).pdl, image);
    EXPECT_FALSE(plan_weight_only(1, L, 2, false, false, true, caps, "stream", false, StreamKnobs{-1, 0}).pdl);
  }
  // the measured rule: on where the grid fills >= 80% of the block slots or the split is short,
  // off for a long split in an underfilled grid (W8 8192x57344 at M = 1: 448 blocks of 660, 128
  // chunks each)
  for (auto [N, K, bits, want] : {std::tuple<int64_t, int64_t, int, bool>{4096, 4096, 4, true},
                                  {4096, 4096, 8, true},
                                  {21504, 14336, 4, true},
                                  {8192, 28672, 8, true},
                                  {57344, 8192, 8, false},
                                  {21504, 14336, 8, false}}) {
    const WoPlan p = plan_weight_only(1, layout(N, K, bits, 128), 2, false, false, true, caps, "stream");
    const int64_t blocks = int64_t(p.n_blocks) * p.splits * p.m_blocks;
    const int64_t slots = int64_t(caps.sm_count) * wo_stream_resident_blocks(8, bits);
    EXPECT_EQ(p.pdl, want) << K << "x" << N << " W" << bits << ": " << blocks << " blocks of " << slots
                           << ", " << p.chunks_per_split << " chunks per split";
    EXPECT_TRUE(plan_weight_only(1, layout(N, K, bits, 128), 2, false, false, true, caps, "stream", false,
                                 StreamKnobs{-1, 1}).pdl);
  }
}

// The wgmma kernel's dependent launch and early weight stages (wo_plan.cpp, measured): PDL with
// the whole ring early on the weight-stream-bound launches, PDL alone at M > 64 below 96 MiB,
// neither elsewhere; MIXQ_WGMMA_PDL=0|1 forces PDL.
TEST(CudaPlan, WgmmaDependentLaunchFollowsTheMeasuredRule) {
  const DeviceCaps caps;
  const char* saved = std::getenv("MIXQ_WGMMA_PDL");
  const std::string saved_value = saved ? saved : "";
  unsetenv("MIXQ_WGMMA_PDL");
  // (pdl, early stages) of M x N x K at `bits`
  auto plan = [&](int64_t M, int64_t N, int64_t K, int bits) {
    const WoPlan p = plan_weight_only(M, layout(N, K, bits, 128), 2, false, false, true, caps, "wgmma", true);
    EXPECT_EQ(p.kernel, WoKernel::Wgmma);
    return std::make_pair(p.pdl, p.early_stages);
  };
  using P = std::pair<bool, int>;
  EXPECT_EQ(plan(4, 21504, 14336, 4), P(true, -1));    // W4, 147 MiB, two CTAs per SM
  EXPECT_EQ(plan(16, 28672, 4096, 4), P(true, -1));    // W4, 56 MiB
  EXPECT_EQ(plan(32, 4096, 14336, 8), P(true, -1));    // W8, 56 MiB
  EXPECT_EQ(plan(64, 57344, 8192, 8), P(true, -1));
  EXPECT_EQ(plan(16, 8192, 8192, 4), P(false, 0));     // W4, 32 MiB: one CTA per SM
  EXPECT_EQ(plan(32, 21504, 14336, 4), P(false, 0));   // W4 past M = 16
  EXPECT_EQ(plan(16, 4096, 4096, 8), P(false, 0));     // W8, 16 MiB
  EXPECT_EQ(plan(256, 8192, 8192, 8), P(true, 0));     // M > 64, 64 MiB
  EXPECT_EQ(plan(128, 4096, 4096, 4), P(true, 0));
  EXPECT_EQ(plan(256, 8192, 28672, 4), P(false, 0));   // 112 MiB
  EXPECT_EQ(plan(128, 21504, 14336, 8), P(false, 0));
  setenv("MIXQ_WGMMA_PDL", "1", 1);
  EXPECT_EQ(plan(16, 4096, 4096, 4), P(true, 0));
  setenv("MIXQ_WGMMA_PDL", "0", 1);
  EXPECT_EQ(plan(4, 21504, 14336, 4), P(false, 0));
  if (saved) setenv("MIXQ_WGMMA_PDL", saved_value.c_str(), 1);
  else unsetenv("MIXQ_WGMMA_PDL");
}

// The streaming kernel's lane-order pairs (wo_layout.hpp): a bijection of the rows padded to 64
// and the groups onto the buffer, and each lane's 2 * RT pairs of a group contiguous, starting at
// its warp's first tile within the quad.
TEST(CudaPlan, StreamPairIndexIsLaneContiguous) {
  for (int64_t N : {16, 100, 4096}) {
    for (int64_t groups : {1, 3, 32}) {
      WoLayout L = layout(N, 64 * groups, 4, 64);
      ASSERT_EQ(L.groups, groups);
      const int64_t rows = round_up(L.Np, 64);
      ASSERT_EQ(L.stream_pair_bytes(), rows * groups * 4);
      std::vector<int> seen(size_t(rows * groups), 0);
      for (int64_t n = 0; n < rows; ++n)
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t i = stream_pair_index(n, g, groups);
          ASSERT_GE(i, 0);
          ASSERT_LT(i, rows * groups);
          ++seen[size_t(i)];
        }
      for (int c : seen) ASSERT_EQ(c, 1);
      // lane l of a warp whose RT tiles start at tile nt0 (a multiple of RT): rows
      // nt0*16 + rt*16 + l/4 (+ 8), rt < RT, at base + 2 rt (+ 1)
      for (int rt_count : {1, 2, 4})
        for (int64_t nt0 = 0; nt0 < rows / 16; nt0 += rt_count)
          for (int lane = 0; lane < 32; lane += 5)
            for (int64_t g = 0; g < groups; ++g) {
              const int64_t base = stream_pair_index(nt0 * 16 + lane / 4, g, groups);
              EXPECT_EQ(base, ((nt0 / 4 * groups + g) * 8 + lane / 4) * 8 + (nt0 % 4) * 2);
              for (int rt = 0; rt < rt_count; ++rt)
                for (int h = 0; h < 2; ++h)
                  ASSERT_EQ(stream_pair_index((nt0 + rt) * 16 + lane / 4 + 8 * h, g, groups), base + 2 * rt + h);
            }
    }
  }
}

TEST(CudaPlan, CublasChunksAreTileAlignedAndBounded) {
  const DeviceCaps caps;
  const WoLayout L = layout(57344, 8192, 4, 128);
  const WoPlan p = plan_weight_only(4096, L, 2, false, true, false, caps, "");
  EXPECT_EQ(p.kernel, WoKernel::DequantCublas);
  EXPECT_EQ(p.chunk_rows % kTileRows, 0);
  EXPECT_LE(p.chunk_bytes, kDequantChunkBytes);
  EXPECT_EQ(p.gather_bytes, size_t(4096) * 8192 * 2);  // act-order permutes X once
  EXPECT_EQ(p.out_bytes, size_t(4096) * 57344 * 4);    // f32 staging for an output cuBLAS can't write
}
TEST(CudaPlan, WgmmaServesLargerBatchesOnHopper) {
  const DeviceCaps caps;
  const WoLayout L = layout(21504, 14336, 4, 128);
  for (int64_t M : {9, 16, 33, 64, 65, 128, 200, 256, 1024, 4096}) {
    const WoPlan p = plan_weight_only(M, L, 2, false, false, true, caps, M > kWgmmaMaxM ? "wgmma" : "", true);
    ASSERT_EQ(p.kernel, WoKernel::Wgmma) << M;
    EXPECT_EQ(p.mt, M <= 16 ? 16 : M <= 32 ? 32 : M <= 64 ? 64 : M <= 128 ? 128 : 256);
    EXPECT_EQ(p.m_blocks, (M + p.mt - 1) / p.mt);
    EXPECT_EQ(p.n_blocks, (21504 + 127) / 128);
    const int chunks = int(L.Kp / kChunkK);
    EXPECT_GE(p.splits * p.chunks_per_split, chunks);
    EXPECT_LT((p.splits - 1) * p.chunks_per_split, chunks) << "an empty split";
    // the warp-specialized stream-K kernel (two partial slots per CTA for the fixup) at every M
    EXPECT_TRUE(p.stream_k) << M;
    if (p.stream_k) {
      EXPECT_EQ(p.splits, 1);
      // two slots per CTA; small token tiles may run two CTAs per SM
      EXPECT_EQ(p.partial_floats, size_t(2) * caps.sm_count * ws_max_ctas_per_sm(p.mt) * 128 * p.mt);
      // the inline reduction's completion flags: 8 per stream-K tile, fewer than 2 rounds of tiles
      EXPECT_EQ(p.tickets, size_t(2) * caps.sm_count * ws_max_ctas_per_sm(p.mt) * kStreamKFlagsPerTile);
      EXPECT_EQ(p.tickets, size_t(ws_flags(caps.sm_count, p.mt)));
    } else {
      EXPECT_LE(p.partial_floats, kMaxWgmmaPartialFloats);
      EXPECT_EQ(p.partial_floats, p.splits > 1 ? size_t(p.splits) * M * 21504 : 0);
    }
  }
  // short GEMMs with few tiles take token tiles of 128 past M = 128; long K keeps 256
  const auto mt_of = [&](int64_t M, int64_t N, int64_t K) {
    return plan_weight_only(M, layout(N, K, 4, 128), 2, false, false, true, caps, "", true).mt;
  };
  EXPECT_EQ(mt_of(256, 4096, 4096), 128);   // 32 tiles -> 64 (mt = 64 would make 128: no faster)
  EXPECT_EQ(mt_of(256, 6144, 4096), 128);   // 48 -> 96
  EXPECT_EQ(mt_of(512, 4096, 4096), 128);   // 64 -> 128
  EXPECT_EQ(mt_of(1024, 4096, 4096), 256);  // 128 tiles already
  EXPECT_EQ(mt_of(256, 4096, 14336), 256);  // K = 14336: stream-K
  EXPECT_EQ(mt_of(256, 28672, 4096), 256);
  EXPECT_EQ(mt_of(128, 6144, 4096), 128);   // only tiles of 256 shrink
  // W8 runs the warp-specialized kernel at every M
  for (int64_t M : {9, 64, 300})
    EXPECT_TRUE(plan_weight_only(M, layout(21504, 14336, 8, 128), 2, false, false, true, caps, "wgmma", true).stream_k);
  // without the kernel (or forced away) the old paths stay
  EXPECT_EQ(plan_weight_only(64, L, 2, false, false, true, caps, "", false).kernel,
            WoKernel::DequantCublas);
  EXPECT_EQ(plan_weight_only(64, L, 2, false, false, true, caps, "cublas", true).kernel,
            WoKernel::DequantCublas);
  // the streaming kernel up to stream_max_m_wgmma (measured, session 22), then wgmma: W4 up to
  // M = 6-8 on small weights and where the wgmma kernel has fewer tiles than SMs, 2-4 on the
  // other large ones; W8 from 6 down to 0 (the wgmma kernel at every M) as its tiles grow
  auto kernel_at = [&](int64_t M, int64_t N, int64_t K, int bits) {
    return plan_weight_only(M, layout(N, K, bits, 128), 2, false, false, true, caps, "", true).kernel;
  };
  for (auto [N, K, bits, last] : {std::tuple<int64_t, int64_t, int, int64_t>{4096, 4096, 4, 6},
                                  {6144, 4096, 4, 8},
                                  {4096, 14336, 4, 8},
                                  {28672, 4096, 4, 4},
                                  {8192, 28672, 4, 6},
                                  {21504, 14336, 4, 3},
                                  {57344, 8192, 4, 2},
                                  {4096, 4096, 8, 4},
                                  {6144, 4096, 8, 6},
                                  {8192, 8192, 8, 6},
                                  {8192, 28672, 8, 3},
                                  {28672, 4096, 8, 1},
                                  {21504, 14336, 8, 1},
                                  {57344, 8192, 8, 0}}) {
    SCOPED_TRACE(std::to_string(K) + "x" + std::to_string(N) + " W" + std::to_string(bits));
    EXPECT_EQ(stream_max_m_wgmma(layout(N, K, bits, 128), caps.sm_count), last);
    if (last >= 1) {
      EXPECT_EQ(kernel_at(1, N, K, bits), WoKernel::Stream);
      EXPECT_EQ(kernel_at(last, N, K, bits), WoKernel::Stream);
    }
    EXPECT_EQ(kernel_at(last + 1, N, K, bits), WoKernel::Wgmma);
  }
  const WoLayout small = layout(4096, 4096, 4, 128);
  // past kWgmmaMaxM: dequantize + cuBLAS, except on large GEMMs (K >= 8192, N K >= 128M) up to
  // kWgmmaBigMaxM
  EXPECT_EQ(plan_weight_only(kWgmmaMaxM + 1, small, 2, false, false, true, caps, "", true).kernel,
            WoKernel::DequantCublas);
  EXPECT_EQ(plan_weight_only(kWgmmaBigMaxM, L, 2, false, false, true, caps, "", true).kernel, WoKernel::Wgmma);
  EXPECT_EQ(plan_weight_only(kWgmmaBigMaxM + 1, L, 2, false, false, true, caps, "", true).kernel,
            WoKernel::DequantCublas);
  EXPECT_EQ(plan_weight_only(kWgmmaBigMaxM, layout(4096, 14336, 4, 128), 2, false, false, true, caps, "", true).kernel,
            WoKernel::DequantCublas);  // 14336x4096: N K = 58M
  // a 16-bit output (the wgmma kernel's TMA-store epilogue) keeps the wgmma kernel at every M
  for (int64_t M : {kWgmmaMaxM + 1, kWgmmaBigMaxM + 1, int64_t(16384)}) {
    EXPECT_EQ(plan_weight_only(M, small, 2, false, false, true, caps, "", true, {}, true).kernel, WoKernel::Wgmma) << M;
    EXPECT_EQ(plan_weight_only(M, L, 2, false, false, true, caps, "", true, {}, true).kernel, WoKernel::Wgmma) << M;
    // ... where the kernel can run and nothing is forced
    EXPECT_EQ(plan_weight_only(M, small, 2, false, false, true, caps, "", false, {}, true).kernel,
              WoKernel::DequantCublas) << M;
    EXPECT_EQ(plan_weight_only(M, small, 2, false, false, true, caps, "cublas", true, {}, true).kernel,
              WoKernel::DequantCublas) << M;
  }
  EXPECT_EQ(plan_weight_only(8, L, 2, false, false, true, caps, "wgmma", true).kernel, WoKernel::Wgmma);
  EXPECT_THROW(plan_weight_only(64, L, 2, false, false, true, caps, "wgmma", false), Error);
}

TEST(CudaPlan, SplitsFillWaves) {
  EXPECT_EQ(choose_splits(132, 132, 224, 8), 1);   // one full wave
  EXPECT_EQ(choose_splits(168, 132, 224, 8), 3);   // 1.27 waves -> 504 CTAs in 3.8 waves
  EXPECT_EQ(choose_splits(32, 132, 64, 8), 4);     // small layer: 128 CTAs
  EXPECT_EQ(choose_splits(32, 132, 8, 8), 2);      // at least 4 chunks per split
  EXPECT_EQ(choose_splits(1000, 132, 224, 1), 1);  // capped
}

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
