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

// One thread's output constants, made once per tile (the reciprocal is a double division).
struct Requant {
  float lo, hi;
  double out_scale;
  float inv_out_scale;  // float(1 / S_O): one more rounding, inside the bound
  int out_zero;

  __device__ __forceinline__ Requant(float lo_, float hi_, double out_scale_, int out_zero_)
      : lo(lo_), hi(hi_), out_scale(out_scale_), inv_out_scale(static_cast<float>(1.0 / out_scale_)),
        out_zero(out_zero_) {}

  // bias: a float / half / bf16 value widened to double (exact in float too).
  __device__ __forceinline__ int8_t code(int32_t acc, double ws, double bias) const {
    const float p = __fmul_rn(__double2float_rn(ws), __int2float_rn(acc));
    const float r = __fadd_rn(p, __double2float_rn(bias));
    const float q = __fmul_rn(fminf(fmaxf(r, lo), hi), inv_out_scale);
    // Float roundings: acc, ws, the product, the sum (relative to |p| + |r|), 1 / S_O and the
    // quotient (relative to |q|): under 4 u (|p| + |r|) / S_O + 3 u |q|, u = 2^-24; err is 8 u.
    const float err = __fmul_rn(__fmaf_rn(__fadd_rn(fabsf(p), fabsf(r)), inv_out_scale, fabsf(q)), 0x1p-21f);
    const float lo_code = float(-128 - out_zero), hi_code = float(127 - out_zero);
    if (q - err > hi_code + 1.0f) return 127;    // rint >= 128 - Z_O either way
    if (q + err < lo_code - 1.0f) return -128;   // rint <= -129 - Z_O either way
    const float k = rintf(q);
    if (0.5f - fabsf(q - k) > err)  // q - k and 0.5 - |q - k| are exact (Sterbenz)
      return static_cast<int8_t>(fminf(hi_code, fmaxf(lo_code, k)) + float(out_zero));
    return requant_i8_double(acc, ws, bias, lo, hi, out_scale, out_zero);
  }

  __device__ __forceinline__ void store(void* y, int64_t off, bool y_i8, int32_t acc, double ws,
                                        double bias) const {
    if (y_i8) {
      static_cast<int8_t*>(y)[off] = code(acc, ws, bias);
    } else {
      double real = __dadd_rn(__dmul_rn(ws, double(acc)), bias);
      if (real < double(lo)) real = lo;
      if (real > double(hi)) real = hi;
      static_cast<float*>(y)[off] = __double2float_rn(real);
    }
  }
};

}  // namespace mixq::cuda
