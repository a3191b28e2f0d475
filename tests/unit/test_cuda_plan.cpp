// The CUDA planners are pure host functions of (call, weight, device capabilities, tuning): their
// decisions are tested without a GPU, table-driven (the stream-K and K-split walks themselves:
// test_cuda_stream_k_plan.cpp).
#if defined(MIXQ_WITH_CUDA)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/dispatch/stream_k_plan.hpp"
#include "cuda/dispatch/wo_plan.hpp"
#include "cuda/kernels/common/stream_k.hpp"
#include "cuda/launch/sm90_wo_ws_instances.hpp"
#include "mixq/error.hpp"
#include "mixq/tuning.hpp"

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

WoWeight weight(const WoLayout& L, bool gather = false) {
  WoWeight w;
  w.L = L;
  int s = 0;
  while ((int64_t(1) << s) < L.group && s < 30) ++s;
  w.group_shift = L.group >= L.K ? 30 : s;
  w.int_zero = true;
  w.bf16_zero_pairs = true;
  w.gather = gather;
  return w;
}

// An H100's capabilities, with or without the sm_90a image (the Hopper kernels).
DeviceCaps hopper(bool sm90a = true) {
  DeviceCaps c = DeviceCaps::h100();
  c.sm90a = sm90a;
  return c;
}

struct Call {
  int64_t M = 1;
  int x = 0, y = -1;  // IoType: 0 f16, 1 bf16, 2 f32; y -1: as x
  bool y_tma = false, aligned = true, gather = false;
  bool fill = false;  // WoCall::fill_sms (the conv implicit GEMM)
  std::string force;
  Tuning t;
};
WoPlan plan(const Call& c, const WoLayout& L, const DeviceCaps& caps) {
  WoCall call;
  call.M = c.M;
  call.x_type = c.x;
  call.y_type = c.y < 0 ? c.x : c.y;
  call.y_tma = c.y_tma;
  call.x_aligned = c.aligned;
  call.fill_sms = c.fill;
  return plan_weight_only(call, weight(L, c.gather), caps, c.t, c.force);
}
WoPlan plan(int64_t M, const WoLayout& L, const DeviceCaps& caps, const std::string& force = "") {
  Call c;
  c.M = M;
  c.force = force;
  return plan(c, L, caps);
}
Family family(int64_t M, const WoLayout& L, const DeviceCaps& caps, const std::string& force = "") {
  return plan(M, L, caps, force).id.family;
}
// The wgmma kernel's plan (forced) on an H100 for a K x N weight of g128 blocks: M rows, an im2col
// conv call (fill) or a linear one, the tuning keys of `tune`.
WoPlan ws_plan(int64_t M, int64_t N, int64_t K, bool fill = false, const char* tune = "",
               int bits = 4) {
  Call c;
  c.M = M;
  c.fill = fill;
  c.force = "sm90_wo_ws";
  c.t = Tuning::parse(tune);
  return plan(c, layout(N, K, bits, 128), hopper());
}
}  // namespace

TEST(CudaPlan, KernelChoiceFollowsTheMeasuredThreshold) {
  const DeviceCaps caps = hopper(false);  // without the wgmma kernel
  const WoLayout L = layout(21504, 14336, 4, 128);
  for (int64_t M : {1, 8, 16, 32}) EXPECT_EQ(family(M, L, caps), Family::WoStream) << M;
  for (int64_t M : {33, 64, 1000, 4096}) EXPECT_EQ(family(M, L, caps), Family::WoDequantCublas) << M;
  Call f32;
  f32.M = 17;
  f32.x = 2;
  EXPECT_EQ(plan(f32, L, caps).id.family, Family::WoDequantCublas);
  EXPECT_EQ(family(4096, L, caps, "sm80_wo_stream"), Family::WoStream);
  EXPECT_EQ(family(1, L, caps, "wo_dequant_cublas"), Family::WoDequantCublas);
  EXPECT_THROW(family(1, L, caps, "fast"), Error);
  EXPECT_THROW(family(1, L, caps, "stream"), Error);  // the old names are gone
  EXPECT_THROW(family(1, L, caps, "sm90_wo_ws"), Error);  // no sm_90a image: a clear error
}

