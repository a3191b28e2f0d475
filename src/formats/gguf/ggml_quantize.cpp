// Reference encoders for Q4_0, Q8_0 and Q4_K that produce exactly the bytes of ggml's
// quantize_row_*_ref (formats.md §1.1, §1.5, §1.7.4, §1.9), plus F32 / F16 / BF16.
//
// Bit-exactness depends on the float operation order, which is kept exactly as in the reference
// (left-to-right sums, (w*l)*l products, division where ggml divides) and on no FMA contraction:
// the library is compiled with -ffp-contract=off (CMakeLists.txt). gguf-py 0.19's numpy Q4_0 /
// Q8_0 quantizers compute the same unfused float32 expressions.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats/gguf/ggml_block_layout.hpp"
#include "mixq/formats/value_range.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/ggml_blocks.hpp"

namespace mixq::formats {

namespace {

// ggml's nearest_int: round half to even through the 1.5 * 2^23 magic constant (valid for
// |f| <= 4194303, which every caller guarantees by construction).
inline int nearest_int(float f) {
  const float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// A block's f16 scale must hold its value: inf would make the file unreadable (mixq's reader
// rejects it) and a flushed scale zeroes the block (value_range.hpp).
void check_block_scale(const char* type, int64_t block, const char* name, float v) {
  range::check_scale(v, /*half=*/true,
                     std::string(type) + " block " + std::to_string(block) + " " + name);
}

void encode_q4_0(const float* x, uint8_t* y, int64_t block) {
  float amax = 0.f, max = 0.f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {  // strict: the first element of largest |x| wins
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8;
  check_block_scale("Q4_0", block, "scale d", d);
  const float id = d != 0.f ? 1.0f / d : 0.0f;
  detail::store_u16(y, f32_to_f16(d));
  for (int j = 0; j < 16; ++j) {
    const float x0 = x[j] * id, x1 = x[16 + j] * id;
    // The cast truncates; the argument is >= ~0.5 so this is floor(x*id + 8.5).
    const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
    const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
    y[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

void encode_q8_0(const float* x, uint8_t* y, int64_t block) {
  float amax = 0.f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.f;
  check_block_scale("Q8_0", block, "scale d", d);
  const float id = d != 0.f ? 1.0f / d : 0.0f;
  detail::store_u16(y, f32_to_f16(d));
  for (int j = 0; j < 32; ++j)
    y[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[j] * id)));  // half away
}

// make_qkx2_quants (formats.md §1.9.4): weighted min/scale search over nstep+1 candidate
// inverse scales. Returns the scale, writes the "minus min" (>= 0) and the codes L.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

void encode_q4_k(const float* x, uint8_t* y, int64_t block) {
  uint8_t L[256], Laux[32];
  float weights[32], mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = make_qkx2_quants(32, 15, xs, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20,
                                 false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t* sc = y + 4;
  std::memset(sc, 0, 12);
  for (int j = 0; j < 8; ++j) {
    // ggml stores nearest_int's result in a uint8_t before clamping to 63.
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      sc[j] = ls;
      sc[j + 4] = lm;
    } else {
      sc[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      sc[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      sc[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  check_block_scale("Q4_K", block, "super-block scale d", max_scale / 63.f);
  check_block_scale("Q4_K", block, "super-block min dmin", max_min / 63.f);
  const uint16_t dh = f32_to_f16(max_scale / 63.f), mh = f32_to_f16(max_min / 63.f);
  detail::store_u16(y, dh);
  detail::store_u16(y + 2, mh);
  // Final pass with the fp16-rounded super-scales (K-quants re-derive the codes from them).
  for (int j = 0; j < 8; ++j) {
    int ls, lm;
    detail::kquant_scale_min(sc, j, &ls, &lm);
    const float d = f16_to_f32(dh) * ls;
    if (d == 0.f) continue;  // keep make_qkx2_quants' codes
    const float dm = f16_to_f32(mh) * lm;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(15, l)));
    }
  }
  uint8_t* q = y + 16;
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      q[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
}

}  // namespace

void ggml_quantize_row(GgmlType type, const float* x, uint8_t* out, int64_t n) {
  MIXQ_CHECK_ARG(ggml_can_encode(type), "ggml_quantize_row: mixq cannot encode ggml type ",
                 ggml_type_name(static_cast<uint32_t>(type)),
                 " (encoders: F32 F16 BF16 Q4_0 Q8_0 Q4_K)");
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(type));
  MIXQ_CHECK_ARG(n % info->block_elems == 0, "ggml_quantize_row: n (", n,
                 ") is not a multiple of the ", info->name, " block size ", info->block_elems);
  for (int64_t i = 0; i < n; ++i)
    MIXQ_CHECK_ARG(std::isfinite(x[i]), "ggml_quantize_row: input element ", i, " is not finite (",
                   x[i], ")");
  const int64_t nb = n / info->block_elems;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * info->block_elems;
    uint8_t* yb = out + b * info->block_bytes;
    switch (type) {
      case GgmlType::F32: std::memcpy(yb, xb, 4); break;
      case GgmlType::F16:
      case GgmlType::BF16: {
        const bool half = type == GgmlType::F16;
        const uint16_t h = half ? f32_to_f16(xb[0]) : f32_to_bf16(xb[0]);
        // Overflow is an error per value; underflow is judged per tensor (ggml_check_values).
        MIXQ_CHECK_ARG(std::isfinite(half ? f16_to_f32(h) : bf16_to_f32(h)),
                       "ggml_quantize_row: element ", b, " = ", xb[0], " overflows ",
                       half ? "f16 (largest finite 65504)" : "bf16", "; use f32");
        detail::store_u16(yb, h);
        break;
      }
      case GgmlType::Q4_0: encode_q4_0(xb, yb, b); break;
      case GgmlType::Q8_0: encode_q8_0(xb, yb, b); break;
      case GgmlType::Q4_K: encode_q4_k(xb, yb, b); break;
      default: MIXQ_FAIL(ErrorCode::Internal, "ggml_quantize_row: unhandled type");
    }
  }
}

void ggml_check_values(GgmlType type, const float* x, int64_t n, const std::string& what) {
  if (type != GgmlType::F16 && type != GgmlType::BF16) return;
  range::ValueRange r(type == GgmlType::F16);
  for (int64_t i = 0; i < n; ++i) r.add(x[i]);
  r.check(what);
}

}  // namespace mixq::formats
