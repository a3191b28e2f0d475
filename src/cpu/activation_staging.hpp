// Activation rows turned, once per call, into what the micro-kernels read: f32 (or int8 codes)
// in the weight's padded-K segment layout, k_perm applied, padding zero, plus per-segment sums
// (float path) or per-segment quantization parameters (integer paths).
#pragma once

#include <cstdint>

#include "cpu/kernels.hpp"
#include "mixq/ops.hpp"
#include "mixq/tensor.hpp"

namespace mixq::cpu {

// A row source: element (m, k) of the original-order activation as float.
struct RowReader {
  const void* data;
  DType dtype;
  int64_t ld;
  float at(int64_t m, int64_t k) const;
};

// Float path. xp [rows][Kp], xsum [rows][n_segs] for rows m0..m1 of x.
void stage_float_rows(const RowReader& x, const PackedWeight& w, int64_t m0, int64_t m1,
                      float* xp, float* xsum);
// Same from already-gathered canonical-order rows g [rows][K] (conv im2col tiles).
void stage_float_gathered(const float* g, int64_t rows, const PackedWeight& w, float* xp,
                          float* xsum);

// FP8 block: per row and 128-group, s = max(amax, 1e-10) / 448, q = e4m3(x / s) exactly as
// quantize_activations_fp8_block; stages q's value times s (f32) for the float path.
void stage_fp8_rows(const RowReader& x, const PackedWeight& w, int64_t m0, int64_t m1, float* xp,
                    float* xsum);

// Integer paths. Quantization units: `unit_block` > 0 quantizes per block of that many
// canonical columns (W8A8: bit-exact with quantize_activations_int8_block); 0 quantizes per
// segment (weight-only i8dot). Bytes hold qx (s8) or qx + 128 for Int8 weight codes.
// quantize_i8 is the kernel table's (KernelTable::quantize_i8).
using QuantizeI8Fn = void (*)(const float* x, int64_t n, float of, float sc, int8_t* q);
void stage_int8_block_rows(const RowReader& x, const PackedWeight& w, int64_t unit_block,
                           int64_t m0, int64_t m1, uint8_t* xb, ActSegment* xs,
                           QuantizeI8Fn quantize_i8);
// Pre-quantized activations (linear(QuantizedActivations)), rows m0..m1 of the caller's
// validated CPU views, read in place:
// FP8 stages each code's value times its scale, as stage_fp8_rows does; INT8 block stages the
// codes and takes each segment's scale, offset and code sum from its block's (W8A8 segments are
// whole blocks), as stage_int8_block_rows does for the codes it computes.
void stage_fp8_quantized_rows(const QuantizedActivations& a, const PackedWeight& w, int64_t m0,
                              int64_t m1, float* xp, float* xsum);
void stage_int8_block_quantized_rows(const QuantizedActivations& a, const PackedWeight& w,
                                     int64_t m0, int64_t m1, uint8_t* xb, ActSegment* xs);
// Per-tensor INT8: x is already int8 (row-major, ld). Bytes x + 128 (weights are Int8).
void stage_int8_tensor_rows(const int8_t* x, int64_t ld, const PackedWeight& w, int64_t m0,
                            int64_t m1, uint8_t* xb);
void stage_int8_tensor_gathered(const int8_t* g, int64_t rows, const PackedWeight& w,
                                uint8_t* xb);

}  // namespace mixq::cpu