TEST(CudaPlan, StreamDecompositionCoversKAndRespectsLimits) {
  DeviceCaps caps = hopper(false);
  // cluster capacity: none known, a GPU that holds any grid, one that holds 20 clusters at most
  for (int capacity : {0, 1 << 20, 20})
    for (Toggle knob : {Toggle::Auto, Toggle::Off, Toggle::On})
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
                Call c;
                c.M = M;
                c.force = "sm80_wo_stream";
                c.t.wo_stream_cluster = knob;
                const WoPlan p = plan(c, L, caps);
                const int mt = p.id.tile_m;
                const int chunks = int(L.Kp / kChunkK);
                EXPECT_EQ(p.id.fine, weight(L).group_shift < 6);
                EXPECT_GE(p.splits * p.chunks_per_split, chunks);
                EXPECT_LT((p.splits - 1) * p.chunks_per_split, chunks) << "an empty split";
                EXPECT_GE(p.chunks_per_stage, 1);
                EXPECT_LE(p.chunks_per_stage, p.chunks_per_split);
                EXPECT_LE(p.smem_bytes, caps.smem_per_block_optin);
                EXPECT_GE(mt, std::min<int64_t>(M, 64));
                EXPECT_EQ(p.x_rows, std::min<int64_t>(mt, M));
                EXPECT_EQ(p.m_blocks, (M + mt - 1) / mt);
                // clusters only where the kernel can launch them and (unless forced) where the whole
                // grid of clusters fits at once; then neither partials nor tickets in global memory
                if (capacity == 0 || knob == Toggle::Off || p.splits == 1) {
                  EXPECT_FALSE(p.cluster);
                }
                if (capacity > 0 && knob == Toggle::On && p.splits > 1) {
                  EXPECT_TRUE(p.cluster);
                }
                if (p.cluster) {
                  EXPECT_LE(p.splits, kStreamMaxClusterSplits);
                  if (knob == Toggle::Auto) {
                    EXPECT_LE(int64_t(p.n_blocks) * p.m_blocks, capacity);
                  }
                  EXPECT_EQ(p.partial_floats, 0u);
                  EXPECT_EQ(p.tickets, 0u);
                  EXPECT_GE(p.smem_bytes, size_t(4) * wo_row_tiles(mt, bits, false) * kTileRows * p.x_rows * 4);
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
  DeviceCaps caps = hopper(false);
  caps.stream_clusters = true;
  for (auto& row : caps.cluster_capacity)
    for (int& c : row) c = 1 << 20;
  for (auto [N, K] : {std::pair<int64_t, int64_t>{4096, 4096}, {4096, 14336}, {21504, 14336}}) {
    const WoLayout L = layout(N, K, 4, 128);
    Call off;
    off.force = "sm80_wo_stream";
    off.t.wo_stream_cluster = Toggle::Off;
    const WoPlan a = plan(off, L, caps);
    const WoPlan b = plan(1, L, caps, "sm80_wo_stream");
    EXPECT_EQ(a.splits, b.splits) << N << "x" << K;
    EXPECT_EQ(b.cluster, a.splits > 1 && a.splits <= kStreamMaxClusterSplits) << N << "x" << K;
  }
}

// Programmatic dependent launch only where the loaded image has the sm_90 grid-dependency wait
// (a launch without it on an older image would let the kernel read activations too early).
TEST(CudaPlan, StreamDependentLaunchOnlyOnTheSm90Image) {
  const WoLayout L = layout(4096, 4096, 4, 128);
  DeviceCaps caps = hopper(false);
  auto pdl = [&](const WoLayout& l, Toggle t) {
    Call c;
    c.force = "sm80_wo_stream";
    c.t.wo_stream_pdl = t;
    return plan(c, l, caps).pdl;
  };
  for (bool image : {false, true}) {
    caps.stream_clusters = image;
    EXPECT_EQ(pdl(L, Toggle::Auto), image);
    EXPECT_EQ(pdl(L, Toggle::On), image);
    EXPECT_FALSE(pdl(L, Toggle::Off));
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
    const WoPlan p = plan(1, layout(N, K, bits, 128), caps, "sm80_wo_stream");
    const int64_t blocks = int64_t(p.n_blocks) * p.splits * p.m_blocks;
    const int64_t slots = int64_t(caps.sm_count) * wo_stream_resident_blocks(8, bits);
    EXPECT_EQ(p.pdl, want) << K << "x" << N << " W" << bits << ": " << blocks << " blocks of " << slots
                           << ", " << p.chunks_per_split << " chunks per split";
    EXPECT_TRUE(pdl(layout(N, K, bits, 128), Toggle::On));
  }
}

// The wgmma kernel's dependent launch and early weight stages (docs/decisions/
// wo-wgmma-pdl-early-stages.md): PDL with the whole ring early on the weight-stream-bound launches,
// PDL alone at M > 64 below 96 MiB, neither elsewhere; the tuning forces PDL and early stages.
TEST(CudaPlan, WgmmaDependentLaunchFollowsTheMeasuredRule) {
  const DeviceCaps caps = hopper();
  auto pdl = [&](int64_t M, int64_t N, int64_t K, int bits, Tuning t = Tuning()) {
    Call c;
    c.M = M;
    c.force = "sm90_wo_ws";
    c.t = t;
    const WoPlan p = plan(c, layout(N, K, bits, 128), caps);
    EXPECT_EQ(p.id.family, Family::WoWgmma);
    return std::make_pair(p.pdl, p.sched.early_stages);
  };
  using P = std::pair<bool, int>;
  EXPECT_EQ(pdl(4, 21504, 14336, 4), P(true, -1));    // W4, 147 MiB, two CTAs per SM
  EXPECT_EQ(pdl(16, 28672, 4096, 4), P(true, -1));    // W4, 56 MiB
  EXPECT_EQ(pdl(32, 4096, 14336, 8), P(true, -1));    // W8, 56 MiB
  EXPECT_EQ(pdl(64, 57344, 8192, 8), P(true, -1));
  EXPECT_EQ(pdl(16, 8192, 8192, 4), P(false, 0));     // W4, 32 MiB: one CTA per SM
  EXPECT_EQ(pdl(32, 21504, 14336, 4), P(false, 0));   // W4 past M = 16
  EXPECT_EQ(pdl(16, 4096, 4096, 8), P(false, 0));     // W8, 16 MiB
  EXPECT_EQ(pdl(256, 8192, 8192, 8), P(true, 0));     // M > 64, 64 MiB
  EXPECT_EQ(pdl(128, 4096, 4096, 4), P(true, 0));
  EXPECT_EQ(pdl(256, 8192, 28672, 4), P(false, 0));   // 112 MiB
  EXPECT_EQ(pdl(128, 21504, 14336, 8), P(false, 0));
  EXPECT_EQ(pdl(16, 4096, 4096, 4, Tuning::parse("wo_wgmma_pdl=on")), P(true, 0));
  EXPECT_EQ(pdl(4, 21504, 14336, 4, Tuning::parse("wo_wgmma_pdl=off")), P(false, 0));
  EXPECT_EQ(pdl(4, 21504, 14336, 4, Tuning::parse("wo_early_stages=2")), P(true, 2));
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
  const DeviceCaps caps = hopper(false);
  const WoLayout L = layout(57344, 8192, 4, 128);
  Call c;
  c.M = 4096;
  c.y = 1;  // bf16 outputs of f16 activations: cuBLAS writes f32, staged
  c.gather = true;
  const WoPlan p = plan(c, L, caps);
  EXPECT_EQ(p.id.family, Family::WoDequantCublas);
  EXPECT_EQ(p.chunk_rows % kTileRows, 0);
  EXPECT_LE(p.chunk_bytes, kDequantChunkBytes);
  EXPECT_EQ(p.gather_bytes, size_t(4096) * 8192 * 2);  // act-order permutes X once
  EXPECT_EQ(p.out_bytes, size_t(4096) * 57344 * 4);    // f32 staging for an output cuBLAS can't write
  c.t.wo_dequant_chunk_mb = 32;
  EXPECT_LE(plan(c, L, caps).chunk_bytes, size_t(32) << 20);
}

// The rows of a dequantize + cuBLAS chunk (shared by the weight-only and GGUF paths): whole groups,
// so every chunk's output columns start 16-byte aligned. GGUF 14336x21504 in f32 rows: 256 MB holds
// 4681 rows, which made every later chunk start at an odd row (cuBLAS's unaligned kernels).
TEST(CudaPlan, DequantChunkRowsAreWholeGroups) {
  const size_t cap = kDequantChunkBytes;
  EXPECT_EQ(dequant_chunk_rows(21504, size_t(14336) * 4, cap, 128), 4608);
  EXPECT_EQ(dequant_chunk_rows(21504, size_t(14336) * 2, cap, 16), 9360);
  EXPECT_EQ(dequant_chunk_rows(1000, size_t(768) * 4, size_t(1) << 20, 128), 256);
  for (const int64_t n : {int64_t(1), int64_t(77), int64_t(4096), int64_t(128256)})
    for (const int64_t k : {int64_t(256), int64_t(4096), int64_t(14336), int64_t(1) << 20})
      for (const int64_t g : {int64_t(16), int64_t(128)}) {
        const int64_t r = dequant_chunk_rows(n, size_t(k) * 4, cap, g);
        EXPECT_GE(r, 1);
        EXPECT_LE(r, n);
        // fewer rows than N only in whole groups, and more than one group only within the cap
        if (r < n) {
          EXPECT_EQ(r % g, 0) << n << " x " << k;
        }
        if (r > g) {
          EXPECT_LE(size_t(r) * size_t(k) * 4, cap) << n << " x " << k;
        }
      }
}

TEST(CudaPlan, WgmmaServesLargerBatchesOnHopper) {
  const DeviceCaps caps = hopper();
  const WoLayout L = layout(21504, 14336, 4, 128);
  for (int64_t M : {9, 16, 33, 64, 65, 128, 200, 256, 1024, 4096}) {
    const WoPlan p = plan(M, L, caps, M > kWgmmaMaxM ? "sm90_wo_ws" : "");
    ASSERT_EQ(p.id.family, Family::WoWgmma) << M;
    const int mt = p.id.tile_m;
    EXPECT_EQ(mt, M <= 16 ? 16 : M <= 32 ? 32 : M <= 64 ? 64 : M <= 128 ? 128 : 256);
    EXPECT_EQ(p.m_blocks, (M + mt - 1) / mt);
    EXPECT_EQ(p.n_blocks, (21504 + 127) / 128);
    EXPECT_EQ(p.sched.tiles, p.m_blocks * p.n_blocks);
    // two partial slots per CTA; small token tiles may run two CTAs per SM
    EXPECT_EQ(p.partial_floats, size_t(2) * caps.sm_count * ws_max_ctas_per_sm(mt) * 128 * mt);
    // the inline reduction's completion flags: 8 per stream-K tile, fewer than 2 rounds of tiles;
    // whole-tile and fixup plans never read flags and own none
    if (p.sched.inline_reduce) {
      EXPECT_EQ(p.tickets, size_t(2) * caps.sm_count * ws_max_ctas_per_sm(mt) * kStreamKFlagsPerTile) << M;
      EXPECT_EQ(p.tickets, size_t(ws_flags(caps.sm_count, mt))) << M;
    } else {
      EXPECT_EQ(p.tickets, 0u) << M;
    }
    EXPECT_EQ(cuda::wo_plan_reads_tickets(p), p.sched.inline_reduce) << M;
    EXPECT_EQ(p.sched.grid <= caps.sm_count * p.id.ctas, true);
  }
  // short GEMMs with few tiles take token tiles of 128 past M = 128; long K keeps 256
  const auto mt_of = [&](int64_t M, int64_t N, int64_t K) { return int(plan(M, layout(N, K, 4, 128), caps).id.tile_m); };
  EXPECT_EQ(mt_of(256, 4096, 4096), 128);   // 32 tiles -> 64 (mt = 64 would make 128: no faster)
  EXPECT_EQ(mt_of(256, 6144, 4096), 128);   // 48 -> 96
  EXPECT_EQ(mt_of(512, 4096, 4096), 128);   // 64 -> 128
  EXPECT_EQ(mt_of(1024, 4096, 4096), 256);  // 128 tiles already
  EXPECT_EQ(mt_of(256, 4096, 14336), 256);  // K = 14336: stream-K
  EXPECT_EQ(mt_of(256, 28672, 4096), 256);
  EXPECT_EQ(mt_of(128, 6144, 4096), 128);   // only tiles of 256 shrink
  // without the kernel (or forced away) the other paths
  EXPECT_EQ(family(64, L, hopper(false)), Family::WoDequantCublas);
  EXPECT_EQ(family(64, L, caps, "wo_dequant_cublas"), Family::WoDequantCublas);
  // the streaming kernel up to stream_max_m_wgmma (docs/decisions/wo-kernel-boundaries.md), then
  // wgmma: W4 up to M = 6-8 on small weights and where the wgmma kernel has fewer tiles than SMs,
  // 2-4 on the other large ones; W8 from 6 down to 0 (the wgmma kernel at every M) as its tiles grow
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
    const WoLayout l = layout(N, K, bits, 128);
    EXPECT_EQ(stream_max_m_wgmma(l, caps.sm_count), last);
    if (last >= 1) {
      EXPECT_EQ(family(1, l, caps), Family::WoStream);
      EXPECT_EQ(family(last, l, caps), Family::WoStream);
    }
    EXPECT_EQ(family(last + 1, l, caps), Family::WoWgmma);
  }
  const WoLayout small = layout(4096, 4096, 4, 128);
  // past kWgmmaMaxM: dequantize + cuBLAS, except on large GEMMs (K >= 8192, N K >= 128M) up to
  // kWgmmaBigMaxM
  EXPECT_EQ(family(kWgmmaMaxM + 1, small, caps), Family::WoDequantCublas);
  EXPECT_EQ(family(kWgmmaBigMaxM, L, caps), Family::WoWgmma);
  EXPECT_EQ(family(kWgmmaBigMaxM + 1, L, caps), Family::WoDequantCublas);
  EXPECT_EQ(family(kWgmmaBigMaxM, layout(4096, 14336, 4, 128), caps), Family::WoDequantCublas);  // N K = 58M
  // a 16-bit output the TMA-store epilogue can write keeps the wgmma kernel at every M
  for (int64_t M : {kWgmmaMaxM + 1, kWgmmaBigMaxM + 1, int64_t(16384)}) {
    Call c;
    c.M = M;
    c.y_tma = true;
    EXPECT_EQ(plan(c, small, caps).id.family, Family::WoWgmma) << M;
    EXPECT_EQ(plan(c, L, caps).id.family, Family::WoWgmma) << M;
    // ... where the kernel can run and nothing is forced
    EXPECT_EQ(plan(c, small, hopper(false)).id.family, Family::WoDequantCublas) << M;
    c.force = "wo_dequant_cublas";
    EXPECT_EQ(plan(c, small, caps).id.family, Family::WoDequantCublas) << M;
  }
  EXPECT_EQ(family(8, L, caps, "sm90_wo_ws"), Family::WoWgmma);
  // a forced wgmma kernel that cannot serve the call (f32 or unaligned activations) falls back
  Call f32;
  f32.M = 64;
  f32.x = 2;
  f32.force = "sm90_wo_ws";
  EXPECT_EQ(plan(f32, L, caps).id.family, Family::WoDequantCublas);
  Call unaligned;
  unaligned.M = 64;
  unaligned.aligned = false;
  unaligned.force = "sm90_wo_ws";
  EXPECT_NE(plan(unaligned, L, caps).id.family, Family::WoWgmma);
  unaligned.gather = true;  // gathered rows are aligned by the gather
  EXPECT_EQ(plan(unaligned, L, caps).id.family, Family::WoWgmma);
}

