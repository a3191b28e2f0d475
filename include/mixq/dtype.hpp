// Element types used by activations, weights, codes, scales and outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace mixq {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  F8E4M3,  // float8_e4m3fn: no infinities, 0x7F/0xFF = NaN, max finite 448
  I8,
  U8,
  I4,  // packed two per byte, element 2i in the low nibble of byte i
  U4,  // same packing, unsigned
  I32,
  F64,
};

// Storage size in bits of one element (4 for I4/U4).
int dtype_bits(DType t);
const char* dtype_name(DType t);  // "f32", "f16", "bf16", "f8e4m3", "i8", "u8", "i4", "u4", ...
std::optional<DType> parse_dtype(const std::string& name);

inline bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F8E4M3 ||
         t == DType::F64;
}
inline bool is_integer(DType t) { return !is_float(t); }
inline bool is_subbyte(DType t) { return t == DType::I4 || t == DType::U4; }

// Bytes needed for `count` contiguous elements (sub-byte types round up).
inline int64_t dtype_bytes(DType t, int64_t count) {
  return (count * dtype_bits(t) + 7) / 8;
}

// Range of an integer code type, e.g. I4 -> [-8, 7], U4 -> [0, 15].
int32_t code_min(DType t);
int32_t code_max(DType t);

}  // namespace mixq
