// The INT8 per-tensor mode's output (int8_params.hpp), one element: the reference's
// (ref::linear_int8_requant / conv2d_int8_requant) double-precision expression, operation for
// operation, each rounded once (no contraction), so that every kernel writes the reference's bytes:
//   real = clamp((S_I S_W[n]) acc + bias, lo, hi)
//   y    = clamp(rint(real / S_O) + Z_O, -128, 127) (int8 y), or (float) real (f32 y).
// acc: the exact int32 sum with the Z_I term already subtracted; ws = S_I S_W[n] in double.
//
// Int8 y runs in float first. The double expression cost ~150 dependent instructions per output
// (the division's slow-path branch keeps ptxas from interleaving outputs): the epilogue of a
// 128 x 128 tile took longer than its K loop (H200, ncu: 12% SM and 12% memory throughput, 11.5
// cycles per issued instruction). The float quotient q is within err of the double one (a bound
// with 2x slack over the float roundings, the double's own and the clamp's, which moves a value by
// no more than it moved in); where no rounding tie lies within err of q, rint(q) is the
// reference's integer, and where q is past the int8 range by more than err both saturate alike.
// The rest (a q within err of a tie: a few outputs in 10^4) take the double expression, so the
// bytes are the reference's always. docs/cuda-conv.md, "The INT8 per-tensor kernels".
#pragma once

#include <cstdint>

namespace mixq::cuda {

// The reference's expression, in double; int8 y. Not inlined: the float path calls it rarely, and
// its division's branches would sit in every output's code otherwise.
static __device__ __noinline__ int8_t requant_i8_double(int32_t acc, double ws, double bias, float lo, float hi,
                                                 double out_scale, int out_zero) {
  double real = __dadd_rn(__dmul_rn(ws, double(acc)), bias);
  if (real < double(lo)) real = lo;
  if (real > double(hi)) real = hi;
  double q = rint(__ddiv_rn(real, out_scale)) + double(out_zero);
  q = fmin(127.0, fmax(-128.0, q));
  return static_cast<int8_t>(q);
}

// One output column's constants (S_I S_W[n] and the bias), narrowed to float once per column
// instead of once per output: the epilogues requantize many rows of the same column.
struct RequantColumn {
  double ws, bias;
  float ws_f, bias_f;
  __device__ __forceinline__ RequantColumn(double ws_, double bias_) : ws(ws_), bias(bias_) {
    ws_f = __double2float_rn(ws_);
    bias_f = __double2float_rn(bias_);
  }
};

// One thread's output constants, made once per tile (the reciprocal is a double division).
struct Requant {
  float lo, hi;
  double out_scale;
  float inv_out_scale;  // float(1 / S_O): one more rounding, inside the bound
  int out_zero;

  __device__ __forceinline__ Requant(float lo_, float hi_, double out_scale_, int out_zero_)
      : lo(lo_), hi(hi_), out_scale(out_scale_), inv_out_scale(static_cast<float>(1.0 / out_scale_)),
        out_zero(out_zero_) {}

  // The float path: true with the reference's code in `out`, or false where q lies within err of a
  // rounding tie (then only requant_i8_double knows the side). Split from code() so that an
  // epilogue can run it over several outputs and take the rare exact calls afterwards, outside the
  // dependent chains it interleaves.
  __device__ __forceinline__ bool fast(int32_t acc, const RequantColumn& c, int8_t& out) const {
    const float p = __fmul_rn(c.ws_f, __int2float_rn(acc));
    const float r = __fadd_rn(p, c.bias_f);
    const float q = __fmul_rn(fminf(fmaxf(r, lo), hi), inv_out_scale);
    // Float roundings: acc, ws, the product, the sum (relative to |p| + |r|), 1 / S_O and the
    // quotient (relative to |q|): under 4 u (|p| + |r|) / S_O + 3 u |q|, u = 2^-24; err is 8 u.
    const float err = __fmul_rn(__fmaf_rn(__fadd_rn(fabsf(p), fabsf(r)), inv_out_scale, fabsf(q)), 0x1p-21f);
    const float lo_code = float(-128 - out_zero), hi_code = float(127 - out_zero);
    const float k = rintf(q);
    // q - k and 0.5 - |q - k| are exact (Sterbenz)
    const bool decided = q - err > hi_code + 1.0f || q + err < lo_code - 1.0f || 0.5f - fabsf(q - k) > err;
    // past the range by more than err: rint saturates either way (>= 128 - Z_O, <= -129 - Z_O)
    out = static_cast<int8_t>(fminf(hi_code, fmaxf(lo_code, k)) + float(out_zero));
    return decided;
  }

  __device__ __forceinline__ int8_t code(int32_t acc, const RequantColumn& c) const {
    int8_t out;
    if (fast(acc, c, out)) return out;
    return requant_i8_double(acc, c.ws, c.bias, lo, hi, out_scale, out_zero);
  }
  // bias: a float / half / bf16 value widened to double (exact in float too).
  __device__ __forceinline__ int8_t code(int32_t acc, double ws, double bias) const {
    return code(acc, RequantColumn(ws, bias));
  }

  // f32 y: the double expression (one per output; no float shortcut gives its bits).
  __device__ __forceinline__ float real(int32_t acc, const RequantColumn& c) const {
    double v = __dadd_rn(__dmul_rn(c.ws, double(acc)), c.bias);
    if (v < double(lo)) v = lo;
    if (v > double(hi)) v = hi;
    return __double2float_rn(v);
  }

  __device__ __forceinline__ void store(void* y, int64_t off, bool y_i8, int32_t acc, double ws,
                                        double bias) const {
    const RequantColumn c(ws, bias);
    if (y_i8) static_cast<int8_t*>(y)[off] = code(acc, c);
    else static_cast<float*>(y)[off] = real(acc, c);
  }
};

}  // namespace mixq::cuda