// The decisions that used to be taken inside the launcher are the plan's (docs/decisions/
// wo-wgmma-*.md): CTAs per SM, pair path, fold, TMA-store rounds, reduction; every planned
// instantiation exists (ws_variant_exists), and the tuning overrides each decision.
TEST(CudaPlan, WgmmaPlanNamesOneInstantiation) {
  const DeviceCaps caps = hopper();
  auto ws = [&](int64_t M, int64_t N, int64_t K, int bits, int x, Tuning t = Tuning(), bool y_tma = false,
                int64_t group = 128) {
    Call c;
    c.M = M;
    c.x = x;
    c.t = t;
    c.y_tma = y_tma;
    c.force = "sm90_wo_ws";
    return plan(c, layout(N, K, bits, group), caps);
  };
  // two CTAs per SM at token tiles of 16 (and 32) for int4 weights of 48 MB or more (24 MB in bf16
  // at 32)
  EXPECT_EQ(ws(16, 21504, 14336, 4, 0).id.ctas, 2);
  EXPECT_EQ(ws(16, 4096, 4096, 4, 0).id.ctas, 1);
  EXPECT_EQ(ws(32, 8192, 8192, 4, 1).id.ctas, 2);  // bf16, 32 MB at mt = 32
  EXPECT_EQ(ws(32, 8192, 8192, 4, 0).id.ctas, 1);
  EXPECT_EQ(ws(16, 21504, 14336, 8, 0).id.ctas, 1);  // 8-bit codes: one CTA
  EXPECT_EQ(ws(64, 21504, 14336, 4, 0).id.ctas, 1);
  EXPECT_EQ(ws(16, 4096, 4096, 4, 0, Tuning::parse("wo_ctas_per_sm=2")).id.ctas, 2);
  // pairs: f16 activations on exact f16 pairs take the f16x2 path (layout() leaves pair_f32 off);
  // bf16 int4 / int8 with integer zeros the bf16 integer-zero path from mt = 32, int4 at mt = 16
  // the fold
  EXPECT_EQ(ws(64, 4096, 4096, 4, 1).id.pairs, PairKind::Bf16Zero);
  EXPECT_EQ(ws(16, 4096, 4096, 8, 1).id.pairs, PairKind::Bf16Zero);
  const WoPlan b16 = ws(16, 4096, 4096, 4, 1);
  EXPECT_EQ(b16.id.pairs, PairKind::F32);
  EXPECT_TRUE(b16.id.fold);
  EXPECT_EQ(ws(64, 4096, 4096, 4, 1, Tuning::parse("wo_bf16_zero=off")).id.pairs, PairKind::F32);
  EXPECT_FALSE(ws(16, 4096, 4096, 4, 1, Tuning::parse("wo_fold=off")).id.fold);
  // groups shorter than a stage: no fold, no bf16 integer-zero path
  const WoPlan g32 = ws(16, 4096, 4096, 4, 1, Tuning(), false, 32);
  EXPECT_FALSE(g32.id.fold);
  EXPECT_EQ(g32.id.pairs, PairKind::F32);
  // TMA-store rounds of 128 tokens at token tiles of 128 and 256 where TMA can store Y
  EXPECT_EQ(ws(256, 4096, 4096, 4, 0, Tuning(), true).sched.y_rows, 128);
  EXPECT_EQ(ws(256, 4096, 4096, 4, 0, Tuning(), false).sched.y_rows, 0);
  EXPECT_EQ(ws(64, 4096, 4096, 4, 0, Tuning(), true).sched.y_rows, 0);
  EXPECT_EQ(ws(256, 4096, 4096, 4, 0, Tuning::parse("wo_y_rows=0"), true).sched.y_rows, 0);
  EXPECT_EQ(ws(64, 4096, 4096, 4, 0, Tuning::parse("wo_y_rows=32"), true).sched.y_rows, 32);
  // the reduction: inline at token tiles up to 32, the fixup kernel where tiles are cut at mt 256
  EXPECT_TRUE(ws(16, 21504, 14336, 4, 0).sched.inline_reduce);
  EXPECT_FALSE(ws(16, 21504, 14336, 4, 0, Tuning::parse("wo_reduce=fixup")).sched.inline_reduce);
  // 128-token tiles of an all stream-K grid: inline over K <= 4096 up to ~4.25 pieces of at least
  // 12 chunks (4096x4096 at M = 128: 32 tiles cut into ~4.1 pieces of ~15.5 chunks), the fixup
  // kernel with more pieces (16 tiles: ~8.3), shorter pieces (2048x2048: 16 tiles over 64 CTAs,
  // 4 pieces of 8 chunks), over longer K (14336x4096) and for the convolution's implicit GEMM
  EXPECT_TRUE(ws(128, 4096, 4096, 4, 0, Tuning(), true).sched.inline_reduce);
  EXPECT_TRUE(ws(80, 4096, 4096, 8, 0, Tuning(), true).sched.inline_reduce);
  EXPECT_TRUE(ws(128, 6144, 4096, 8, 0, Tuning(), true).sched.inline_reduce);
  EXPECT_FALSE(ws(128, 2048, 4096, 4, 0, Tuning(), true).sched.inline_reduce);
  const WoPlan short_pieces = ws(128, 2048, 2048, 4, 0, Tuning(), true);
  EXPECT_EQ(short_pieces.sched.sk_tiles * 4, short_pieces.sched.sk_ctas);
  EXPECT_FALSE(short_pieces.sched.inline_reduce);
  EXPECT_TRUE(short_pieces.fixup);
  EXPECT_FALSE(ws(128, 4096, 14336, 4, 0, Tuning(), true).sched.inline_reduce);
  const Tuning fixup = Tuning::parse("wo_reduce=fixup");
  EXPECT_FALSE(ws(128, 4096, 4096, 4, 0, fixup, true).sched.inline_reduce);
  Call conv_like;  // 48 tiles of 128 tokens cut into ~2.75 pieces of ~13 chunks each, K = 2304
  conv_like.M = 384;
  conv_like.y_tma = true;
  conv_like.force = "sm90_wo_ws";
  const WoPlan as_linear = plan(conv_like, layout(2048, 2304, 4, 128), caps);
  EXPECT_EQ(as_linear.id.tile_m, 128);
  EXPECT_TRUE(as_linear.sched.inline_reduce);
  conv_like.fill = true;
  const WoPlan as_conv = plan(conv_like, layout(2048, 2304, 4, 128), caps);
  EXPECT_EQ(as_conv.id.tile_m, 128);
  EXPECT_FALSE(as_conv.sched.inline_reduce);
  const WoPlan big = ws(1024, 21504, 14336, 4, 0, Tuning::parse("wo_reduce=fixup"));
  EXPECT_EQ(big.fixup, stream_k_split_pieces(big.sched) > 0);
  EXPECT_EQ(ws(1024, 21504, 14336, 4, 0, Tuning::parse("wo_schedule=whole_tiles")).sched.sk_tiles, 0);
  // every plan over a grid of calls names an instance that is built
  for (int x : {0, 1})
    for (int bits : {4, 8})
      for (int64_t g : {int64_t(16), int64_t(64), int64_t(128), int64_t(1) << 30})
        for (auto [N, K] : {std::pair<int64_t, int64_t>{4096, 4096}, {21504, 14336}, {8192, 8192}, {200, 136}})
          for (int64_t M : {1, 9, 17, 33, 65, 129, 300, 3000})
            for (bool y_tma : {false, true}) {
              const WoPlan p = ws(M, N, K, bits, x, Tuning(), y_tma, g);
              ASSERT_EQ(p.id.family, Family::WoWgmma);
              EXPECT_TRUE(ws_variant_exists(x == 1, p.id.tile_m, p.id.codes,
                                            sm90::PairPath(int(p.id.pairs)),
                                            ws_shape_of(p.id.ctas, p.id.wide), p.id.fold))
                  << p.id.name();
              EXPECT_EQ(p.chunks_per_stage, p.sched.cps);
            }
  EXPECT_EQ(ws(16, 21504, 14336, 4, 0).id.name(), "sm90_wo_ws<f16,u4,mt16,cta2,pairs=half,fold>");
}

