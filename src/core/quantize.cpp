// Round-to-nearest weight quantizers (the activation quantizers are in act_quant.cpp).
#include "mixq/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/reference.hpp"

namespace mixq {

namespace {

// Stores f into a scale_type buffer at index i and returns the value actually stored, so that
// codes are computed against the rounded scale (the one dequantization will use).
float store_scale(std::vector<uint8_t>& buf, DType t, int64_t i, float f) {
  switch (t) {
    case DType::F32:
      std::memcpy(buf.data() + 4 * i, &f, 4);
      return f;
    case DType::F16: {
      const uint16_t h = f32_to_f16(f);
      std::memcpy(buf.data() + 2 * i, &h, 2);
      return f16_to_f32(h);
    }
    case DType::BF16: {
      const uint16_t h = f32_to_bf16(f);
      std::memcpy(buf.data() + 2 * i, &h, 2);
      return bf16_to_f32(h);
    }
    default: MIXQ_FAIL(ErrorCode::Internal, "store_scale: ", dtype_name(t));
  }
}

void check_weight_input(const TensorView& w, const char* op) {
  check_view(w, op, 2, Device::CPU);
  check_rows_contiguous(w, op);
  MIXQ_CHECK_ARG(w.dtype == DType::F32 || w.dtype == DType::F16 || w.dtype == DType::BF16, op,
                 ": weights must be f32, f16 or bf16, got ", w.describe());
  MIXQ_CHECK_ARG(w.shape[0] >= 1 && w.shape[1] >= 1, op, ": empty weight ", w.describe());
}

// The largest value of type t that is <= v (v >= 0, finite), as f32.
float round_down_to(DType t, double v) {
  float f = static_cast<float>(v);  // nearest f32
  if (static_cast<double>(f) > v) f = std::nextafter(f, 0.0f);
  if (t == DType::F32) return f;
  const bool half = t == DType::F16;
  uint16_t h = half ? f32_to_f16(f) : f32_to_bf16(f);
  float back = half ? f16_to_f32(h) : bf16_to_f32(h);
  if (!std::isfinite(back)) return back;  // overflow: let the caller report it
  if (back > f && h > 0) {
    --h;  // positive values: the next lower bit pattern is the next lower value
    back = half ? f16_to_f32(h) : bf16_to_f32(h);
  }
  return back;
}

// Stores a block's scale (or offset) and returns the stored value, after checking that it is
// representable: an f16 scale overflows for blocks with amax above ~458000 (int4) and quietly
// becoming inf would only be reported later as an invalid weight. A scale also must not underflow:
// `ideal` is the value before rounding to scale_type (NaN: not checked), and a stored scale that
// went subnormal or to zero and so lost more than 2^-5 of it scales the whole block wrongly; an
// f16 scale of 7.9e-9 (int8 groups of |w| ~ 1e-6) is stored as 0 and zeroes the block.
float store_block_scale(std::vector<uint8_t>& buf, DType t, int64_t i, float f, const char* what,
                        int64_t bn, int64_t bk, double ideal) {
  const float stored = store_scale(buf, t, i, f);
  MIXQ_CHECK_ARG(std::isfinite(stored), "quantize_weight: the ", what, " of block (n ", bn,
                 ", k ", bk, ") is ", f, ", which does not fit in ", dtype_name(t),
                 " (use f32 scales, e.g. the '-f32' scheme suffix)");
  // Only below the smallest normal value: rounding (down, for range-derived scales) within the
  // normal range loses at most one ulp, 2^-7 for bf16, and that is the scheme's chosen precision.
  constexpr double kMaxLoss = 1.0 / 32;
  const double min_normal = t == DType::F16 ? 0x1p-14 : 0x1p-126;
  MIXQ_CHECK_ARG(std::isnan(ideal) || std::fabs(double(stored)) >= min_normal ||
                     std::fabs(double(stored) - ideal) <= kMaxLoss * std::fabs(ideal),
                 "quantize_weight: the ", what, " of block (n ", bn, ", k ", bk, ") is ", ideal,
                 ", which underflows ", dtype_name(t), " (stored as ", stored,
                 ", a loss above 2^-5 of its value; use f32 scales, e.g. the '-f32' scheme "
                 "suffix)");
  return stored;
}

int32_t round_clamp(double v, int32_t lo, int32_t hi) {
  const double r = std::nearbyint(v);  // half to even
  if (!(r >= lo)) return lo;           // also catches NaN
  if (r > hi) return hi;
  return static_cast<int32_t>(r);
}

struct Range {
  float lo = INFINITY, hi = -INFINITY, amax = 0.f;
};

}  // namespace

QuantScheme parse_scheme(const std::string& name) {
  const std::string valid =
      "valid schemes: w4g{32,64,128,256}, w8g{32,64,128,256}, w4pc, w8pc, with an optional "
      "'asym' (offset) or 'zp' (zero point) suffix and '-bf16'/'-f32' scale type, and fp8b128";
  std::string s = name;
  QuantScheme q;
  auto ends_with = [&](const std::string& suf) {
    if (s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0) {
      s.resize(s.size() - suf.size());
      return true;
    }
    return false;
  };
  if (s == "fp8b128") {
    q.code_type = DType::F8E4M3;
    q.block_k = 128;
    q.block_n = 128;
    q.scale_type = DType::F32;
    return q;
  }
  if (ends_with("-bf16")) q.scale_type = DType::BF16;
  else if (ends_with("-f32")) q.scale_type = DType::F32;
  else ends_with("-f16");
  if (ends_with("asym")) q.zero_kind = ZeroKind::Offset;
  else if (ends_with("zp")) q.zero_kind = ZeroKind::ZeroPoint;
  if (s.rfind("w4", 0) == 0) q.code_type = q.zero_kind == ZeroKind::ZeroPoint ? DType::U4 : DType::I4;
  else if (s.rfind("w8", 0) == 0) q.code_type = q.zero_kind == ZeroKind::ZeroPoint ? DType::U8 : DType::I8;
  else MIXQ_FAIL(ErrorCode::InvalidArgument, "scheme '", name, "' is not recognised; ", valid);
  const std::string rest = s.substr(2);
  if (rest == "pc") {
    q.block_k = 0;
  } else if (rest.size() > 1 && rest[0] == 'g' &&
             rest.find_first_not_of("0123456789", 1) == std::string::npos && rest.size() < 9) {
    q.block_k = std::stoll(rest.substr(1));
    MIXQ_CHECK_ARG(q.block_k >= 1, "scheme '", name, "': block size must be >= 1");
  } else {
    MIXQ_FAIL(ErrorCode::InvalidArgument, "scheme '", name, "' is not recognised; ", valid);
  }
  return q;
}

std::string scheme_name(const QuantScheme& q) {
  if (q.code_type == DType::F8E4M3) return "fp8b128";
  std::string s = (q.code_type == DType::I4 || q.code_type == DType::U4) ? "w4" : "w8";
  s += q.block_k == 0 ? std::string("pc") : "g" + std::to_string(q.block_k);
  if (q.zero_kind == ZeroKind::Offset) s += "asym";
  if (q.zero_kind == ZeroKind::ZeroPoint) s += "zp";
  if (q.scale_type == DType::BF16) s += "-bf16";
  if (q.scale_type == DType::F32) s += "-f32";
  return s;
}

QuantizedWeight quantize_weight(const TensorView& w, const QuantScheme& sc) {
  check_weight_input(w, "quantize_weight");
  QuantizedWeight q;
  q.N = w.shape[0];
  q.K = w.shape[1];
  q.code_type = sc.code_type;
  q.block_k = sc.block_k == 0 ? q.K : std::min<int64_t>(sc.block_k, q.K);
  q.block_n = sc.block_n;
  q.scale_type = sc.scale_type;
  q.zero_kind = sc.zero_kind;
  q.origin = "mixq:" + scheme_name(sc);
  MIXQ_CHECK_ARG(sc.block_k >= 0, "quantize_weight: block_k (", sc.block_k, ") must be >= 0");
  if (sc.code_type == DType::F8E4M3) {
    MIXQ_CHECK_ARG(sc.zero_kind == ZeroKind::None && sc.scale_type == DType::F32,
                   "quantize_weight: fp8 blocks are symmetric with f32 scales");
  } else {
    MIXQ_CHECK_ARG(sc.block_n == 1, "quantize_weight: integer schemes use block_n = 1, got ",
                   sc.block_n);
    const bool unsigned_codes = sc.code_type == DType::U4 || sc.code_type == DType::U8;
    MIXQ_CHECK_ARG(unsigned_codes == (sc.zero_kind == ZeroKind::ZeroPoint),
                   "quantize_weight: zero-point schemes use unsigned codes (u4/u8), the others "
                   "signed (i4/i8); got ", dtype_name(sc.code_type), " with zero ",
                   zero_kind_name(sc.zero_kind));
  }
  q.allocate();
  const int64_t nbk = q.n_blocks_k(), nbn = q.n_blocks_n();

  for (int64_t bn = 0; bn < nbn; ++bn) {
    const int64_t n0 = bn * q.block_n, n1 = std::min(q.N, n0 + q.block_n);
    for (int64_t bk = 0; bk < nbk; ++bk) {
      const int64_t k0 = bk * q.block_k, k1 = std::min(q.K, k0 + q.block_k);
      Range r;
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t k = k0; k < k1; ++k) {
          const float v = static_cast<float>(ref::load_as_double(w, n, k));
          MIXQ_CHECK_ARG(std::isfinite(v), "quantize_weight: element [", n, ", ", k,
                         "] is not finite (", v, ")");
          r.lo = std::min(r.lo, v);
          r.hi = std::max(r.hi, v);
          r.amax = std::max(r.amax, std::fabs(v));
        }
      const int64_t si = bn * nbk + bk;
      // `ideal`: the value before rounding to scale_type, for the underflow check (offsets are
      // not checked: their error is measured in steps, not relative to themselves).
      auto put = [&](std::vector<uint8_t>& buf, float v, const char* what, double ideal) {
        return store_block_scale(buf, q.scale_type, si, v, what, bn, bk, ideal);
      };
      if (sc.code_type == DType::F8E4M3) {
        const float s = put(q.scales, r.amax / 448.0f, "scale", r.amax / 448.0f);
        for (int64_t n = n0; n < n1; ++n)
          for (int64_t k = k0; k < k1; ++k) {
            const float v = static_cast<float>(ref::load_as_double(w, n, k));
            q.codes[n * q.row_bytes() + k] = s > 0 ? f32_to_e4m3(v / s) : 0;
          }
        continue;
      }
      const int32_t qmin = code_min(sc.code_type), qmax = code_max(sc.code_type);
      const int levels = qmax - qmin;  // 15 or 255
      // Range-derived scales (offset and zero-point forms) are rounded DOWN to scale_type, so that
      // the block's extreme values still reach the extreme codes qmin and qmax. Rounding to nearest
      // could enlarge s by half an ulp of scale_type (up to 255 * 2^-9 of a step for 8-bit codes
      // with bf16 scales), so that max no longer reached qmax; the dequantized grid then spans
      // fewer codes than the range, and quantize(dequantize(q)) would pick a different scale.
      // Rounding down costs at most levels * ulp(s) / 2 at the clamped end (see quantize.hpp).
      auto range_scale = [&](double lo, double hi) {
        const double exact = (hi - lo) / levels;
        const float s = round_down_to(q.scale_type, exact);
        // on overflow, store the exact value so that the error message shows it
        return put(q.scales, std::isfinite(s) ? s : static_cast<float>(exact), "scale", exact);
      };
      switch (sc.zero_kind) {
        case ZeroKind::None: {
          const float s = put(q.scales, r.amax / float(qmax), "scale", r.amax / float(qmax));
          for (int64_t n = n0; n < n1; ++n)
            for (int64_t k = k0; k < k1; ++k)
              q.set_code_int(n, k, s > 0 ? round_clamp(ref::load_as_double(w, n, k) / s, qmin, qmax) : 0);
          break;
        }
        case ZeroKind::Offset: {
          const float s = range_scale(r.lo, r.hi);
          // constant block (s == 0): every element is w = o
          const float o_ideal = s > 0 ? r.lo - float(qmin) * s : r.lo;
          const float o = put(q.zeros, o_ideal, "offset", std::nan(""));
          for (int64_t n = n0; n < n1; ++n)
            for (int64_t k = k0; k < k1; ++k)
              q.set_code_int(n, k, s > 0 ? round_clamp((ref::load_as_double(w, n, k) - o) / s, qmin, qmax) : qmin);
          break;
        }
        case ZeroKind::ZeroPoint: {
          // The range always includes 0 so that z is a valid code (GPTQ's convention).
          const float lo = std::min(r.lo, 0.f), hi = std::max(r.hi, 0.f);
          const float s = range_scale(lo, hi);
          const int32_t z = s > 0 ? round_clamp(-lo / s, qmin, qmax) : 0;
          std::memcpy(q.zeros.data() + 4 * si, &z, 4);
          for (int64_t n = n0; n < n1; ++n)
            for (int64_t k = k0; k < k1; ++k)
              q.set_code_int(n, k, s > 0 ? round_clamp(ref::load_as_double(w, n, k) / s + z, qmin, qmax) : z);
          break;
        }
      }
    }
  }
  q.validate();
  return q;
}

QuantizedWeight quantize_weight_int8_per_channel(const TensorView& w) {
  QuantScheme s;
  s.code_type = DType::I8;
  s.block_k = 0;
  s.scale_type = DType::F32;
  return quantize_weight(w, s);
}

}  // namespace mixq
