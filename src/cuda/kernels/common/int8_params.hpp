// The contract of the INT8 x INT8 tensor-core GEMMs (W8A8 per block, and per-tensor with a
// requantized output): operand layouts and the kernel parameters. Plain C++ shared by the kernels,
// their launchers and the prepared weights.
//
// A: quantized activations [M][lda] i8 (lda a multiple of 16; each row is read in 16-byte chunks up
//    to round_up(K, 16), chunks past that are zero-filled; columns past K are zero codes or
//    multiply zero weight codes). B: the packed weight [Np][Kp] i8, Np = round_up(N, kInt8PadN),
//    Kp = round_up(K, kb) (kb = the K block, 64 or 128 for the block mode, 128 per-tensor),
//    rows and columns past N / K zero.
//
// Block mode (ActQuant::Int8Block), per K block i of g_i real elements:
//   C += sx*sw*dot + sx*Σqx*ow + ox*(sw*Σqw + g_i*ow)
// with the activation meta of act_quant.hpp (sx, ox, Σqx at [i*ld_meta + m]) and the weight meta
// built at prepare time, block-major: sw, ow, dw = sw*Σqw + g_i*ow at [i*Np + int8_meta_col(n)]
// (a permutation inside every 16 columns, see int8_meta_col).
// The Hopper kernel runs the two dot-independent terms as their own small GEMM on the tensor cores
// (tf32, see kernels/sm90_w8a8_policy.cuh) and reads dw (and ow) a second time, K-major and split
// for it: r1w[(2 term + part) Np + n][kb] (term 0 dw, 1 ow; part 0 hi = tf32(v), 1 lo =
// tf32(v - hi), both exact tf32 values), natural column order, kb padded with zeros to KBp =
// round_up(num_kb, kInt8Rank1Blocks) (int8_rank1_pitch).
//
// Per-tensor mode (ActQuant::Int8PerTensor): acc = Σ xq*wq - Z_I*Σqw over all of K in int32 (exact
// while the true value fits, which K <= 65536 guarantees), then in double, in the reference's
// order: real = clamp((S_I*S_W[n])*acc + bias), y = clamp(nearbyint(real / S_O) + Z_O) for i8
// output, or y = (float)real for f32 output.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/common/im2col_conv.hpp"
#include "mixq/numeric.hpp"  // MIXQ_HD
#include "cuda/kernels/common/quant_out.hpp"

namespace mixq::cuda {

constexpr int64_t kInt8PadN = 128;        // packed weight rows are padded to this
constexpr int64_t kInt8TensorBlockK = 128;  // the per-tensor mode's pipeline stage along K
constexpr int64_t kInt8TensorMaxK = 65536;  // int32 accumulation bound of the per-tensor mode

enum class Int8Mode { Block, Tensor };

// K blocks per rank-1 stage of the Hopper block kernel (one tf32 k8 MMA step).
constexpr int64_t kInt8Rank1Blocks = 8;
inline int64_t int8_rank1_pitch(int64_t num_kb) {
  return (num_kb + kInt8Rank1Blocks - 1) / kInt8Rank1Blocks * kInt8Rank1Blocks;
}

// Where column n's weight meta sits in its [Np] row. The accumulator fragment of an MMA gives a
// thread columns 8j + 2t + {0, 1} (t = lane % 4); inside every group of 16 columns the meta is
// stored in the order (t, j % 2, e), so one 16-byte shared load brings a thread its four columns
// of two consecutive j (the Hopper kernel; the sm80 kernel indexes through this too).
MIXQ_HD constexpr int64_t int8_meta_col(int64_t n) {
  return (n & ~int64_t(15)) | (((n >> 1) & 3) << 2) | (((n >> 3) & 1) << 1) | (n & 1);
}

struct Int8GemmParams {
  Int8Mode mode = Int8Mode::Block;
  int M = 0, N = 0, K = 0;
  int kb = 128;                 // K block (block mode: g; tensor mode: kInt8TensorBlockK)
  int n_kblocks = 0;            // ceil(K / kb)
  const int8_t* a = nullptr;    // [M][lda]
  int64_t lda = 0;
  const int8_t* b = nullptr;    // [Np][Kp]
  int64_t ldb = 0;              // Kp
  int64_t Np = 0;
  // block mode: activation meta (act_quant.hpp) and weight meta ([kblock][Np])
  const float* sx = nullptr;
  const float* ox = nullptr;
  const int32_t* sumx = nullptr;
  int64_t ld_meta = 0;
  const float* sw = nullptr;
  const float* ow = nullptr;    // null for symmetric weights
  const float* dw = nullptr;
  const float* r1w = nullptr;   // Hopper kernel: [2 T Np][r1_ld] tf32 hi / lo of dw (, ow)
  int64_t r1_ld = 0;            // int8_rank1_pitch(n_kblocks)
  // tensor mode
  const int32_t* wsum = nullptr;    // [Np] Σqw over the row
  const double* wscale = nullptr;   // [Np] S_I * S_W[n] (double, the reference's product)
  int in_zero = 0;
  double out_scale = 1.0;
  int out_zero = 0;
  // Per-tensor mode as an implicit-GEMM conv2d (the kernels instantiated with im2col): A is the
  // NHWC image `a` [B][H][W][Ci], Ci a multiple of 16 and `a` 16-byte aligned, gathered per K block
  // in the KhKwCi order (column k = (r Kw + s) Ci + ci; a 16-byte chunk never straddles two taps),
  // padding positions read Z_I (the real value 0), rows m = (image, ho, wo); lda unused.
  Im2colConv conv{};
  int conv_on = 0;                  // conv is set (the Hopper kernel reads A through an im2col map)
  const int32_t* wsum_tap = nullptr;  // conv, Hopper kernel, Z_I != 0: [N][Kh Kw] per-tap code sums
  int tile_n = 128;                 // tensor mode, Hopper kernel: 128 x 128 or 128 x 64 output tiles
  int k_split = 1;                  // ... each tile's K over a cluster of 1, 2, 4 or 8 CTAs
  // output and epilogue
  void* y = nullptr;
  int64_t ldy = 0;
  int y_type = 0;               // 0 f16, 1 bf16, 2 f32, 3 i8 (tensor mode only)
  const void* bias = nullptr;   // [N] or null
  int bias_type = 2;            // 0 f16, 1 bf16, 2 f32
  float clamp_lo = 0.f, clamp_hi = 0.f;
  int num_sms = 0;              // persistent kernels' grid limit (0: ask the current device)
  // the few-token Hopper kernels (sm90_i8_skinny): stream-K partial sums and tickets
  float* partial = nullptr;
  unsigned* tickets = nullptr;
  // the Hopper kernels' tuning (Tuning::w8a8_*): raster group of N tiles (0: the default), the
  // TMA-store epilogue (-1 where it can run, 0 off), the skinny kernels' dependent launch
  int group_n = 0;
  int y_tma = -1;
  bool pdl = true;
  // the Hopper block mode's 128-wide tiles (sm90_i8_128x128, its pairs): outputs quantized for
  // the next layer instead of y (kernels/common/epilogue_quant.cuh)
  sm90::QuantOut quant;
};

}  // namespace mixq::cuda