// The conv implicit GEMM's token tile (WoCall::fill_sms): the linear rule, halved while the tiles
// fill fewer than a quarter of the SMs, down to 32 (64 where K > 4096), then 16 where the 16-token
// tiles' 64-K chunks come to at most 8 an SM (1,056 here); never 64 or less with an
// odd count of 64-wide chunks (a two-chunk stage would hold a chunk past K, which an im2col load
// does not zero), a forced tile included. Linear calls follow their own rule.
TEST(CudaPlan, ConvTokenTileFillsTheSms) {
  const DeviceCaps caps = hopper();  // 132 SMs: a quarter is 33 tiles
  auto mt = [&](int64_t M, int64_t N, int64_t K, bool fill, int forced = 0) {
    Call c;
    c.M = M;
    c.fill = fill;
    c.force = "sm90_wo_ws";
    c.t.wo_token_tile = forced;
    return int(plan(c, layout(N, K, 4, 128), caps).id.tile_m);
  };
  // ResNet-50 3x3 layers (N = Co, K = 9 Ci, M = B Ho Wo)
  EXPECT_EQ(mt(784, 128, 1152, false), 32);   // linear, small layer: 25 tiles at 32
  EXPECT_EQ(mt(784, 128, 1152, true), 16);    // 25 tiles at 32; 49 x 18 = 882 chunks at 16
  EXPECT_EQ(mt(392, 512, 4608, true), 64);    // K > 4096: not below 64 (4 x 7 = 28 tiles)
  EXPECT_EQ(mt(49, 512, 4608, true), 64);     // 4 tiles at 64
  EXPECT_EQ(mt(1568, 512, 4608, true), 128);  // 52 tiles at 128
  EXPECT_EQ(mt(196, 256, 2304, true), 16);    // 14 tiles at 32; 26 x 36 = 936 chunks at 16
  EXPECT_EQ(mt(400, 256, 2304, true), 32);    // 26 tiles at 32; 50 x 36 = 1,800 chunks at 16
  EXPECT_EQ(mt(1568, 256, 2304, true), 64);   // 2 x 25 = 50 tiles at 64
  EXPECT_EQ(mt(25088, 64, 576, true), 256);   // 98 tiles: the linear rule's
  EXPECT_EQ(mt(6272, 256, 2304, true), 128);  // 2 x 49 = 98 at the linear rule's 128
  // 9 chunks (Ci = 64, 3x3): 64 would fill more SMs, but an odd count stays at 128
  EXPECT_EQ(mt(3136, 64, 576, true), 128);
  EXPECT_EQ(mt(49, 64, 576, true), 128);      // M <= 64 would be 64 by the linear rule
  EXPECT_EQ(mt(49, 64, 576, false), 16);      // (linear: zeros past K, any tile; small layer)
  EXPECT_EQ(mt(112, 200, 64, true), 128);     // 1 chunk (strided 1x1, Ci = 64)
  // a forced tile: kept, except the odd-chunk rule
  EXPECT_EQ(mt(784, 128, 1152, true, 64), 64);
  EXPECT_EQ(mt(784, 128, 1152, true, 32), 32);
  EXPECT_EQ(mt(3136, 64, 576, true, 64), 128);
  EXPECT_EQ(mt(3136, 64, 576, false, 64), 64);
}

