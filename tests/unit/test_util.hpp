// Shared helpers for the unit tests: seeded random fills, host tensors of any float dtype,
// poisoning, an independent decoder of the canonical weight (straight from the packed bytes, in
// float64, without QuantizedWeight's accessors), naive float64 products, error norms, and a
// substring check for mixq::Error messages.
//
// The decoders here deliberately avoid mixq/numeric.hpp and QuantizedWeight::dequant so that a
// bug in those shows up as a mismatch instead of being reproduced by the oracle.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/quantized_weight.hpp"
#include "mixq/tensor.hpp"

namespace mixq::testing {

// ------------------------------------------------------------------ independent float decoders

inline double decode_f16(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  double v;
  if (exp == 0) v = std::ldexp(double(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(double(1024 + man), exp - 25);
  return sign ? -v : v;
}

inline double decode_bf16(uint16_t b) {
  const int sign = (b >> 15) & 1, exp = (b >> 7) & 0xFF, man = b & 0x7F;
  double v;
  if (exp == 0) v = std::ldexp(double(man), -133);
  else if (exp == 255) v = man ? NAN : INFINITY;
  else v = std::ldexp(double(128 + man), exp - 134);
  return sign ? -v : v;
}

inline double decode_e4m3(uint8_t b) {
  const int sign = (b >> 7) & 1, exp = (b >> 3) & 0xF, man = b & 0x7;
  double v;
  if (exp == 15 && man == 7) return NAN;
  if (exp == 0) v = std::ldexp(double(man), -9);
  else v = std::ldexp(double(8 + man), exp - 10);
  return sign ? -v : v;
}

inline double decode_float(const uint8_t* base, DType t, int64_t i) {
  switch (t) {
    case DType::F32: {
      float f;
      std::memcpy(&f, base + 4 * i, 4);
      return f;
    }
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, base + 2 * i, 2);
      return decode_f16(h);
    }
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, base + 2 * i, 2);
      return decode_bf16(h);
    }
    case DType::F8E4M3: return decode_e4m3(base[i]);
    default: ADD_FAILURE() << "decode_float: " << dtype_name(t); return NAN;
  }
}

// Half of one unit in the last place of the format at magnitude |v| (normal or subnormal).
inline double half_ulp(DType t, double v) {
  int mant_bits, min_exp;  // explicit mantissa bits; exponent of the smallest normal
  switch (t) {
    case DType::F32: mant_bits = 23; min_exp = -126; break;
    case DType::F16: mant_bits = 10; min_exp = -14; break;
    case DType::BF16: mant_bits = 7; min_exp = -126; break;
    case DType::F8E4M3: mant_bits = 3; min_exp = -6; break;
    default: return 0.0;
  }
  const double a = std::fabs(v);
  int e = a > 0 ? std::ilogb(a) : min_exp;
  if (e < min_exp) e = min_exp;
  return std::ldexp(1.0, e - mant_bits - 1);
}

// ------------------------------------------------------------------ the canonical weight, by hand

// Integer code of element (n, k), read from the packed bytes (row_bytes = ceil(K*bits/8)).
inline int32_t raw_code(const QuantizedWeight& w, int64_t n, int64_t k) {
  const int64_t rb = (w.code_type == DType::I4 || w.code_type == DType::U4) ? (w.K + 1) / 2 : w.K;
  const uint8_t* row = w.codes.data() + n * rb;
  switch (w.code_type) {
    case DType::I4: {
      const int nib = (k % 2 == 0) ? (row[k / 2] & 0xF) : (row[k / 2] >> 4);
      return nib < 8 ? nib : nib - 16;
    }
    case DType::U4: return (k % 2 == 0) ? (row[k / 2] & 0xF) : (row[k / 2] >> 4);
    case DType::I8: return int8_t(row[k]);
    case DType::U8: return row[k];
    default: ADD_FAILURE() << "raw_code on " << dtype_name(w.code_type); return 0;
  }
}

inline double raw_code_value(const QuantizedWeight& w, int64_t n, int64_t k) {
  switch (w.code_type) {
    case DType::F8E4M3: return decode_e4m3(w.codes[n * w.K + k]);
    case DType::F16:
    case DType::BF16:
    case DType::F32: {
      const int64_t es = dtype_bits(w.code_type) / 8;
      return decode_float(w.codes.data() + n * w.K * es, w.code_type, k);
    }
    default: return raw_code(w, n, k);
  }
}

