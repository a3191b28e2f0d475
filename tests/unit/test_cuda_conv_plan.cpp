// The CUDA stem conv kernel's plan (kernels/conv/conv_stem.hpp) is a host function of the call's
// geometry and the device's SM count and shared memory: which calls it takes, its tile, K padding
// and shared-memory size, tested without a GPU.
#if defined(MIXQ_WITH_CUDA)
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/kernels/conv/conv_stem.hpp"

using namespace mixq::cuda;

namespace {

constexpr int kSms = 132;
constexpr size_t kOptin = 227 * 1024;

// A packed-taps call (Ci <= 16, more than one tap) with square filter, stride and padding.
ConvIgemmParams call(int B, int Ci, int HW, int Co, int k, int stride, int pad) {
  ConvIgemmParams g{};
  g.B = B;
  g.Ci = Ci;
  g.H = g.W = HW;
  g.Co = Co;
  g.Kh = g.Kw = k;
  g.stride_h = g.stride_w = stride;
  g.pad_h = g.pad_w = pad;
  g.dil_h = g.dil_w = 1;
  g.Ho = g.Wo = (HW + 2 * pad - k) / stride + 1;
  g.packed = true;
  return g;
}

}  // namespace

TEST(CudaConvStemPlan, ResNetStemTilesAndSharedMemory) {
  ConvStemParams s{};
  // batch 32: 32 x 112 rows of 128-pixel tiles fill the GPU
  ASSERT_TRUE(conv_stem_plan(call(32, 3, 224, 64, 7, 2, 3), true, kSms, kOptin, &s));
  EXPECT_EQ(s.mf, 2);
  EXPECT_EQ(s.tile_w, 128);
  EXPECT_EQ(s.tiles_per_row, 1);
  EXPECT_EQ(s.pixel_tiles, 32 * 112);
  EXPECT_EQ(s.lp, 22);     // 7 taps x 3 channels, rounded up to even
  EXPECT_EQ(s.kpad, 160);  // 7 x 22 = 154, rounded up to 16
  EXPECT_EQ(s.b_pitch, 168);
  EXPECT_EQ(s.patch_w, 127 * 6 + 22);
  EXPECT_FALSE(s.shifted);  // stride 2 x 3 channels: every run starts at an even element
  EXPECT_EQ(s.smem_bytes, size_t(64 * 168 * 2 + 80 * 8 + 7 * 784 * 2));
  // batch 1: 112 rows of 128-pixel tiles would leave SMs idle: 64-pixel tiles, two a row
  ASSERT_TRUE(conv_stem_plan(call(1, 3, 224, 64, 7, 2, 3), true, kSms, kOptin, &s));
  EXPECT_EQ(s.mf, 1);
  EXPECT_EQ(s.tile_w, 64);
  EXPECT_EQ(s.tiles_per_row, 2);
  EXPECT_EQ(s.pixel_tiles, 224);
}

TEST(CudaConvStemPlan, ShiftedCopyForOddRuns) {
  ConvStemParams s{};
  // stride 1 x 3 channels: every other pixel's run starts at an odd element
  ASSERT_TRUE(conv_stem_plan(call(2, 3, 40, 48, 5, 1, 2), true, kSms, kOptin, &s));
  EXPECT_TRUE(s.shifted);
  EXPECT_EQ(s.mf, 1);  // 40-pixel rows
  EXPECT_EQ(s.patch_w, 63 * 3 + 16);  // 64-pixel tile, 5 x 3 = 15 columns a row padded to 16
  EXPECT_EQ(s.patch_pitch, 206);
  EXPECT_EQ(s.smem_bytes, size_t(64 * s.b_pitch * 2 + s.kpad / 2 * 8 + 2 * 5 * s.patch_pitch * 2));
  ASSERT_TRUE(conv_stem_plan(call(1, 4, 32, 96, 4, 4, 0), true, kSms, kOptin, &s));
  EXPECT_FALSE(s.shifted);
}

TEST(CudaConvStemPlan, CallsItDoesNotTake) {
  ConvStemParams s{};
  const ConvIgemmParams stem = call(1, 3, 224, 64, 7, 2, 3);
  EXPECT_FALSE(conv_stem_plan(stem, false, kSms, kOptin, &s));  // f32 activations
  ConvIgemmParams g = stem;
  g.Ci = 5;
  EXPECT_FALSE(conv_stem_plan(g, true, kSms, kOptin, &s));
  g = stem;
  g.dil_w = 2;
  EXPECT_FALSE(conv_stem_plan(g, true, kSms, kOptin, &s));
  g = stem;
  g.dil_h = 2;  // dilation along H only changes which input rows the patch holds
  EXPECT_TRUE(conv_stem_plan(g, true, kSms, kOptin, &s));
  g = stem;
  g.packed = false;
  EXPECT_FALSE(conv_stem_plan(g, true, kSms, kOptin, &s));
  EXPECT_FALSE(conv_stem_plan(stem, true, kSms, 16 * 1024, &s));  // shared memory
  // K limit: 11 x 11 x 4 pads to 496 columns, 13 x 13 x 3 to 528 (> kStemMaxK)
  EXPECT_EQ(conv_stem_kpad(4, 11, 11), 496);
  EXPECT_TRUE(conv_stem_plan(call(1, 4, 64, 32, 11, 4, 2), true, kSms, kOptin, &s));
  EXPECT_EQ(conv_stem_kpad(3, 13, 13), 528);
  EXPECT_FALSE(conv_stem_plan(call(1, 3, 64, 32, 13, 4, 2), true, kSms, kOptin, &s));
}

