// Weight quantizers: offline round-to-nearest quantization into every scheme, and the per-tensor
// INT8 parameters of the requantized path. The run-time activation quantizers (per-block INT8
// with scale/offset/sums, per-token 1x128 FP8) are in mixq/act_quant.hpp.
#pragma once

#include <cstdint>
#include <string>

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

// Per-tensor affine INT8 quantization (quantized CNN inference): real = scale * (q - zero).
struct Int8TensorQuant {
  float scale = 1.0f;
  int32_t zero = 0;
};
// Symmetric per-output-channel INT8 weights (w = s[n] * q): the form the requantized path needs.
QuantizedWeight quantize_weight_int8_per_channel(const TensorView& w);

}  // namespace mixq
