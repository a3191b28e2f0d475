// The unpacked form shared by GPTQ and AWQ checkpoints: integer codes q[k][n] in [0, 2^bits),
// per-group zero points and scales indexed [group][n], and an optional g_idx (act-order).
//
//   W[n][k] = scale[g][n] * (q[k][n] - zero[g][n]),  g = g_idx[k] (or k / group_size),
//
// computed in f32 (exact: an f16/bf16 scale times an integer below 2^9 needs < 24 mantissa bits,
// so the product is the same whatever the float order; GPTQ/AWQ dequantize in the model dtype,
// which is this value rounded once to f16/bf16).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixq/dtype.hpp"
#include "mixq/quantized_weight.hpp"

namespace mixq::formats {

struct GroupedIntWeight {
  int bits = 4;  // 2, 3, 4 or 8
  int64_t K = 0, N = 0;
  int64_t groups = 0;             // G: rows of scales / zeros
  int64_t group_size = 0;         // g (K when per-channel); with a non-trivial g_idx, the size
                                  // every group must have (0: take it from the g_idx counts)
  std::vector<uint8_t> q;         // [K][N], index k * N + n
  std::vector<int32_t> zeros;     // [G][N] true zero points, 0 ..= 2^bits (GPTQ v1 can give 2^bits)
  DType scale_type = DType::F16;  // what the checkpoint stores (F16, BF16 or F32)
  std::vector<float> scales;      // [G][N], values exactly representable in scale_type
  std::vector<int32_t> g_idx;     // empty (g = k / group_size) or [K]

  int32_t group_of(int64_t k) const {
    return g_idx.empty() ? static_cast<int32_t>(k / group_size) : g_idx[k];
  }
  // The formula above, in f32, original column order (the independent definition tests use).
  float dequant(int64_t n, int64_t k) const {
    const int64_t g = group_of(k);
    return scales[g * N + n] * static_cast<float>(int32_t(q[k * N + n]) - zeros[g * N + n]);
  }
  // Throws mixq::Error(Format) naming `what` on inconsistent sizes, codes/zeros out of range,
  // g_idx entries outside [0, G), non-finite scales.
  void validate(const std::string& what) const;
};

// Converts to the canonical weight losslessly: U4 codes for bits <= 4, U8 for 8; ZeroPoint form;
// scales kept in scale_type; block_k = group size. A non-trivial g_idx becomes k_perm (columns
// sorted by group, stable in k, so groups are contiguous); groups of unequal size are rejected.
// dequantize_rows(result, ..., original_order=true) equals dequant() above for every element.
QuantizedWeight grouped_int_to_quantized(const GroupedIntWeight& w, const std::string& origin,
                                         const std::string& what);

// Reads / writes `count` codes of `bits` bits as a little-endian bitstream over 32-bit words
// taken with stride `stride` (element i at global bit i*bits, lowest bits first; fields may
// straddle two words, as 3-bit GPTQ does). Words are read as unaligned little-endian int32.
uint32_t bitstream_get(const uint8_t* words, int64_t stride, int64_t i, int bits);
void bitstream_put(int32_t* words, int64_t stride, int64_t i, int bits, uint32_t value);

}  // namespace mixq::formats
