// Activation staging for the CPU kernels (see activation_staging.hpp).
#include "cpu/activation_staging.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/act_layout.hpp"
#include "core/float_elements.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cpu {

float RowReader::at(int64_t m, int64_t k) const { return load_f32_elem(data, dtype, m * ld + k); }

namespace {

// min / max of x[0..n) ignoring NaN, as std::min(lo, x) / std::max(hi, x) folded from
// +inf / -inf (so the result matches quantize_activations_int8_block's), in 16 lanes that the
// compiler maps to minps / maxps ((x < lo) ? x : lo is exactly their semantics).
void row_range(const float* x, int64_t n, float* lo_out, float* hi_out) {
  float lo[16], hi[16];
  for (int j = 0; j < 16; ++j) lo[j] = INFINITY, hi[j] = -INFINITY;
  int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    for (int j = 0; j < 16; ++j) {
      lo[j] = x[k + j] < lo[j] ? x[k + j] : lo[j];
      hi[j] = x[k + j] > hi[j] ? x[k + j] : hi[j];
    }
  for (; k < n; ++k) {
    lo[0] = std::min(lo[0], x[k]);
    hi[0] = std::max(hi[0], x[k]);
  }
  for (int j = 1; j < 16; ++j) {
    lo[0] = std::min(lo[0], lo[j]);
    hi[0] = std::max(hi[0], hi[j]);
  }
  *lo_out = lo[0];
  *hi_out = hi[0];
}

// Converts row m into canonical order (k_perm applied) as f32.
void load_row(const RowReader& x, const PackedWeight& w, int64_t m, float* row) {
  if (w.k_perm.empty() && x.dtype == DType::F32) {
    std::memcpy(row, static_cast<const float*>(x.data) + m * x.ld, sizeof(float) * w.K);
    return;
  }
  for (int64_t k = 0; k < w.K; ++k) row[k] = x.at(m, w.k_perm.empty() ? k : w.k_perm[k]);
}

void pack_float_row(const float* row, const PackedWeight& w, float* xp, float* xsum) {
  for (int64_t s = 0; s < w.n_segs(); ++s) {
    const Segment& sg = w.segs[s];
    double sum = 0.0;
    float* dst = xp + sg.kp0;
    for (int32_t i = 0; i < sg.valid; ++i) {
      dst[i] = row[sg.k0 + i];
      sum += dst[i];
    }
    for (int32_t i = sg.valid; i < sg.len; ++i) dst[i] = 0.f;
    xsum[s] = static_cast<float>(sum);
  }
}

// Segment sg of a row of codes q (canonical columns) as kernel bytes: q + bias, padding = bias
// (a zero code). Returns the segment's code sum.
int32_t put_segment_codes(const int8_t* q, const Segment& sg, uint8_t bias, uint8_t* row_bytes) {
  // Locals: the byte stores below could otherwise alias the segment fields.
  const int8_t* src = q + sg.k0;
  uint8_t* out = row_bytes + sg.kp0;
  const int32_t valid = sg.valid, len = sg.len;
  int32_t sum = 0;
  for (int32_t i = 0; i < valid; ++i) {
    sum += src[i];
    out[i] = static_cast<uint8_t>(static_cast<uint8_t>(src[i]) + bias);
  }
  for (int32_t i = valid; i < len; ++i) out[i] = bias;
  return sum;
}

ActSegment act_segment(float sc, float of, int32_t sum, int32_t valid) {
  return ActSegment{sc, of, sc * static_cast<float>(sum) + static_cast<float>(valid) * of, sum};
}

}  // namespace

void stage_float_rows(const RowReader& x, const PackedWeight& w, int64_t m0, int64_t m1,
                      float* xp, float* xsum) {
  std::vector<float> row(static_cast<size_t>(w.K));
  for (int64_t m = m0; m < m1; ++m) {
    load_row(x, w, m, row.data());
    pack_float_row(row.data(), w, xp + (m - m0) * w.Kp, xsum + (m - m0) * w.n_segs());
  }
}

void stage_float_gathered(const float* g, int64_t rows, const PackedWeight& w, float* xp,
                          float* xsum) {
  for (int64_t m = 0; m < rows; ++m)
    pack_float_row(g + m * w.K, w, xp + m * w.Kp, xsum + m * w.n_segs());
}

void stage_fp8_rows(const RowReader& x, const PackedWeight& w, int64_t m0, int64_t m1, float* xp,
                    float* xsum) {
  std::vector<float> row(static_cast<size_t>(w.K));
  for (int64_t m = m0; m < m1; ++m) {
    load_row(x, w, m, row.data());
    for (int64_t k0 = 0; k0 < w.K; k0 += 128) {
      const int64_t k1 = std::min(w.K, k0 + 128);
      float amax = 0.f;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(row[k]));
      const float s = std::max(amax, 1e-10f) / 448.0f;
      for (int64_t k = k0; k < k1; ++k) row[k] = e4m3_to_f32(f32_to_e4m3(row[k] / s)) * s;
    }
    pack_float_row(row.data(), w, xp + (m - m0) * w.Kp, xsum + (m - m0) * w.n_segs());
  }
}

