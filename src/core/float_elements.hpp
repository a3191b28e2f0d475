// Element i of an f32, f16 or bf16 array as f32, and the store back (f16 / bf16 rounded to
// nearest even): the host loops over activations and outputs that take any of the three types.
#pragma once

#include <cstdint>

#include "mixq/dtype.hpp"
#include "mixq/numeric.hpp"

namespace mixq {

inline float load_f32_elem(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

inline void store_f32_elem(void* base, DType t, int64_t i, float v) {
  switch (t) {
    case DType::F16: static_cast<uint16_t*>(base)[i] = f32_to_f16(v); break;
    case DType::BF16: static_cast<uint16_t*>(base)[i] = f32_to_bf16(v); break;
    default: static_cast<float*>(base)[i] = v;
  }
}

}  // namespace mixq
