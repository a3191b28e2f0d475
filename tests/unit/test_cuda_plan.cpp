// The weight-only CUDA planner is a pure host function: its decisions are tested without a GPU.
#if defined(MIXQ_WITH_CUDA)
#include <gtest/gtest.h>

#include "cuda/wo_plan.hpp"
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
  for (int sms : {46, 108, 132}) {
    caps.sm_count = sms;
    for (auto [N, K] : {std::pair<int64_t, int64_t>{4096, 4096}, {21504, 14336}, {10944, 7392}, {17, 31}})
      for (int bits : {4, 8})
        for (int64_t g : {int64_t(32), int64_t(128), int64_t(1) << 30})
          for (int64_t M : {1, 3, 8, 9, 16, 31, 32, 64, 200}) {
            const WoLayout L = layout(N, K, bits, g);
            const WoPlan p = plan_weight_only(M, L, 2, false, false, true, caps, "stream");
            const int chunks = int(L.Kp / kChunkK);
            EXPECT_GE(p.splits * p.chunks_per_split, chunks);
            EXPECT_LT((p.splits - 1) * p.chunks_per_split, chunks) << "an empty split";
            EXPECT_GE(p.chunks_per_stage, 1);
            EXPECT_LE(p.chunks_per_stage, p.chunks_per_split);
            EXPECT_LE(p.smem_bytes, caps.smem_per_block_optin);
            EXPECT_GE(p.mt, std::min<int64_t>(M, 64));
            EXPECT_EQ(p.x_rows, std::min<int64_t>(p.mt, M));
            EXPECT_EQ(p.m_blocks, (M + p.mt - 1) / p.mt);
            EXPECT_LE(p.partial_floats, kMaxPartialFloats > size_t(M * N) ? kMaxPartialFloats : size_t(M * N) * 1);
            EXPECT_EQ(p.tickets, size_t(p.n_blocks) * p.m_blocks);
            EXPECT_GE(wo_workspace_bytes(p), p.partial_floats * 4 + p.tickets * 4);
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
    EXPECT_LE(p.partial_floats, kMaxWgmmaPartialFloats);
    EXPECT_EQ(p.partial_floats, p.splits > 1 ? size_t(p.splits) * M * 21504 : 0);
  }
  // without the kernel (or forced away) the old paths stay
  EXPECT_EQ(plan_weight_only(64, L, 2, false, false, true, caps, "", false).kernel,
            WoKernel::DequantCublas);
  EXPECT_EQ(plan_weight_only(64, L, 2, false, false, true, caps, "cublas", true).kernel,
            WoKernel::DequantCublas);
  EXPECT_EQ(plan_weight_only(7, L, 2, false, false, true, caps, "", true).kernel, WoKernel::Stream);
  // M = 8: streaming on large weights, wgmma on small ones (kStreamM8MinBytes)
  EXPECT_EQ(plan_weight_only(8, L, 2, false, false, true, caps, "", true).kernel, WoKernel::Stream);
  const WoLayout small = layout(4096, 4096, 4, 128);
  ASSERT_LT(small.packed_bytes(), kStreamM8MinBytes);
  EXPECT_EQ(plan_weight_only(8, small, 2, false, false, true, caps, "", true).kernel, WoKernel::Wgmma);
  EXPECT_EQ(plan_weight_only(7, small, 2, false, false, true, caps, "", true).kernel, WoKernel::Stream);
  EXPECT_EQ(plan_weight_only(8, layout(21504, 14336, 8, 128), 2, false, false, true, caps, "", true).kernel,
            WoKernel::Wgmma);  // W8 keeps wgmma at M = 8
  EXPECT_EQ(plan_weight_only(kWgmmaMaxM + 1, L, 2, false, false, true, caps, "", true).kernel,
            WoKernel::DequantCublas);
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
#endif  // MIXQ_WITH_CUDA
