// Internal: little helpers shared by the ggml block decoders and encoders.
#pragma once

#include <cstdint>
#include <cstring>

#include "mixq/numeric.hpp"

namespace mixq::formats::detail {

inline uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
inline uint32_t load_u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
inline void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline float load_f16(const uint8_t* p) { return f16_to_f32(load_u16(p)); }
inline bool f16_is_finite(uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }
inline void store_f32(uint8_t* base, int64_t index, float v) {
  std::memcpy(base + 4 * index, &v, 4);
}

// Q4_K / Q5_K 12-byte scale+min packing (formats.md §1.7.3): sub-block j's 6-bit codes.
inline void kquant_scale_min(const uint8_t* s, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q3_K's sixteen 6-bit scale codes (formats.md §1.7.2), returned as signed scales c - 32.
inline int q3k_scale(const uint8_t* s, int sub) {
  const int low4 = sub < 8 ? (s[sub] & 0xF) : (s[sub - 8] >> 4);
  const int high2 = (s[8 + sub % 4] >> (2 * (sub / 4))) & 3;
  return (low4 | (high2 << 4)) - 32;
}

}  // namespace mixq::formats::detail
