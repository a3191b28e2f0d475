// Test data for GGUF block weights (CPU and CUDA native-width kernels): random blocks of every
// type mixq's native kernels read, random activations, and the float64 references of the exact
// decode and of the integer path's q8 arithmetic (per 32 columns: d = amax / 127,
// q = round(x / d); mins times the unquantized x).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "mixq/formats/ggml_blocks.hpp"
#include "mixq/quantized_weight.hpp"
#include "test_random.hpp"

namespace mixq::test::ggml {

using mixq::formats::GgmlType;

struct TypeCase {
  GgmlType type;
  std::vector<int> f16_fields;  // byte offsets of the block's f16 scale fields
};

inline const std::vector<TypeCase>& all_types() {
  static const std::vector<TypeCase> t = {
      {GgmlType::Q4_0, {0}},      {GgmlType::Q4_1, {0, 2}},   {GgmlType::Q5_0, {0}},
      {GgmlType::Q5_1, {0, 2}},   {GgmlType::Q8_0, {0}},      {GgmlType::IQ4_NL, {0}},
      {GgmlType::Q2_K, {80, 82}}, {GgmlType::Q3_K, {108}},    {GgmlType::Q4_K, {0, 2}},
      {GgmlType::Q5_K, {0, 2}},   {GgmlType::Q6_K, {208}},    {GgmlType::IQ4_XS, {0}},
  };
  return t;
}

// Random blocks: every bit of the codes and sub-block scales random, f16 scales finite and
// moderate (|d| in [2^-8, 2^-4), random sign), so every decode branch is exercised.
inline std::vector<uint8_t> random_blocks(const TypeCase& tc, int64_t N, int64_t K, uint32_t seed) {
  const mixq::formats::GgmlTypeInfo* ti = mixq::formats::ggml_type_info(uint32_t(tc.type));
  const int64_t nb = N * (K / ti->block_elems);
  std::vector<uint8_t> d(static_cast<size_t>(nb * ti->block_bytes));
  std::mt19937 rng(seed);
  for (auto& b : d) b = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < nb; ++i)
    for (int off : tc.f16_fields) {
      const uint16_t h = static_cast<uint16_t>(((rng() & 1) << 15) | ((7 + rng() % 4) << 10) |
                                               (rng() & 0x3FF));
      d[static_cast<size_t>(i * ti->block_bytes + off)] = static_cast<uint8_t>(h);
      d[static_cast<size_t>(i * ti->block_bytes + off + 1)] = static_cast<uint8_t>(h >> 8);
    }
  return d;
}

// M x K activations (row-major), standard normal: the tests' one generator (test_random.hpp).
inline std::vector<float> random_x(int64_t M, int64_t K, uint32_t seed) {
  return mixq::test::randn(static_cast<size_t>(M * K), seed);
}

struct Refs {
  std::vector<double> exact;  // float64 of ggml's decode times x
  std::vector<double> q8;     // float64 of the integer path's arithmetic (q8-quantized x)
  double max_exact = 0, max_q8 = 0;
};

// `w` is the canonical weight of the same blocks: its scale/offset split of each element gives
// the integer path's formula (scale * code times quantized x, offset times x).
inline Refs reference(const mixq::QuantizedWeight& w, const std::vector<uint8_t>& blocks, GgmlType type,
               const std::vector<float>& x, int64_t M) {
  const int64_t N = w.N, K = w.K;
  std::vector<float> wd(static_cast<size_t>(N * K));
  const int64_t rb = mixq::formats::ggml_row_bytes(type, K);
  for (int64_t n = 0; n < N; ++n)
    mixq::formats::ggml_dequantize_row(type, blocks.data() + n * rb, wd.data() + n * K, K);
  std::vector<double> xq(x.size());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < K; b += 32) {
      float amax = 0.f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[m * K + b + i]));
      const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
      for (int i = 0; i < 32; ++i)
        xq[m * K + b + i] = double(d) * double(std::round(x[m * K + b + i] * id));
    }
  Refs r;
  r.exact.assign(static_cast<size_t>(M * N), 0.0);
  r.q8.assign(static_cast<size_t>(M * N), 0.0);
  const bool off = w.zero_kind == mixq::ZeroKind::Offset;
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> sq(static_cast<size_t>(K)), o(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) {
      sq[k] = double(w.scale(n / w.block_n, k / w.block_k)) * double(w.code_value(n, k));
      o[k] = off ? double(w.offset(n / w.block_n, k / w.block_k)) : 0.0;
    }
    for (int64_t m = 0; m < M; ++m) {
      double e = 0, q = 0;
      for (int64_t k = 0; k < K; ++k) {
        e += double(x[m * K + k]) * double(wd[n * K + k]);
        q += xq[m * K + k] * sq[k] + double(x[m * K + k]) * o[k];
      }
      r.exact[m * N + n] = e;
      r.q8[m * N + n] = q;
      r.max_exact = std::max(r.max_exact, std::fabs(e));
      r.max_q8 = std::max(r.max_q8, std::fabs(q));
    }
  }
  return r;
}

inline double max_err(const std::vector<float>& y, const std::vector<double>& ref) {
  double e = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) return std::numeric_limits<double>::infinity();
    e = std::max(e, std::fabs(double(y[i]) - ref[i]));
  }
  return e;
}

}  // namespace mixq::test::ggml
