// Internal helpers shared by the safetensors-based format converters: unaligned little-endian
// loads (tensors point into a mapping and need not be aligned) and scale encodings.
#pragma once

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mixq/dtype.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/formats/awq.hpp"
#include "mixq/formats/gptq.hpp"
#include "mixq/quantized_weight.hpp"

namespace mixq::formats::st {

inline uint32_t load_u32(const void* base, int64_t i) {
  const uint8_t* p = static_cast<const uint8_t*>(base) + 4 * i;
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
inline int32_t load_i32(const void* base, int64_t i) {
  return static_cast<int32_t>(load_u32(base, i));
}

inline int scale_bytes(DType t) {
  return dtype_bits(t) / 8;
}

inline float load_scale(const void* base, DType t, int64_t i) {
  const uint8_t* p = static_cast<const uint8_t*>(base);
  switch (t) {
    case DType::F32:
      return bits_f32(load_u32(base, i));
    case DType::F16:
      return f16_to_f32(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
    case DType::BF16:
      return bf16_to_f32(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
    default:
      MIXQ_FAIL(ErrorCode::Internal, "load_scale: ", dtype_name(t));
  }
}

// Stores `v` (which must be exactly representable in t) at element i.
inline void store_scale(uint8_t* base, DType t, int64_t i, float v) {
  uint32_t bits;
  switch (t) {
    case DType::F32:
      bits = f32_bits(v);
      break;
    case DType::F16:
      bits = f32_to_f16(v);
      break;
    case DType::BF16:
      bits = f32_to_bf16(v);
      break;
    default:
      MIXQ_FAIL(ErrorCode::Internal, "store_scale: ", dtype_name(t));
  }
  const int nb = scale_bytes(t);
  for (int b = 0; b < nb; ++b) base[nb * i + b] = static_cast<uint8_t>(bits >> (8 * b));
}

// The first n values of v stored as a little-endian array of t (each exactly representable).
inline std::vector<uint8_t> store_scales(DType t, const float* v, int64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n * scale_bytes(t)));
  for (int64_t i = 0; i < n; ++i) store_scale(out.data(), t, i, v[i]);
  return out;
}

// Maps a safetensors float dtype string to a scale DType (F16, BF16, F32); false otherwise.
inline bool scale_dtype_from_st(const std::string& s, DType* t) {
  if (s == "F16") {
    *t = DType::F16;
    return true;
  }
  if (s == "BF16") {
    *t = DType::BF16;
    return true;
  }
  if (s == "F32") {
    *t = DType::F32;
    return true;
  }
  return false;
}
inline const char* st_dtype_of(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::F8E4M3:
      return "F8_E4M3";
    case DType::I32:
      return "I32";
    case DType::U8:
      return "U8";
    default:
      return "U8";
  }
}

// QuantizedWeight::validate, reported as a Format error naming the file and tensor (`what`):
// a weight built from a file that breaks an invariant is malformed content, not a bad argument.
inline void validate_loaded(const QuantizedWeight& w, const std::string& what) {
  try {
    w.validate();
  } catch (const Error& e) {
    MIXQ_FAIL(ErrorCode::Format, what, ": ", e.what());
  }
}

// A window of a packed GPTQ / AWQ tensor: output features [n0, n1) (a column-parallel shard's)
// and input features [k0, k1) (a row-parallel shard's; whole groups, and no act-order g_idx),
// unpacked from only the words that hold them. gptq_unpack / awq_unpack are the whole tensor.
struct Window {
  int64_t n0, n1, k0, k1;
  // GPTQ only: the codes of input features outside [codes_k0, codes_k1) are left 0, unread (an
  // act-order row shard's columns, whose groups span the whole K: the rest of the weight is laid
  // out around them, then cut away)
  int64_t codes_k0 = 0, codes_k1 = INT64_MAX;
};
// The window's groups [g0, g0 + count) of a packed tensor of N x K with G groups of gs
// (validated: in bounds, and a K window of whole groups).
struct WindowGroups {
  int64_t g0, count;
};
inline WindowGroups window_groups(const Window& w, int64_t N, int64_t K, int64_t G, int64_t gs,
                                  const std::string& what) {
  const int64_t kw = w.k1 - w.k0;
  MIXQ_CHECK(0 <= w.n0 && w.n0 < w.n1 && w.n1 <= N && 0 <= w.k0 && kw >= 1 && w.k1 <= K &&
                 (kw == K || (w.k0 % gs == 0 && (w.k1 % gs == 0 || w.k1 == K))),
             ErrorCode::Internal, what, ": window [", w.n0, ", ", w.n1, ") x [", w.k0, ", ", w.k1,
             ") of ", N, " x ", K);
  return kw == K ? WindowGroups{0, G} : WindowGroups{w.k0 / gs, (kw + gs - 1) / gs};
}
GroupedIntWeight gptq_unpack_window(const GptqPackedView& v, GptqVersion version,
                                    int64_t group_size, const std::string& what, Window win);
GroupedIntWeight awq_unpack_window(const AwqPackedView& v, int64_t group_size,
                                   const std::string& what, Window win);

}  // namespace mixq::formats::st