// Small linear layers (N <= 1024, K <= 4096): the token tile halves while the tiles fill fewer than
// half the SMs, down to 32, then to 16 below an eighth; larger layers, the conv and forced tiles
// keep theirs. Weights below 4 MiB launch with PDL at any M.
TEST(CudaPlan, SmallLinearLayersTakeSmallTokenTiles) {
  // 132 SMs: half is 66 tiles, an eighth 16
  auto plan_of = [](int64_t M, int64_t N, int64_t K, int bits = 4, const char* tune = "") {
    return ws_plan(M, N, K, false, tune, bits);
  };
  auto mt = [&](int64_t M, int64_t N, int64_t K, int bits = 4, const char* tune = "") {
    return int(plan_of(M, N, K, bits, tune).id.tile_m);
  };
  // ResNet-50's 1x1 layers as linear calls: 1024 -> 256 @14 (N = 256: 2 column blocks)
  EXPECT_EQ(mt(49, 256, 1024), 16);      // 2 tiles at 64, 4 at 32: on to 16 (8 tiles)
  EXPECT_EQ(mt(196, 256, 1024), 16);     // 14 tiles at 32
  EXPECT_EQ(mt(392, 256, 1024), 32);     // 26 tiles at 32: more than an eighth
  EXPECT_EQ(mt(1568, 256, 1024), 32);    // 50 tiles at 64
  EXPECT_EQ(mt(6272, 256, 1024), 128);   // 98 tiles at 128: more than half
  EXPECT_EQ(mt(49, 512, 2048, 8), 16);   // 2048 -> 512 @7: 8 tiles at 32
  EXPECT_EQ(mt(196, 512, 2048, 8), 32);  // 28 tiles at 32
  EXPECT_EQ(mt(1568, 512, 2048), 64);    // 52 tiles at 128, 100 at 64
  // layers past the bounds keep the linear rule
  EXPECT_EQ(mt(196, 2048, 1024), 128);  // N > 1024: the linear rule (32 tiles at 128)
  EXPECT_EQ(mt(196, 512, 8192), 256);   // K > 4096
  EXPECT_EQ(mt(128, 4096, 4096), 128);
  EXPECT_EQ(mt(196, 256, 1024, 4, "wo_token_tile=128"), 128);  // forced
  // PDL: below 4 MiB of weights at any M; larger weights at M <= 64 only where stream-bound
  EXPECT_TRUE(plan_of(49, 512, 2048, 8).pdl);    // 1 MiB
  EXPECT_TRUE(plan_of(32, 1024, 4096, 4).pdl);   // 2 MiB
  EXPECT_FALSE(plan_of(32, 4096, 4096, 4).pdl);  // 8 MiB
  EXPECT_FALSE(plan_of(49, 512, 2048, 8, "wo_wgmma_pdl=off").pdl);
}