void stage_int8_block_rows(const RowReader& x, const PackedWeight& w, int64_t unit_block,
                           int64_t m0, int64_t m1, uint8_t* xb, ActSegment* xs,
                           QuantizeI8Fn quantize_i8) {
  const int64_t ns = w.n_segs();
  const uint8_t bias = w.kind == CodeKind::Int8 ? 128 : 0;
  std::vector<float> row(static_cast<size_t>(w.K));
  std::vector<int8_t> q(static_cast<size_t>(w.K));
  for (int64_t m = m0; m < m1; ++m) {
    load_row(x, w, m, row.data());
    uint8_t* dst = xb + (m - m0) * w.Kp;
    ActSegment* as = xs + (m - m0) * ns;
    int64_t s = 0;
    while (s < ns) {
      // The quantization unit: one activation block (possibly several segments) or one segment.
      int64_t s_end = s + 1;
      int64_t k0 = w.segs[s].k0, k1 = k0 + w.segs[s].valid;
      if (unit_block > 0) {
        const int64_t b = k0 / unit_block;
        while (s_end < ns && w.segs[s_end].k0 / unit_block == b) ++s_end;
        k1 = w.segs[s_end - 1].k0 + w.segs[s_end - 1].valid;
      }
      // Exactly quantize_activations_int8_block's arithmetic.
      float lo, hi;
      row_range(row.data() + k0, k1 - k0, &lo, &hi);
      const float sc = (hi - lo) / 255.0f;
      const float of = sc > 0 ? lo + 128.0f * sc : lo;
      if (sc > 0) quantize_i8(row.data() + k0, k1 - k0, of, sc, q.data() + k0);
      else std::fill(q.begin() + k0, q.begin() + k1, int8_t(0));
      for (; s < s_end; ++s) {
        const int32_t sum = put_segment_codes(q.data(), w.segs[s], bias, dst);
        as[s] = act_segment(sc, of, sum, w.segs[s].valid);
      }
    }
  }
}

void stage_fp8_quantized_rows(const QuantizedActivations& a, const PackedWeight& w, int64_t m0,
                              int64_t m1, float* xp, float* xsum) {
  const detail::ActReader r(a);
  std::vector<float> row(static_cast<size_t>(w.K));
  for (int64_t m = m0; m < m1; ++m) {
    const uint8_t* q = r.row(m);
    for (int64_t k = 0; k < w.K; ++k)
      row[k] = e4m3_to_f32(q[k]) * r.scale_of(m, k / QuantizedActivations::kFp8Block);
    pack_float_row(row.data(), w, xp + (m - m0) * w.Kp, xsum + (m - m0) * w.n_segs());
  }
}

void stage_int8_block_quantized_rows(const QuantizedActivations& a, const PackedWeight& w,
                                     int64_t m0, int64_t m1, uint8_t* xb, ActSegment* xs) {
  const detail::ActReader r(a);
  const int64_t ns = w.n_segs();
  const uint8_t bias = w.kind == CodeKind::Int8 ? 128 : 0;
  for (int64_t m = m0; m < m1; ++m) {
    for (int64_t s = 0; s < ns; ++s) {
      const Segment& sg = w.segs[s];
      // The block sum is the segment's: W8A8 weights have block_k == act_block <= 256.
      const int64_t b = sg.k0 / a.block;
      MIXQ_CHECK(sg.k0 == b * a.block && sg.valid == std::min(w.K, sg.k0 + a.block) - sg.k0,
                 ErrorCode::Internal, "cpu w8a8: segment at k ", sg.k0, " (", sg.valid,
                 " columns) is not activation block ", b, " of ", a.block);
      put_segment_codes(r.int8_row(m), sg, bias, xb + (m - m0) * w.Kp);
      xs[(m - m0) * ns + s] = act_segment(r.scale_of(m, b), r.offset_of(m, b), r.sum_of(m, b),
                                          sg.valid);
    }
  }
}

void stage_int8_tensor_gathered(const int8_t* g, int64_t rows, const PackedWeight& w,
                                uint8_t* xb) {
  for (int64_t m = 0; m < rows; ++m) {
    uint8_t* dst = xb + m * w.Kp;
    const int8_t* src = g + m * w.K;
    for (const Segment& sg : w.segs) {
      for (int32_t i = 0; i < sg.valid; ++i)
        dst[sg.kp0 + i] = static_cast<uint8_t>(static_cast<uint8_t>(src[sg.k0 + i]) + 128);
      for (int32_t i = sg.valid; i < sg.len; ++i) dst[sg.kp0 + i] = 128;
    }
  }
}

void stage_int8_tensor_rows(const int8_t* x, int64_t ld, const PackedWeight& w, int64_t m0,
                            int64_t m1, uint8_t* xb) {
  for (int64_t m = m0; m < m1; ++m) stage_int8_tensor_gathered(x + m * ld, 1, w, xb + (m - m0) * w.Kp);
}

}  // namespace mixq::cpu
