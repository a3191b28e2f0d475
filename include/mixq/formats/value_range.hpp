// The one rule every writer applies to the 16-bit floats it stores (values of F16 / BF16
// tensors, f16 scales of ggml blocks), so that no writer silently stores inf or a value that has
// lost its magnitude:
//   - overflow: a finite value that rounds to inf (|v| > 65504 in f16) is an error;
//   - underflow: a value that rounds to a subnormal or to zero and so loses more than 2^-5 (~3%)
//     of its magnitude is an error. Normal f16 and bf16 rounding lose at most 2^-11 and 2^-9, so
//     only values below the smallest normal number (2^-14 in f16) can fail: in f16, those below
//     ~2^-20 (1e-6). Mildly subnormal values keep 5+ significant bits and pass; a scale that
//     flushes to zero (and zeroes its whole block) never does. For a whole tensor of values the
//     loss is measured against the tensor's largest magnitude instead, since a few tiny weights
//     flushing to zero harm nothing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::formats::range {

constexpr double kMaxLoss = 1.0 / 32;  // 2^-5

// v rounded to f16 (half) or bf16 and widened back.
inline float round_half(float v, bool half) {
  return half ? f16_to_f32(f32_to_f16(v)) : bf16_to_f32(f32_to_bf16(v));
}

// Throws when one stored value (a scale) overflows or loses more than 2^-5 of itself. `what`
// names it ("tensor 'x' row 3 block 2 scale").
inline void check_scale(float ideal, bool half, const std::string& what) {
  const float stored = round_half(ideal, half);
  const char* type = half ? "f16" : "bf16";
  MIXQ_CHECK_ARG(std::isfinite(stored), what, " ", ideal, " overflows ", type,
                 " (largest finite ", half ? 65504.0 : 3.39e38, ")");
  MIXQ_CHECK_ARG(std::fabs(double(stored) - double(ideal)) <= kMaxLoss * std::fabs(double(ideal)),
                 what, " ", ideal, " underflows ", type, " (stored as ", stored,
                 ", a loss above 2^-5 of its value)");
}

// Range of a tensor of values stored as f16 / bf16: call add() for each value, then check().
class ValueRange {
 public:
  explicit ValueRange(bool half) : half_(half) {}
  void add(float v) {
    const float stored = round_half(v, half_);
    if (!std::isfinite(stored) && std::isfinite(v) && !overflow_) {
      overflow_ = true;
      first_overflow_ = v;
    }
    amax_ = std::max(amax_, double(std::fabs(v)));
    if (std::isfinite(stored)) {
      const double err = std::fabs(double(stored) - double(v));
      if (err > max_err_) {
        max_err_ = err;
        worst_ = v;
      }
    }
  }
  void check(const std::string& what) const {
    const char* type = half_ ? "f16" : "bf16";
    MIXQ_CHECK_ARG(!overflow_, what, ": value ", first_overflow_, " overflows ", type,
                   " (largest finite ", half_ ? 65504.0 : 3.39e38, "); use f32 or bf16");
    MIXQ_CHECK_ARG(max_err_ <= kMaxLoss * amax_, what, ": values underflow ", type, " (", worst_,
                   " is stored with an error of ", max_err_, ", above 2^-5 of the largest |value| ",
                   amax_, "); use f32", half_ ? " or bf16" : "");
  }

 private:
  bool half_;
  bool overflow_ = false;
  float first_overflow_ = 0, worst_ = 0;
  double amax_ = 0, max_err_ = 0;
};

}  // namespace mixq::formats::range