// Token tile 128: 128-K stages (KernelId::wide, two chunks a stage) except for 8-bit codes up to
// K = 8192, at K <= 1024 with at most an eighth of the SMs in tiles, and in an im2col conv with an
// odd chunk count (even forced); wo_stage_k forces either elsewhere; other token tiles and W4A8
// keep their stages.
TEST(CudaPlan, TokenTile128StageDepth) {
  // 132 SMs: an eighth is 16 tiles
  auto wide = [&](int64_t M, int64_t N, int64_t K, bool fill = false, const char* tune = "") {
    const WoPlan p = ws_plan(M, N, K, fill, tune);
    EXPECT_EQ(p.chunks_per_stage, p.id.wide ? 2 : p.id.tile_m <= 64 ? 2 : 1) << p.id.name();
    EXPECT_EQ(p.sched.cps, p.chunks_per_stage);
    return p.id.tile_m == 128 && p.id.wide;
  };
  EXPECT_TRUE(wide(128, 4096, 4096));   // 32 tiles, 64 chunks
  EXPECT_TRUE(wide(256, 6144, 4096));   // token tile 128 by the short-K rule, 96 tiles
  // (small layers take smaller tiles by themselves: 128 forced)
  EXPECT_TRUE(wide(128, 512, 2048, false, "wo_token_tile=128"));    // 4 tiles, but 32 chunks
  EXPECT_FALSE(wide(128, 256, 1024, false, "wo_token_tile=128"));   // 2 tiles of 16 chunks
  EXPECT_FALSE(wide(1024, 256, 1024, false, "wo_token_tile=128"));  // 16 tiles: an eighth
  EXPECT_TRUE(wide(1568, 256, 1024, false, "wo_token_tile=128"));   // 26 tiles
  EXPECT_EQ(ws_plan(128, 4096, 4096).id.name(), "sm90_wo_ws<f16,u4,mt128,cta1,k128,pairs=half>");
  EXPECT_EQ(ws_plan(128, 256, 1024, false, "wo_token_tile=128").id.name(),
            "sm90_wo_ws<f16,u4,mt128,cta1,pairs=half>");
  // 8-bit codes: 64-K stages up to K = 8192 (128 chunks) unless forced, 128-K past it
  EXPECT_EQ(ws_plan(256, 4096, 4096, false, "", 8).id.name(),
            "sm90_wo_ws<f16,u8,mt128,cta1,pairs=half>");
  EXPECT_FALSE(ws_plan(128, 8192, 8192, false, "", 8).id.wide);
  EXPECT_TRUE(ws_plan(128, 4096, 14336, false, "", 8).id.wide);
  EXPECT_TRUE(ws_plan(256, 4096, 4096, false, "wo_stage_k=128", 8).id.wide);
  // forced either way
  EXPECT_FALSE(wide(128, 4096, 4096, false, "wo_stage_k=64"));
  EXPECT_TRUE(wide(128, 256, 1024, false, "wo_token_tile=128,wo_stage_k=128"));
  // other token tiles keep theirs (64 and below: 128-K stages; 256: 64-K)
  EXPECT_FALSE(ws_plan(64, 4096, 4096, false, "wo_stage_k=128").id.wide);
  EXPECT_FALSE(ws_plan(4096, 4096, 4096, false, "wo_stage_k=128").id.wide);
  // im2col conv: an odd chunk count stays at 64-K stages, forced or not; an even one follows the
  // rule
  EXPECT_FALSE(wide(6272, 64, 576, true, "wo_token_tile=128,wo_stage_k=128"));  // 9 chunks
  EXPECT_TRUE(wide(6272, 256, 2304, true));  // 36 chunks, 98 tiles
  EXPECT_TRUE(
      ws_plan(6272, 256, 2304, true, "", 8).id.wide);  // the 8-bit linear rule is not the conv's
}

