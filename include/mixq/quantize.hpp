// Quantizers: offline round-to-nearest weight quantization into every scheme, and the run-time
// activation quantizers (per-block INT8 with scale/offset/sums, per-token 1x128 FP8).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixq/quantized_weight.hpp"
#include "mixq/tensor.hpp"

namespace mixq {

// A weight quantization scheme. Names (parse_scheme / scheme_name):
//   w4g128      int4 symmetric, block 128 along K, f16 scales      (w = s*q, q in [-8, 7])
//   w4g32asym   int4 with float offset, block 32                   (w = s*q + o)
//   w4g128zp    uint4 with integer zero point (GPTQ/AWQ style)     (w = s*(q - z))
//   w8g128      int8 symmetric, block 128                          (w = s*q)
//   w8g64asym   int8 with float offset, block 64
//   w4pc / w8pc per-channel (block = K)
//   fp8b128     e4m3 codes, f32 scale per 128x128 block (scale = amax / 448)
// Suffixes: g{32,64,128,256,...} block size, pc per-channel, asym offset form, zp zero-point
// form, and an optional "-bf16"/"-f32" scale type (default f16; fp8b128 always f32).
struct QuantScheme {
  DType code_type = DType::I4;
  int64_t block_k = 128;  // 0 = per-channel (resolved to K at quantization time)
  int64_t block_n = 1;
  ZeroKind zero_kind = ZeroKind::None;
  DType scale_type = DType::F16;
};

QuantScheme parse_scheme(const std::string& name);  // throws InvalidArgument listing valid names
std::string scheme_name(const QuantScheme& s);

// Round-to-nearest quantization of a host [N][K] F32/F16/BF16 matrix (rows contiguous).
// Symmetric:  s = amax / qmax (qmax = 7 or 127), q = clamp(round(w / s), qmin, qmax).
// Offset:     s = (max - min) / (2^bits - 1), o = min - qmin * s, q = clamp(round((w - o)/s)).
// ZeroPoint:  s = (max - min) / (2^bits - 1), z = clamp(round(-min / s)), q = clamp(round(w/s) + z).
// FP8 block:  s = amax / 448 over the 128x128 block, q = e4m3(w / s) (RNE, saturating).
// Every element's dequantized value is within half a step (s/2) of the input (FP8: within half
// an e4m3 ulp of w/s, times s). An all-zero block gets s = 0 codes 0 (w = 0 exactly).
QuantizedWeight quantize_weight(const TensorView& w, const QuantScheme& scheme);

// Run-time per-block INT8 activation quantization (W8A8, mission.md §2):
//   for each row m and block i of `block` elements along K:
//   sx = (max - min) / 255, ox = min + 128 * sx, qx = clamp(round((x - ox) / sx), -128, 127),
//   so x ~= qx * sx + ox; sum = sum of qx over the block (what the four-term formula needs).
//   A constant block gets sx = 0, ox = x, qx = 0.
struct Int8BlockActivations {
  int64_t M = 0, K = 0, block = 0;
  std::vector<int8_t> q;       // [M][K]
  std::vector<float> scale;    // [M][ceil(K/block)]
  std::vector<float> offset;   // [M][ceil(K/block)]
  std::vector<int32_t> sums;   // [M][ceil(K/block)]
  int64_t n_blocks() const { return (K + block - 1) / block; }
};
// Per row and block of `block` columns: scale = (max - min) / 255, offset = min + 128 scale (both
// f32), code = int8_act_code(x, offset, 1 / scale) (mixq/numeric.hpp: an f32 quotient, clamped,
// rounded half to even; every backend produces these codes bit for bit), sums = the block's code
// sum. A constant block gets scale 0, offset x and codes 0; non-finite input is an error.
Int8BlockActivations quantize_activations_int8_block(const TensorView& x, int64_t block);

// Run-time per-token 1x128 FP8 activation quantization (DeepSeek-V3):
//   amax over each row's 128-element group (floored at 1e-10 so that zero groups stay finite),
//   s = amax / 448, q = e4m3(x / s).
struct Fp8BlockActivations {
  int64_t M = 0, K = 0;
  static constexpr int64_t kGroup = 128;
  std::vector<uint8_t> q;     // [M][K] e4m3
  std::vector<float> scale;   // [M][ceil(K/128)]
  int64_t n_groups() const { return (K + kGroup - 1) / kGroup; }
};
Fp8BlockActivations quantize_activations_fp8_block(const TensorView& x);

// Per-tensor affine INT8 quantization (quantized CNN inference): real = scale * (q - zero).
struct Int8TensorQuant {
  float scale = 1.0f;
  int32_t zero = 0;
};
// Symmetric per-output-channel INT8 weights (w = s[n] * q): the form the requantized path needs.
QuantizedWeight quantize_weight_int8_per_channel(const TensorView& w);

}  // namespace mixq