TEST(CudaConvStemPlan, TmaBoxesAndStages) {
  ConvStemParams s{};
  // the ResNet stem at batch 32: pad 3 x 3 channels is odd, so every run starts at an odd element
  // of a box that starts on a 16-byte boundary: the K order shifted one column (sigma 1, lp
  // 21 + 1 = 22); a warp's box is 7 + 31 x 6 + 22 = 215 elements, to 216
  ASSERT_TRUE(conv_stem_plan(call(32, 3, 224, 64, 7, 2, 3), true, kSms, kOptin, &s, true));
  EXPECT_TRUE(s.tma);
  EXPECT_EQ(s.sigma, 1);
  EXPECT_EQ(s.mf, 2);
  EXPECT_EQ(s.lp, 22);
  EXPECT_EQ(s.kpad, 160);
  EXPECT_EQ(s.box_w, 216);
  EXPECT_EQ(s.stage_bytes, 3072);  // 7 x 216 x 2 = 3024, to 128
  // weights, K table, 4 warps x 2 stages of mbarriers, to 128
  EXPECT_EQ(s.patch_offset, (64 * 168 * 2 + 80 * 8 + 64 + 127) / 128 * 128);
  EXPECT_EQ(s.smem_bytes, size_t(s.patch_offset) + 4 * 2 * 3072);
  // the same call without the TMA form: the loader plan, unshifted
  ASSERT_TRUE(conv_stem_plan(call(32, 3, 224, 64, 7, 2, 3), true, kSms, kOptin, &s, false));
  EXPECT_FALSE(s.tma);
  EXPECT_EQ(s.sigma, 0);
  EXPECT_EQ(s.smem_bytes, size_t(64 * 168 * 2 + 80 * 8 + 7 * 784 * 2));
  // Ci 2, a 3x3 filter, pad 1: even starts (sigma 0); shifted it would be 8 columns a row
  EXPECT_EQ(conv_stem_lp(2, 3, 0), 6);
  EXPECT_EQ(conv_stem_lp(2, 3, 1), 8);
  ASSERT_TRUE(conv_stem_plan(call(8, 2, 256, 32, 3, 2, 1), true, kSms, kOptin, &s, true));
  EXPECT_TRUE(s.tma);
  EXPECT_EQ(s.sigma, 0);
  EXPECT_EQ(s.lp, 6);
  EXPECT_EQ(s.box_w, 144);  // 7 + 31 x 4 + 6 = 137, to 8
  // odd runs (stride 1 x 3 channels) would need the shifted copy: the loader form
  ASSERT_TRUE(conv_stem_plan(call(2, 3, 40, 48, 5, 1, 2), true, kSms, kOptin, &s, true));
  EXPECT_FALSE(s.tma);
  EXPECT_TRUE(s.shifted);
  // ConvNeXt 4x4/4 over a 520-pixel image: 130-pixel rows would take 128-pixel tiles, but a
  // warp's 32 pixels read 7 + 31 x 12 + 12 = 391 > 256 elements: 64-pixel tiles
  ASSERT_TRUE(conv_stem_plan(call(1, 3, 520, 96, 4, 4, 0), true, kSms, kOptin, &s, false));
  EXPECT_EQ(s.mf, 2);
  ASSERT_TRUE(conv_stem_plan(call(1, 3, 520, 96, 4, 4, 0), true, kSms, kOptin, &s, true));
  EXPECT_TRUE(s.tma);
  EXPECT_EQ(s.mf, 1);
  EXPECT_EQ(s.sigma, 0);
  EXPECT_EQ(s.box_w, 200);  // 7 + 15 x 12 + 12 = 199
  // a box too wide even for 16 pixels (7 + 15 x 16 + 44 = 291): the loader form, tiles unchanged
  ASSERT_TRUE(conv_stem_plan(call(1, 4, 640, 32, 11, 4, 2), true, kSms, kOptin, &s, true));
  EXPECT_FALSE(s.tma);
  EXPECT_EQ(s.mf, 2);
  // rows of a dilated filter are not one box
  ConvIgemmParams g = call(1, 3, 224, 64, 7, 2, 3);
  g.dil_h = 2;
  ASSERT_TRUE(conv_stem_plan(g, true, kSms, kOptin, &s, true));
  EXPECT_FALSE(s.tma);
}

#endif  // MIXQ_WITH_CUDA