// The reserved workspace bounds every plan with M up to the bound's M, without enumerating M.
TEST(CudaPlan, MaxWorkspaceBoundsEveryPlan) {
  for (bool sm90a : {false, true}) {
    const DeviceCaps caps = hopper(sm90a);
    for (auto [N, K, bits] : {std::tuple<int64_t, int64_t, int>{4096, 4096, 4}, {21504, 14336, 8}, {57344, 8192, 4}, {17, 31, 4}})
      for (bool gather : {false, true}) {
        const WoLayout L = layout(N, K, bits, 128);
        const WoWorkspaceBound b = wo_max_workspace(weight(L, gather), caps, Tuning(), 4096, true);
        const WoWorkspaceBound direct = wo_max_workspace(weight(L, gather), caps, Tuning(), 4096, false);
        for (int64_t M : {1, 2, 7, 8, 9, 16, 17, 31, 32, 33, 64, 65, 127, 128, 129, 255, 256, 1000, 2048, 2049, 4096})
          for (int x : {0, 1, 2})
            for (int y : {0, 1, 2})
              for (const char* force : {"", "sm80_wo_stream", "sm90_wo_ws", "wo_dequant_cublas"})
                for (bool fill : {false, true}) {
                  if (std::string(force) == "sm90_wo_ws" && !sm90a) continue;
                  Call c;
                  c.M = M;
                  c.x = x;
                  c.y = y;
                  c.gather = gather;
                  c.force = force;
                  c.fill = fill;
                  const WoPlan p = plan(c, L, caps);
                  ASSERT_LE(wo_workspace_bytes(p), b.bytes) << p.id.name() << " M " << M;
                  ASSERT_LE(p.tickets, b.tickets) << p.id.name() << " M " << M;
                  if (p.out_bytes == 0) {
                    ASSERT_LE(wo_workspace_bytes(p), direct.bytes) << p.id.name() << " M " << M;
                  }
                }
      }
  }
}

