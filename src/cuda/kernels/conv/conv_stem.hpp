// The few-input-channel conv ("stem": an RGB image's first layer, 7x7 stride 2 over 3 channels)
// as an implicit GEMM whose activation operand is read from a shared-memory patch of the image
// (plain C++: shared by the host plan and the device code).
//
// Why its own kernel: with Ci <= 4 a pixel's whole filter row is one contiguous run of
// Kw * Ci elements in an NHWC image (taps kw and channels ci together), and the rows of
// consecutive output pixels overlap (stride_w * Ci elements apart). The general kernel gathers
// every (pixel, k) element with its own bounds test and divisions and dequantizes the weight again
// in every block; this one
//   - loads, per tile of tile_w output pixels of one output row, the Kh input rows the tile
//     reads (patch[kh][e], e = the run of the row's (iw, ci) elements from the tile's first
//     input column, zeros outside the image) once, coalesced;
//   - takes the MMA's A fragments straight from the patch: K is ordered k = kh * lp + j with
//     j = kw * Ci + ci < Kw * Ci (lp = Kw * Ci rounded up to even, so a fragment's pair of
//     columns never straddles two filter rows), and element (pixel m, k) is
//     patch[kh][m * stride_w * Ci + j]. Columns j >= Kw * Ci and k >= Kh * lp are masked to 0
//     in the fragment (the patch there holds real neighbouring pixels);
//   - copies its 64 output channels' weights into shared memory once per block, from an image
//     prepare dequantized in that K order (w = s * u + o' rounded to the operand type, the
//     general kernel's values: [f16 | bf16][Co rounded up to 64][kpad], 0 in padding columns
//     and channels), and walks many tiles (a persistent grid);
//   - odd stride_w * Ci makes every other pixel's run start at an odd element, which 32-bit
//     fragment loads cannot read: the patch is then kept a second time shifted by one element.
// The image is small (at most 2 x 2 x kStemMaxK bytes an output channel); the weight also keeps
// the packed-taps codes the general kernel reads (f32 activations, dilation along W).
//
// On sm_90 with an NHWC image whose rows are 16-byte multiples, the patch is brought by TMA
// instead (sm90_conv_stem_tma): each warp loads its own [Kh][box_w] box (its 16 * mf pixels' runs,
// box_w <= 256, the box limit) as a 3-D tile of the image viewed as [B][H][W * Ci], zeros outside
// it from the copy engine, into one of two stages a tile ahead of its MMAs. No thread computes a
// patch address and the block never waits on itself between tiles (the loader above, all threads
// at once between two barriers, bounded the kernel: issue-bound, DRAM 4% busy). A box's innermost
// coordinate must be a multiple of 16 bytes (else the copy faults as an illegal instruction), so
// the box starts at the 8-element boundary at or below the warp's first run, delta elements
// before it. delta has the parity of pad_w * Ci (stride_w * Ci must be even: no shifted copy in
// this form), so where that is odd every run starts at an odd element of the box: the call then
// takes the K order shifted by one column (sigma = 1: k = kh * lp + 1 + kw * Ci + ci, column 0 of
// each filter row a masked neighbour), whose pairs start at the even element before each run, and
// the weight image of that order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cuda/kernels/conv/conv_params.hpp"