inline int64_t raw_block_index(const QuantizedWeight& w, int64_t n, int64_t k) {
  const int64_t nbk = (w.K + w.block_k - 1) / w.block_k;
  return (n / w.block_n) * nbk + k / w.block_k;
}
inline double raw_scale(const QuantizedWeight& w, int64_t n, int64_t k) {
  return decode_float(w.scales.data(), w.scale_type, raw_block_index(w, n, k));
}
inline double raw_offset(const QuantizedWeight& w, int64_t n, int64_t k) {
  return decode_float(w.zeros.data(), w.scale_type, raw_block_index(w, n, k));
}
inline int32_t raw_zero_point(const QuantizedWeight& w, int64_t n, int64_t k) {
  int32_t z;
  std::memcpy(&z, w.zeros.data() + 4 * raw_block_index(w, n, k), 4);
  return z;
}

// The exact (float64) value of element (n, k) in canonical column order. QuantizedWeight::dequant
// computes the same formula in f32, so the two differ by at most an f32 rounding or two.
inline double raw_dequant(const QuantizedWeight& w, int64_t n, int64_t k) {
  const double q = raw_code_value(w, n, k);
  if (!w.has_scales) return q;
  const double s = raw_scale(w, n, k);
  switch (w.zero_kind) {
    case ZeroKind::None: return q * s;
    case ZeroKind::Offset: return q * s + raw_offset(w, n, k);
    case ZeroKind::ZeroPoint: return s * (q - raw_zero_point(w, n, k));
  }
  return NAN;
}

// W as float64 [N][K] in ORIGINAL column order (k_perm undone): W_orig[n][k_perm[j]] = W[n][j].
inline std::vector<double> raw_dequant_original(const QuantizedWeight& w) {
  std::vector<double> out(static_cast<size_t>(w.N * w.K));
  for (int64_t n = 0; n < w.N; ++n)
    for (int64_t j = 0; j < w.K; ++j)
      out[n * w.K + (w.k_perm.empty() ? j : w.k_perm[j])] = raw_dequant(w, n, j);
  return out;
}

// ------------------------------------------------------------------ host tensors

// An owning host tensor of any dtype, with float64 element access (for float types and I8).
struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(DType t, std::vector<int64_t> dims) : dtype(t), shape(std::move(dims)) {
    bytes.assign(static_cast<size_t>(dtype_bytes(t, numel())), 0);
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  TensorView view(Device dev = Device::CPU) const {
    TensorView v;
    v.data = const_cast<uint8_t*>(bytes.data());
    v.dtype = dtype;
    v.device = dev;
    v.rank = static_cast<int>(shape.size());
    int64_t s = 1;
    for (int i = v.rank - 1; i >= 0; --i) {
      v.shape[i] = shape[i];
      v.stride[i] = s;
      s *= shape[i];
    }
    return v;
  }
  double get(int64_t i) const {
    if (dtype == DType::I8) return int8_t(bytes[i]);
    return decode_float(bytes.data(), dtype, i);
  }
  // Stores v rounded to nearest even in the dtype (via numeric.hpp, verified by test_numeric).
  void set(int64_t i, double v) {
    const float f = static_cast<float>(v);
    switch (dtype) {
      case DType::F32: std::memcpy(&bytes[4 * i], &f, 4); break;
      case DType::F16: { const uint16_t h = f32_to_f16(f); std::memcpy(&bytes[2 * i], &h, 2); break; }
      case DType::BF16: { const uint16_t h = f32_to_bf16(f); std::memcpy(&bytes[2 * i], &h, 2); break; }
      case DType::I8: bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(v)); break;
      default: ADD_FAILURE() << "HostTensor::set on " << dtype_name(dtype);
    }
  }
  std::vector<double> values() const {
    std::vector<double> v(static_cast<size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i) v[i] = get(i);
    return v;
  }
  // NaN in every float format (0xFF.. is a NaN in f32, f16 and bf16).
  void poison(uint8_t byte = 0xFF) { std::fill(bytes.begin(), bytes.end(), byte); }
};