TEST(CudaPlan, TuningParsesAndNamesItsKeys) {
  const Tuning t = Tuning::parse("wo_token_tile=64,wo_fold=off,wo_reduce=inline,act_quant_band=2");
  EXPECT_EQ(t.wo_token_tile, 64);
  EXPECT_EQ(t.wo_fold, Toggle::Off);
  EXPECT_EQ(t.wo_reduce, Tuning::Reduce::Inline);
  EXPECT_EQ(t.act_quant_band, 2);
  EXPECT_EQ(Tuning::parse(t.to_string()).to_string(), t.to_string());
  EXPECT_EQ(Tuning().to_string(), "");
  for (const char* bad : {"wo_fold=maybe", "nope=1", "wo_token_tile=x", "wo_ctas_per_sm=3", "wo_fold"}) {
    try {
      (void)Tuning::parse(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << bad;
      const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

TEST(CudaPlan, KernelIdNamesEveryFamily) {
  KernelId id;
  id.family = Family::WoStream;
  id.act = 1;
  id.codes = kCodesU8;
  id.tile_m = 8;
  EXPECT_EQ(id.name(), "sm80_wo_stream<bf16,u8,mt8>");
  id.family = Family::WoDequantCublas;
  EXPECT_EQ(id.name(), "wo_dequant_cublas<bf16>");
  KernelId i8;
  i8.family = Family::I8Sm90;
  i8.codes = 64;
  i8.offset = true;
  EXPECT_EQ(i8.name(), "sm90_i8_128x128<g64,offset>");
  EXPECT_STREQ(i8.family_name(), "sm90_i8_128x128");
  KernelId sk;
  sk.family = Family::Fp8Skinny;
  sk.tile_m = 32;
  EXPECT_EQ(sk.name(), "sm90_fp8_block_skinny_mt32");
  KernelId fp8;
  fp8.family = Family::Fp8Gemm;
  fp8.tile_n = 192;
  fp8.ctas = 2;
  EXPECT_EQ(fp8.name(), "sm90_fp8_block_gemm_bm128_bn192_s5_c2");
}

TEST(CudaPlan, SplitsFillWaves) {
  EXPECT_EQ(choose_splits(132, 132, 224, 8), 1);   // one full wave
  EXPECT_EQ(choose_splits(168, 132, 224, 8), 3);   // 1.27 waves -> 504 CTAs in 3.8 waves
  EXPECT_EQ(choose_splits(32, 132, 64, 8), 4);     // small layer: 128 CTAs
  EXPECT_EQ(choose_splits(32, 132, 8, 8), 2);      // at least 4 chunks per split
  EXPECT_EQ(choose_splits(1000, 132, 224, 1), 1);  // capped
}

// The rule: stream-K unless the tuning forces a split (measured mixed: wo_plan.cpp); a forced
// split halves to the iterations there are, applies at token tiles up to 32 and 64 without the
// fold, on devices that run clusters; 0 and 1 are stream-K; other values are refused by the
// parser. In the plan: a batch-1 1x1 1024->256 @14 as a linear call (26 tiles of 16 tokens, 8
// iterations) with wo_k_split=4 runs 104 CTAs, with no flags, no fixup, and the split in the
// plan's name; without the knob, or without clusters, the stream-K schedule on 52 CTAs.
TEST(CudaPlan, WgmmaKSplitRule) {
  const Tuning automatic, four = Tuning::parse("wo_k_split=4"),
                          eight = Tuning::parse("wo_k_split=8");
  EXPECT_EQ(wgmma_k_split(8, 16, false, true, automatic), 1);
  EXPECT_EQ(wgmma_k_split(8, 16, false, true, Tuning::parse("wo_k_split=1")), 1);
  EXPECT_EQ(wgmma_k_split(8, 16, false, true, four), 4);
  EXPECT_EQ(wgmma_k_split(36, 64, false, true, eight), 8);
  EXPECT_EQ(wgmma_k_split(3, 64, false, true, eight), 2);    // 3 iterations: 2 ways
  EXPECT_EQ(wgmma_k_split(1, 16, false, true, eight), 1);    // one iteration
  EXPECT_EQ(wgmma_k_split(36, 128, false, true, eight), 1);  // token tile 128
  EXPECT_EQ(wgmma_k_split(36, 64, true, true, eight), 1);    // 64 with the fold
  EXPECT_EQ(wgmma_k_split(36, 32, true, true, eight), 8);    // 32 with the fold
  EXPECT_EQ(wgmma_k_split(36, 16, false, false, eight), 1);  // no clusters
  EXPECT_THROW(Tuning::parse("wo_k_split=3"), Error);
  EXPECT_THROW(Tuning::parse("wo_k_split=16"), Error);

  DeviceCaps caps = hopper();
  caps.stream_clusters = true;
  Call c;
  c.M = 196;
  c.y_tma = true;
  c.t = four;
  const WoPlan p = plan(c, layout(256, 1024, 4, 128), caps);
  ASSERT_EQ(p.id.family, Family::WoWgmma);
  EXPECT_EQ(p.id.tile_m, 16);
  EXPECT_EQ(p.id.ctas, 1);
  EXPECT_EQ(p.sched.k_split, 4);
  EXPECT_EQ(p.sched.grid, 26 * 4);
  EXPECT_FALSE(p.fixup || p.sched.inline_reduce);
  EXPECT_EQ(p.tickets, 0u);
  EXPECT_NE(wo_plan_name(p).find(",ksplit4>"), std::string::npos) << wo_plan_name(p);
  for (const bool forced : {false, true}) {  // the automatic plan; a forced one without clusters
    c.t = forced ? four : automatic;
    const WoPlan q = plan(c, layout(256, 1024, 4, 128), forced ? hopper() : caps);
    EXPECT_EQ(q.sched.k_split, 1);
    EXPECT_EQ(q.sched.grid, 52);
    EXPECT_EQ(wo_plan_name(q), q.id.name());
  }
}

// W4A8 weights (4-bit codes in the e4m3 fragment order) plan only the wgmma kernel's e4m3
// instances: token tiles 16 / 64 / 128 by M (or forced), one CTA, 128-K stages, the fold, the
// quantized activations in the workspace (bounded by the reserved scratch); no Hopper image, or
// another forced family, is a clear error.
TEST(CudaPlan, W4A8PlansTheE4m3Instances) {
  WoLayout L = layout(4096, 7168, 4, 128);
  L.fp8_act = true;
  const DeviceCaps caps = hopper();
  const WoWorkspaceBound bound = wo_max_workspace(weight(L), caps, Tuning(), 4096, true);
  for (auto [M, mt] : {std::pair<int64_t, int>{1, 16}, {16, 16}, {17, 64}, {64, 64}, {65, 128}, {4096, 128}})
    for (int x : {0, 1, 2}) {
      Call c;
      c.M = M;
      c.x = x;
      const WoPlan p = plan(c, L, caps);
      EXPECT_EQ(p.id.name(), "sm90_wo_ws<e4m3,u4f8,mt" + std::to_string(mt) + ",cta1,pairs=f32,fold>") << M;
      EXPECT_EQ(p.chunks_per_stage, 2);
      EXPECT_EQ(p.gather_bytes, wo_a8_act_bytes(M, 7168));
      EXPECT_LE(wo_workspace_bytes(p), bound.bytes) << M;
    }
  Call forced;
  forced.M = 4096;
  forced.t.wo_token_tile = 64;
  EXPECT_EQ(plan(forced, L, caps).id.tile_m, 64);
  forced.t.wo_token_tile = 256;  // not built for W4A8: the rule's tile
  EXPECT_EQ(plan(forced, L, caps).id.tile_m, 128);
  EXPECT_THROW(plan(1, L, hopper(false)), Error);
  EXPECT_THROW(plan(1, L, caps, "sm80_wo_stream"), Error);
}

#endif  // MIXQ_WITH_CUDA