namespace mixq::cuda {

constexpr int kStemBN = 64;         // output channels per block (8 n8 fragments per warp)
constexpr int kStemThreads = 128;   // 4 warps, each 16 * mf output pixels of the tile
constexpr int kStemMaxCi = 4;       // input channels the kernel is instantiated for (1-4)
constexpr int kStemMaxK = 512;      // padded K (Kh * lp rounded up to 16) it accepts

struct ConvStemParams {
  ConvIgemmParams g;    // geometry, output, epilogue
  const uint16_t* w_image;  // the weight image of the operand type and K order [Co to 64][img_pitch]
  int img_pitch;        // elements between the image's rows (>= kpad)
  int sigma;            // K order shifted one column (TMA form, odd pad_w * Ci), else 0
  int mf;               // m16 fragments per warp: tile_w = 64 * mf
  int tile_w;           // output pixels (consecutive ow of one output row) per tile
  int tiles_per_row;    // ceil(Wo / tile_w)
  int64_t pixel_tiles;  // B * Ho * tiles_per_row
  int lp;               // K columns per filter row: Kw * Ci + sigma rounded up to even
  int kpad;             // Kh * lp rounded up to 16
  int b_pitch;          // shared weight row pitch (elements): kpad + 8
  int patch_w;          // elements of a patch row: (tile_w - 1) * stride_w * Ci + lp
  int patch_pitch;      // patch_w rounded up to even
  bool shifted;         // odd stride_w * Ci: the shifted second copy of the patch
  size_t smem_bytes;    // dynamic shared memory of one block
  // TMA form (sm_90, NHWC): per warp and stage a [Kh][box_w] patch
  bool tma;             // the patch comes by TMA, one box a warp, two stages
  int box_w;            // elements of a warp's patch row: 7 + (16 mf - 1) stride_w Ci + lp, to 8
  int stage_bytes;      // bytes of a warp's stage: Kh x box_w x 2 (at least kStemOutBytes), to 128
  int patch_offset;     // shared-memory offset of the stages (after weights, K table, barriers)
  // INT8 per-tensor requantization (the INT8 conv's stem, backend/conv_int8_tensor.cpp): g.x is
  // an f16 NHWC copy of the int8 image less Z_I and the weight image holds the int8 codes, both
  // exact in f16 (|x - Z_I| <= 256 for |Z_I| <= 128), so every f32 partial sum is an integer of
  // magnitude at most 2^24 (K <= kStemMaxK products of at most 256 x 128: kStemInt8ExactK) and
  // the accumulators are the exact int32 sums, the padding's terms zero as the reference's Z_I. The
  // epilogue is the INT8 kernels' (int8_requant.cuh); y is int8 codes (y_i8) or f32 real values,
  // NCHW or NHWC (y_nchw: x's copy is NHWC whatever the call's layout).
  bool requant;
  bool y_nchw, y_i8;
  const double* wscale;  // [Co] S_I * S_W[n]
  double out_scale;
  int out_zero;
};

// The f32 sums of the INT8 stem are exact while K * 256 * 128 <= 2^24 (int8 codes against x - Z_I,
// |Z_I| <= kStemInt8MaxZero): every integer of that magnitude is an f32.
constexpr int kStemInt8ExactK = 512;
constexpr int kStemInt8MaxZero = 128;
static_assert(kStemMaxK <= kStemInt8ExactK, "the INT8 stem's padded K keeps its f32 sums exact");

constexpr int kStemTmaMaxBox = 256;  // TMA box extent limit (elements a dimension)
constexpr int kStemStages = 2;       // TMA form: patch stages per warp (one tile ahead)
// TMA form, NHWC outputs: a warp stages 16 pixels x 64 channels of its output in the patch stage
// it has just consumed (rows padded by 16 bytes: the fragment writes are conflict-free), then
// stores them 16 bytes a lane; a stage holds at least that
constexpr int kStemOutPitch = kStemBN + 8;
constexpr int kStemOutBytes = 16 * kStemOutPitch * 2;

// K columns of a filter row and padded K of a Ci-channel Kh x Kw filter (the image's row length)
// in the K order shifted by sigma columns.
inline int conv_stem_lp(int Ci, int Kw, int sigma = 0) { return (Kw * Ci + sigma + 1) / 2 * 2; }
inline int conv_stem_kpad(int Ci, int Kh, int Kw, int sigma = 0) {
  return (Kh * conv_stem_lp(Ci, Kw, sigma) + 15) / 16 * 16;
}

// Whether the stem kernel takes a conv with these input channels, filter, horizontal stride /
// dilation and 16-bit activations, and if so its shared-memory plan. `sms` SMs,
// `smem_optin` bytes of shared memory a block may use. The pixel tile is 128 wide where the
// output rows are wider than 64 and the 128-wide tiles give every SM one; else 64.
// `tma`: the caller's device and x admit the TMA form (sm_90, NHWC, x 16-byte aligned, image rows
// of 16-byte multiples, dilation_h 1); it is planned where a warp's box fits the TMA limit
// (the 128-pixel tile drops to 64 where only that fits), else the loader form.
// `max_mf` 1: 64-pixel tiles only (the INT8 stem: its epilogue beside 128 pixels' accumulators
// spilled).
inline bool conv_stem_plan(const ConvIgemmParams& g, bool x16, int sms, size_t smem_optin,
                           ConvStemParams* out, bool tma = false, int max_mf = 2) {
  if (!x16 || !g.packed || g.Ci < 1 || g.Ci > kStemMaxCi || g.dil_w != 1) return false;
  if (conv_stem_kpad(g.Ci, g.Kh, g.Kw) > kStemMaxK) return false;
  ConvStemParams s{};
  s.g = g;
  const int64_t rows = int64_t(g.B) * g.Ho;
  const int64_t tiles128 = rows * ((g.Wo + 127) / 128) * ((g.Co + kStemBN - 1) / kStemBN);
  s.mf = max_mf >= 2 && g.Wo > 64 && tiles128 >= sms ? 2 : 1;
  s.shifted = (g.stride_w * g.Ci) % 2 == 1;
  const int run_step = g.stride_w * g.Ci;
  // TMA form: even runs, the shifted order's K within the limit, a box that fits (the 128-pixel
  // tile drops to 64 where only that fits)
  const int sigma = (g.pad_w * g.Ci) % 2;
  const int lp_t = conv_stem_lp(g.Ci, g.Kw, sigma);
  auto box_w = [&](int mf) { return int((7 + int64_t(16 * mf - 1) * run_step + lp_t + 7) / 8 * 8); };
  if (tma && !s.shifted && g.dil_h == 1 && g.Kh <= kStemTmaMaxBox &&
      conv_stem_kpad(g.Ci, g.Kh, g.Kw, sigma) <= kStemMaxK && box_w(1) <= kStemTmaMaxBox) {
    if (box_w(s.mf) > kStemTmaMaxBox) s.mf = 1;
    s.tma = true;
    s.sigma = sigma;
    s.box_w = box_w(s.mf);
    s.stage_bytes = (std::max(g.Kh * s.box_w * 2, kStemOutBytes) + 127) / 128 * 128;
  }
  s.lp = conv_stem_lp(g.Ci, g.Kw, s.sigma);
  s.kpad = conv_stem_kpad(g.Ci, g.Kh, g.Kw, s.sigma);
  s.tile_w = 64 * s.mf;
  s.tiles_per_row = (g.Wo + s.tile_w - 1) / s.tile_w;
  s.pixel_tiles = rows * s.tiles_per_row;
  s.b_pitch = s.kpad + 8;
  const int64_t run = int64_t(s.tile_w - 1) * run_step + s.lp;
  if (run > (int64_t(1) << 20)) return false;
  s.patch_w = int(run);
  s.patch_pitch = (s.patch_w + 1) / 2 * 2;
  // weights [64][b_pitch], the K table (one int2 per column pair), then the patch (twice if
  // shifted); TMA form: an mbarrier a warp and stage, then the warps' stages from a 128-byte
  // boundary
  const size_t tables = size_t(kStemBN) * s.b_pitch * 2 + size_t(s.kpad / 2) * 8;
  if (s.tma) {
    const size_t warps = kStemThreads / 32;
    s.patch_offset = int((tables + warps * kStemStages * 8 + 127) / 128 * 128);
    s.smem_bytes = size_t(s.patch_offset) + warps * kStemStages * size_t(s.stage_bytes);
  } else {
    s.smem_bytes = tables + size_t(s.shifted ? 2 : 1) * g.Kh * s.patch_pitch * 2;
  }
  if (s.smem_bytes > smem_optin) return false;
  *out = s;
  return true;
}

}  // namespace mixq::cuda
