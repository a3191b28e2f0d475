// Kernel parameters and weight layout of the weight-only implicit-GEMM conv2d (plain C++: shared by
// the host backend and the device code).
//
// The GEMM view: rows M = B * Ho * Wo output pixels, columns N = Co, reduction K = Kh * Kw * Ci
// walked tap by tap (kh, kw), and inside a tap along Ci in steps of kConvBK channels. The im2col
// matrix is never written: each step gathers its [kConvBM pixels][kConvBK channels] slice of it
// straight from x into shared memory (zeros for padding and for channels >= Ci).
// Packed taps (few input channels: Ci <= kConvBK / 2, more than one tap, e.g. an RGB stem): a
// step padded to kConvBK channels per tap would be mostly zeros (Ci = 3: 49 steps of which 91%
// padding for a 7x7 kernel), so K is walked as one run k = tap * Ci + ci instead, kConvBK
// columns a step (7x7x3 = 147: 5 steps), each column's (tap, ci) found from k.
//
// Repacked weight (built once at prepare, whichever K order the canonical weight has):
//   codes  [Co][taps][Cip] unsigned codes u = q - code_min, Cip = round_up(Ci, kConvBK); int4 two
//          per byte (even channel in the low nibble), int8 one per byte; channels >= Ci are 0.
//          A row is taps * Cip * bits / 8 bytes: a multiple of 16, so each thread's 16-code run
//          (8 bytes int4, 16 bytes int8) is one aligned vector load. Packed taps: [Co][Kp], code
//          k = tap * Ci + ci, Kp = round_up(taps * Ci, kConvBK), codes past taps * Ci are 0.
//   pairs  [Co][taps][n_cb] float2 (s, o') with w = s * u + o' (wo_layout.hpp's form), one per
//          (output channel, tap, block of cb channels). Both K orders map to this: KhKwCi blocks
//          of block_k channels (block_k | Ci) give cb = block_k and a pair per tap; CiKhKw blocks
//          of B * Kh * Kw columns (whole taps of B channels) give cb = B with the same pair for
//          every tap; per-channel weights give cb = Ci.
#pragma once

#include <cstdint>

#include "cuda/kernels/common/wo_params.hpp"

namespace mixq::cuda {

constexpr int kConvBM = 64;       // output pixels per thread block
constexpr int kConvBN = 64;       // output channels per thread block
constexpr int kConvBK = 32;       // input channels per K step (two m16n8k16 steps)
constexpr int kConvThreads = 128; // 4 warps as 2 x 2, each a 32 x 32 output tile

struct ConvIgemmParams {
  // input x: [B][Ci][H][W] (nchw) or [B][H][W][Ci]
  const void* x;
  IoType x_type;
  bool nchw;
  // NHWC 16-bit x (the MMA operand type), Ci % 8 == 0, x 16-byte aligned: the gather moves 8
  // channels per 16-byte load and store instead of one element at a time
  bool vec_x;
  int B, Ci, H, W;
  int Co, Ho, Wo;
  int Kh, Kw;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  // weight (layout above)
  const uint8_t* codes;
  const float2* pairs;
  int bits;         // 4 or 8
  int Cip;          // Ci rounded up to kConvBK (unused with packed taps)
  bool packed;      // packed taps: K = taps * Ci walked as one run (layout above)
  int k_total;      // taps * Ci
  int k_steps;      // K steps of kConvBK: taps * ceil(Ci / kConvBK), or ceil(k_total / kConvBK) packed
  int cb;           // channels per scale block (>= 1)
  int n_cb;         // blocks per tap: ceil(Ci / cb)
  int64_t row_bytes;
  // K split (few output tiles: batch 1, deep layers): block z runs K steps
  // [z * steps_per_split, (z + 1) * steps_per_split) of the k_steps and
  // writes its raw sums to partial[z][M][Co]; conv_split_reduce_kernel adds the splits in order
  // and applies the epilogue. splits == 1: partial is null and the block writes y itself.
  int splits;
  int steps_per_split;
  float* partial;
  // output y: [B][Co][Ho][Wo] (nchw) or [B][Ho][Wo][Co]
  void* y;
  IoType y_type;
  const void* bias;  // nullable, [Co]
  IoType bias_type;
  float clamp_lo, clamp_hi;
};

// INT8 per-tensor conv (ActQuant::Int8PerTensor): x i8 with input quant (S_I, Z_I), the weight i8
// symmetric per output channel, repacked like the weight-only codes but signed, one byte per code:
// codes [Co][taps][Cip] (channels >= Ci zero). The gather puts the code Z_I (real value 0) at
// padding positions, so the int32 MMA sum over every tap is sum xq*wq with Z_I at the padding and
// acc = that - Z_I * wsum[n] = sum (xq - Z_I) * wq exactly (mod 2^32, exact while K <= 65536).
// The epilogue then evaluates the reference's real = clamp((S_I*S_W[n])*acc + bias) and
// y = clamp(nearbyint(real / S_O) + Z_O, -128, 127) in double, in its order (int8_params.hpp).
struct ConvI8Params {
  const int8_t* x;
  bool nchw;
  bool vec_x;  // NHWC, Ci % 16 == 0, x 16-byte aligned: 16 channels per load and store
  int B, Ci, H, W;
  int Co, Ho, Wo;
  int Kh, Kw;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  const int8_t* codes;
  int Cip;
  int64_t row_bytes;     // taps * Cip
  const int32_t* wsum;   // [Co] sum of the row's codes
  const double* wscale;  // [Co] S_I * S_W[n]
  int in_zero;
  double out_scale;
  int out_zero;
  void* y;
  bool y_i8;             // else f32 real values
  const void* bias;      // nullable, [Co]
  IoType bias_type;
  float clamp_lo, clamp_hi;
};

}  // namespace mixq::cuda
