// The CUDA stem conv kernel's plan (kernels/conv/conv_stem.hpp) is a host function of the call's
// geometry and the device's SM count and shared memory: which calls it takes, its tile, K padding
// and shared-memory size, tested without a GPU; and so is the Hopper INT8 conv's tile and K split
// (dispatch/conv_int8_tile.hpp).
#if defined(MIXQ_WITH_CUDA)
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "cuda/dispatch/conv_int8_tile.hpp"
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

// The Hopper INT8 conv's tile and K split (M pixels, Co channels, K blocks of 128, SMs).
TEST(CudaConvInt8HopperTile, SplitsKWhereTheTilesLeaveTheSmsIdle) {
  auto tile = [](int64_t M, int64_t N, int64_t kb, int sms) {
    const ConvInt8HopperTile t = conv_int8_hopper_tile(M, N, kb, sms);
    return std::make_pair(t.tile_n, t.k_split);
  };
  using P = std::pair<int, int>;
  // ResNet-50 3x3 256->256 @14 (18 K blocks) on 132 SMs: batch 1 has 8 tiles of 128 x 64, split
  // over 8 CTAs (64); batch 5 and 8 (32 and 52 tiles) over 2 (a split of 4 would pass 7/8 of the
  // SMs: 128 and 208 CTAs); batch 32 one round of 98 tiles of 128 x 128
  EXPECT_EQ(tile(196, 256, 18, 132), P(64, 8));
  EXPECT_EQ(tile(196 * 5, 256, 18, 132), P(64, 2));
  EXPECT_EQ(tile(196 * 8, 256, 18, 132), P(64, 2));
  EXPECT_EQ(tile(196 * 32, 256, 18, 132), P(128, 1));
  // 3x3 512->512 @7 (36 K blocks): batch 1 one M tile, 8 tiles: split 8; batch 8, 32 tiles: split
  // 2 (128 CTAs in clusters of 4 measured slower); batch 32, 104 tiles of 128 x 64 in one round
  // against 52 of 128 x 128
  EXPECT_EQ(tile(49, 512, 36, 132), P(64, 8));
  EXPECT_EQ(tile(49 * 8, 512, 36, 132), P(64, 2));
  EXPECT_EQ(tile(49 * 32, 512, 36, 132), P(64, 1));
  // at least one K block a CTA: a 1x1 1024->256 @14 (8 K blocks) splits 8 ways, a 1x1 over 256
  // channels (2 K blocks) 2 ways, one K block not at all
  EXPECT_EQ(tile(196, 256, 8, 132), P(64, 8));
  EXPECT_EQ(tile(196, 256, 2, 132), P(64, 2));
  EXPECT_EQ(tile(196, 256, 1, 132).second, 1);
  // 3x3 128->128 @28 (9 K blocks) at batch 1: 14 tiles, 112 CTAs at split 8 (within 7/8 of 132)
  EXPECT_EQ(tile(784, 128, 9, 132), P(64, 8));
  // fewer SMs (an H100 PCIe's 114): the same batch-1 layer stops at 4 (112 > 7/8 of 114)
  EXPECT_EQ(tile(784, 128, 9, 114), P(64, 4));
  // tiles that fill more than half of the SMs: no split, the rounds rule (3x3 128->128 @28 at
  // batch 32: 196 x 2 tiles of 128 x 64, three rounds, against 196 of 128 x 128, two: 0.6 x 3 < 2)
  EXPECT_EQ(tile(784 * 32, 128, 9, 132), P(64, 1));
  // 98 M tiles x 512 channels: 392 tiles of 128 x 128 (three rounds) against 784 of 128 x 64 (six)
  EXPECT_EQ(tile(6272 * 2, 512, 18, 132), P(128, 1));
}

#endif  // MIXQ_WITH_CUDA
