// Exact reference kernels (CPU, float64 accumulation): the oracles every fast kernel is tested
// against. They are written to be obviously right, not fast.
#pragma once

#include "mixq/ops.hpp"

namespace mixq::ref {

// Weight-only: y = clamp(x . dequant(W)^T + bias). x F32/F16/BF16 [M][K] (original K order;
// k_perm is applied), y F32/F16/BF16 [M][N]. Accumulates in double, rounds once at the end.
void linear_weight_only(const TensorView& x, const QuantizedWeight& w, const TensorView& y,
                        const Epilogue& ep);

// W8A8 per block via the four-term formula of mission.md §2 (integer sums exact in int64):
//   C[m][n] = sum_i ( sx*sw*sum(qx*qw) + sx*ow*sum(qx) + ox*sw*sum(qw) + g_i*ox*ow )
// x is quantized with quantize_activations_int8_block(x, act_block) first. The weight must be I8
// (symmetric or offset form) with block_k == act_block (activation and weight blocks aligned).
void linear_w8a8_block(const TensorView& x, const QuantizedWeight& w, int64_t act_block,
                       const TensorView& y, const Epilogue& ep);
// The same on activations already quantized: a int8-block activations on the CPU in
// QuantizedActivations' layout (any block >= 1, a.block plays act_block), y [M][N] with
// M = a.q.shape[0].
void linear_w8a8_block(const QuantizedActivations& a, const QuantizedWeight& w,
                       const TensorView& y, const Epilogue& ep);
// The same product computed as dequantize(X) . dequantize(W)^T in float64 (a second oracle).
void linear_w8a8_block_dequant(const TensorView& x, const QuantizedWeight& w, int64_t act_block,
                               const TensorView& y, const Epilogue& ep);

// FP8 block: x quantized with quantize_activations_fp8_block, weight fp8b128 (F8E4M3 codes,
// F32 scales, 128x128 blocks): C = sum_kb (sum_k xq*wq) * sa[m,kb] * sb[nb,kb], in float64.
void linear_fp8_block(const TensorView& x, const QuantizedWeight& w, const TensorView& y,
                      const Epilogue& ep);
// The same on activations already quantized: a fp8-block activations on the CPU in
// QuantizedActivations' layout, y [M][N] with M = a.q.shape[0].
void linear_fp8_block(const QuantizedActivations& a, const QuantizedWeight& w, const TensorView& y,
                      const Epilogue& ep);

// INT8 per-tensor with requantized output (quantized CNN inference):
//   Acc32[m][n] = sum_k (xq - Z_I) * wq     (exact, int64)
//   real = S_I * S_W[n] * Acc32 + bias[n];  y_q = clamp(round(real / S_O) + Z_O, -128, 127)
// which equals M*(Acc + FusedBias) of mission.md with M = S_I*S_W/S_O; clamp is applied on the
// real value before requantization. x I8 [M][K]; w I8 symmetric per-channel; y I8 or F32 (real).
void linear_int8_requant(const TensorView& x, const QuantizedWeight& w, Int8TensorQuant in,
                         Int8TensorQuant out, const TensorView& y, const Epilogue& ep);

// Conv2d by its definition (direct loops, float64), weight-only and int8 requantized variants.
void conv2d_weight_only(const TensorView& x, const ConvWeight& w, const TensorView& y,
                        const Conv2dParams& p, const Epilogue& ep);
void conv2d_int8_requant(const TensorView& x, const ConvWeight& w, Int8TensorQuant in,
                         Int8TensorQuant out, const TensorView& y, const Conv2dParams& p,
                         const Epilogue& ep);

// Helpers shared by tests and the bench: read any F32/F16/BF16 element as double, write one
// with round-to-nearest-even.
double load_as_double(const TensorView& v, int64_t i, int64_t j);
void store_from_double(const TensorView& v, int64_t i, int64_t j, double value);

}  // namespace mixq::ref
