// Reference float32 decode of ggml rows, written element by element from the formulas of
// formats.md §1 in ggml's operation order (scale products first, then d*q, then "- m"). It is
// deliberately independent of the canonical conversion (ggml_canonical.cpp) so tests can compare
// the two; gguf-py is the external oracle for both.
#include "formats/gguf/ggml_block_layout.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/ggml_blocks.hpp"

namespace mixq::formats {

using detail::kquant_scale_min;
using detail::load_f16;
using detail::load_u16;
using detail::load_u32;
using detail::q3k_scale;

namespace {

int nib(const uint8_t* qs, int j, int half) { return half ? (qs[j] >> 4) : (qs[j] & 0xF); }

void row_legacy(GgmlType type, const uint8_t* b, float* y) {
  switch (type) {
    case GgmlType::Q4_0: {
      const float d = load_f16(b);
      for (int e = 0; e < 32; ++e) y[e] = d * static_cast<float>(nib(b + 2, e % 16, e / 16) - 8);
      break;
    }
    case GgmlType::Q4_1: {
      const float d = load_f16(b), m = load_f16(b + 2);
      for (int e = 0; e < 32; ++e) y[e] = d * static_cast<float>(nib(b + 4, e % 16, e / 16)) + m;
      break;
    }
    case GgmlType::Q5_0:
    case GgmlType::Q5_1: {
      const bool asym = type == GgmlType::Q5_1;
      const float d = load_f16(b), m = asym ? load_f16(b + 2) : 0.f;
      const uint8_t* p = b + (asym ? 4 : 2);
      const uint32_t qh = load_u32(p);
      for (int e = 0; e < 32; ++e) {
        const int q = nib(p + 4, e % 16, e / 16) | (((qh >> e) & 1) << 4);
        y[e] = asym ? d * static_cast<float>(q) + m : d * static_cast<float>(q - 16);
      }
      break;
    }
    case GgmlType::Q8_0: {
      const float d = load_f16(b);
      for (int e = 0; e < 32; ++e) y[e] = d * static_cast<float>(static_cast<int8_t>(b[2 + e]));
      break;
    }
    case GgmlType::IQ4_NL: {
      const float d = load_f16(b);
      for (int e = 0; e < 32; ++e) y[e] = d * static_cast<float>(kIq4nlValues[nib(b + 2, e % 16, e / 16)]);
      break;
    }
    default: MIXQ_FAIL(ErrorCode::Internal, "row_legacy: type ", static_cast<uint32_t>(type));
  }
}

void row_kquant(GgmlType type, const uint8_t* b, float* y) {
  for (int e = 0; e < 256; ++e) {
    const int l = e % 32;
    switch (type) {
      case GgmlType::Q2_K: {
        const uint8_t sc = b[e / 16];
        const int q = (b[16 + 32 * (e / 128) + l] >> (2 * ((e % 128) / 32))) & 3;
        const float dl = load_f16(b + 80) * static_cast<float>(sc & 0xF);
        const float ml = load_f16(b + 82) * static_cast<float>(sc >> 4);
        y[e] = dl * static_cast<float>(q) - ml;
        break;
      }
      case GgmlType::Q3_K: {
        const int low2 = (b[32 + 32 * (e / 128) + l] >> (2 * ((e % 128) / 32))) & 3;
        const int hb = (b[l] >> (e / 32)) & 1;
        const float dl = load_f16(b + 108) * static_cast<float>(q3k_scale(b + 96, e / 16));
        y[e] = dl * static_cast<float>(low2 - (hb ? 0 : 4));
        break;
      }
      case GgmlType::Q4_K:
      case GgmlType::Q5_K: {
        int sc, mn;
        kquant_scale_min(b + 4, e / 32, &sc, &mn);
        const float d = load_f16(b) * static_cast<float>(sc);
        const float m = load_f16(b + 2) * static_cast<float>(mn);
        const uint8_t* qs = b + (type == GgmlType::Q4_K ? 16 : 48);
        int q = nib(qs + 32 * (e / 64), l, (e % 64) >= 32);
        if (type == GgmlType::Q5_K) q += 16 * ((b[16 + l] >> (e / 32)) & 1);
        y[e] = d * static_cast<float>(q) - m;
        break;
      }
      case GgmlType::Q6_K: {
        const int h = e / 128, t = (e % 128) / 32;
        const uint8_t lq = b[64 * h + 32 * (t & 1) + l];
        const int low4 = t < 2 ? (lq & 0xF) : (lq >> 4);
        const int high2 = (b[128 + 32 * h + l] >> (2 * t)) & 3;
        const float d = load_f16(b + 208) * static_cast<float>(static_cast<int8_t>(b[192 + e / 16]));
        y[e] = d * static_cast<float>((low4 | (high2 << 4)) - 32);
        break;
      }
      case GgmlType::IQ4_XS: {
        const int ib = e / 32;
        const uint16_t sh = load_u16(b + 2);
        const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
        const float dl = load_f16(b) * static_cast<float>(ls - 32);
        const int v = nib(b + 8 + 16 * ib, l % 16, l / 16);
        y[e] = dl * static_cast<float>(kIq4nlValues[v]);
        break;
      }
      default: MIXQ_FAIL(ErrorCode::Internal, "row_kquant: type ", static_cast<uint32_t>(type));
    }
  }
}

}  // namespace

void ggml_dequantize_row(GgmlType type, const uint8_t* data, float* out, int64_t n) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(type));
  MIXQ_CHECK(info != nullptr && info->convertible, ErrorCode::Unsupported,
             "ggml_dequantize_row: type ", ggml_type_name(static_cast<uint32_t>(type)));
  MIXQ_CHECK_ARG(n % info->block_elems == 0, "ggml_dequantize_row: n (", n,
                 ") is not a multiple of ", info->block_elems);
  for (int64_t i = 0; i < n / info->block_elems; ++i) {
    const uint8_t* b = data + i * info->block_bytes;
    float* y = out + i * info->block_elems;
    switch (type) {
      case GgmlType::F32: std::memcpy(y, b, 4); break;
      case GgmlType::F16: y[0] = f16_to_f32(load_u16(b)); break;
      case GgmlType::BF16: y[0] = bf16_to_f32(load_u16(b)); break;
      case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K:
      case GgmlType::Q6_K: case GgmlType::IQ4_XS: row_kquant(type, b, y); break;
      default: row_legacy(type, b, y); break;
    }
  }
}

}  // namespace mixq::formats
