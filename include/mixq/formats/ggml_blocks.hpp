// ggml's block-quantized tensor types (formats.md §1): type table, lossless conversion of a block
// tensor into the canonical QuantizedWeight, and the reference encoders mixq can write.
//
// A ggml tensor with ne = [K, N] (ne[0] contiguous) is the matrix W[N][K]: each row of K elements
// is a run of K/QK blocks. The canonical form reproduces gguf-py's / ggml's float32 dequantization
// bit for bit; docs/formats-notes.md lists the mapping chosen for each type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixq/quantized_weight.hpp"

namespace mixq::formats {

// Type ids as stored in GGUF tensor infos (enum ggml_type).
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
};

struct GgmlTypeInfo {
  uint32_t id;
  const char* name;      // "Q4_K"
  int64_t block_elems;   // QK
  int64_t block_bytes;   // sizeof(block)
  bool convertible;      // ggml_to_canonical supports it
};

// nullptr for ids mixq does not know the layout of (the GGUF reader rejects such tensors).
const GgmlTypeInfo* ggml_type_info(uint32_t id);
const char* ggml_type_name(uint32_t id);  // "type#99" style text for unknown ids

// Converts `rows` rows of `K` elements of type `type`, stored contiguously at `data`
// (rows * K/QK * block_bytes bytes), into the canonical weight W[rows][K]. Lossless: for every
// element, QuantizedWeight::dequant equals ggml's float32 decode bit for bit. Throws
// Error(Format) naming `what` (e.g. "model.gguf: tensor 'blk.0.attn_q.weight'") when a block
// holds a non-finite scale (the canonical form keeps scales finite), InvalidArgument for an
// unsupported type or K not a multiple of the block size.
QuantizedWeight ggml_to_canonical(GgmlType type, const uint8_t* data, int64_t rows, int64_t K,
                                  const std::string& what);

// Reference decode of one row (n elements) to float32, written independently of the canonical
// path: the formulas of formats.md §1 in ggml's operation order. Used by tests and `inspect`.
void ggml_dequantize_row(GgmlType type, const uint8_t* data, float* out, int64_t n);

// Encoders producing exactly the bytes of ggml's reference quantizers (quantize_row_*_ref,
// compiled without FMA contraction, which is also what gguf-py 0.19 computes):
//   Q4_0 (§1.1), Q8_0 (§1.5), Q4_K (§1.7.4 with make_qkx2_quants §1.9.4), and F16 / BF16 / F32.
// n must be a multiple of the block size; inputs must be finite. What the type cannot represent
// is an error (InvalidArgument) rather than a file mixq's reader would reject or a silently
// zeroed block: an f16 block scale (Q4_0 / Q8_0 d, Q4_K d and dmin) that overflows or loses more
// than 2^-5 of itself to underflow, and an F16 / BF16 value that overflows.
void ggml_quantize_row(GgmlType type, const float* x, uint8_t* out, int64_t n);
// For F16 / BF16 tensors (no-op for other types): throws when the n values, taken as one tensor,
// overflow or lose more than 2^-5 of the largest |value| to underflow. `what` names the tensor.
void ggml_check_values(GgmlType type, const float* x, int64_t n, const std::string& what);
bool ggml_can_encode(GgmlType type);

// Bytes of one row of n elements (n % QK == 0 checked by callers).
int64_t ggml_row_bytes(GgmlType type, int64_t n);

// The non-linear codebook of IQ4_NL / IQ4_XS (ggml-common.h kvalues_iq4nl).
extern const int8_t kIq4nlValues[16];

}  // namespace mixq::formats