// Uniform random values in [lo, hi), rounded to the tensor's dtype. Fixed seed per call site.
inline HostTensor random_tensor(DType t, std::vector<int64_t> dims, uint32_t seed, double lo = -1.0,
                                double hi = 1.0) {
  HostTensor h(t, std::move(dims));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < h.numel(); ++i) h.set(i, t == DType::I8 ? std::floor(u(rng)) : u(rng));
  return h;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Every element a real number (not the NaN poison): the kernel wrote all of them.
inline void expect_all_written(const HostTensor& y, const char* what) {
  int64_t unwritten = 0, first = -1;
  for (int64_t i = 0; i < y.numel(); ++i)
    if (std::isnan(y.get(i))) {
      if (first < 0) first = i;
      ++unwritten;
    }
  EXPECT_EQ(unwritten, 0) << what << ": " << unwritten << " of " << y.numel()
                          << " outputs still hold the NaN poison, first at " << first;
}

// ------------------------------------------------------------------ naive products and norms

// Y[m][n] = sum_k X[m][k] W[n][k] in float64 (W in original column order), then bias and clamp.
inline std::vector<double> naive_linear(const std::vector<double>& x, const std::vector<double>& w,
                                        int64_t M, int64_t N, int64_t K,
                                        const std::vector<double>* bias = nullptr,
                                        double lo = -INFINITY, double hi = INFINITY) {
  std::vector<double> y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += x[m * K + k] * w[n * K + k];
      if (bias) acc += (*bias)[n];
      y[m * N + n] = std::min(std::max(acc, lo), hi);
    }
  return y;
}

// Same loops, accumulating sum |x||w| (the scale of the rounding error of a dot product).
inline std::vector<double> naive_abs_linear(const std::vector<double>& x,
                                            const std::vector<double>& w, int64_t M, int64_t N,
                                            int64_t K) {
  std::vector<double> y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += std::fabs(x[m * K + k] * w[n * K + k]);
      y[m * N + n] = acc;
    }
  return y;
}

// max_i |a_i - b_i| / max_i |b_i| (0 when both are zero).
inline double max_rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num = std::max(num, std::fabs(a[i] - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return den > 0 ? num / den : num;
}

// "" when equal, else where and how two arrays first differ (gtest's vector dump is unreadable).
template <typename T>
std::string first_mismatch(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size())
    return "sizes differ: " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  int64_t count = 0, first = -1;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++count;
    }
  if (count == 0) return "";
  return std::to_string(count) + " of " + std::to_string(a.size()) + " differ, first at " +
         std::to_string(first) + ": " + std::to_string(+a[first]) + " vs " +
         std::to_string(+b[first]);
}
#define EXPECT_SAME_ARRAY(a, b) EXPECT_EQ(::mixq::testing::first_mismatch((a), (b)), "")

// ------------------------------------------------------------------ error matching

// Runs fn, expects a mixq::Error whose message contains every one of `parts` (and whose code is
// *code when given).
inline void expect_mixq_error(const std::function<void()>& fn,
                              std::initializer_list<std::string> parts,
                              const char* where = "", const ErrorCode* code = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (code) {
      EXPECT_EQ(e.code(), *code) << where << ": " << e.what();
    }
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << where << ": message \"" << e.what() << "\" lacks \"" << p << "\"";
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << where << ": threw a non-mixq exception: " << e.what();
    return;
  }
  ADD_FAILURE() << where << ": no exception thrown (expected one mentioning "
                << *parts.begin() << ")";
}

}  // namespace mixq::testing

#define EXPECT_MIXQ_ERROR(stmt, ...) \
  ::mixq::testing::expect_mixq_error([&] { stmt; }, {__VA_ARGS__}, #stmt)
#define EXPECT_MIXQ_ERROR_CODE(code, stmt, ...)                                            \
  do {                                                                                     \
    const ::mixq::ErrorCode expected_code_ = (code);                                       \
    ::mixq::testing::expect_mixq_error([&] { stmt; }, {__VA_ARGS__}, #stmt, &expected_code_); \
  } while (0)
