// The INT8 per-tensor mode's output (int8_params.hpp), one element: the reference's
// (ref::linear_int8_requant / conv2d_int8_requant) double-precision expression, operation for
// operation, each rounded once (no contraction), so that every kernel writes the reference's bytes:
//   real = clamp((S_I S_W[n]) acc + bias, lo, hi)
//   y    = clamp(rint(real / S_O) + Z_O, -128, 127) (int8 y), or (float) real (f32 y).
// acc: the exact int32 sum with the Z_I term already subtracted; ws = S_I S_W[n] in double.
//
// Int8 y runs in float first (RequantTile, below). The double expression cost ~150 dependent
// instructions per output (the division's slow-path branch keeps ptxas from interleaving
// outputs): the epilogue of a 128 x 128 tile took longer than its K loop (H200, ncu: 12% SM and
// 12% memory throughput, 11.5 cycles per issued instruction). The float path brackets the exact
// quotient and takes the code where both ends of the bracket round alike; the rest (a tie inside
// the bracket: a few outputs in 10^5) take the double expression, so the bytes are the
// reference's always. docs/cuda-conv.md, "The INT8 per-tensor kernels".
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

// One output column's S_I S_W[n] and bias (a float / half / bf16 value widened to double), for
// the double expression.
struct RequantColumn {
  double ws, bias;
  __device__ __forceinline__ RequantColumn(double ws_, double bias_) : ws(ws_), bias(bias_) {}
};

// One thread's output constants for the double expression.
struct Requant {
  float lo, hi;
  double out_scale;
  int out_zero;

  __device__ __forceinline__ Requant(float lo_, float hi_, double out_scale_, int out_zero_)
      : lo(lo_), hi(hi_), out_scale(out_scale_), out_zero(out_zero_) {}

  // int8 y: the double expression (the float path's undecided outputs).
  __device__ __forceinline__ int8_t exact(int32_t acc, const RequantColumn& c) const {
    return requant_i8_double(acc, c.ws, c.bias, lo, hi, out_scale, out_zero);
  }

  // f32 y: the double expression (one per output; no float shortcut gives its bits).
  __device__ __forceinline__ float real(int32_t acc, const RequantColumn& c) const {
    double v = __dadd_rn(__dmul_rn(c.ws, double(acc)), c.bias);
    if (v < double(lo)) v = lo;
    if (v > double(hi)) v = hi;
    return __double2float_rn(v);
  }
};

// The float path, ~12 instructions an output, for epilogues that requantize several rows of each
// column (every INT8 per-tensor kernel's, directly or through RequantOut; it replaced a
// per-output path of ~22, which clamped the real value, multiplied by float(1 / S_O) and bounded
// the error from |p| and |r|): S_O, Z_O and the clamp fold into per-column constants and a
// per-tile interval, and the error bound needs |acc| only.
// The reference's code is rint(Q), Q its quotient plus Z_O clamped to [Lc, Hc] = [lo / S_O + Z_O,
// hi / S_O + Z_O] intersected with [-128.25, 127.25] (clamping there first changes no code: every
// value past 127.25 has rint >= 127, which saturates to 127; the same below). The float path
// brackets Q and takes the code where rint is the same at both ends (rint is monotone):
//   q0 = a m + b,  a = float(acc),  m = float(ws / S_O),  b = float(bias / S_O + Z_O)
//   err = |a| e1 + e0,  Q in [clamp(q0 - err, qlo, qhi), clamp(q0 + err, qhi', qhi')]
// with qlo / qhi the bounds Lc / Hc less eb, rounded down, and qlo' / qhi' plus eb, rounded up.
// Why Q lies inside (u = 2^-24, U the exact (ws acc + bias) / S_O + Z_O):
// - |q0 - U| <= u (3.02 |acc| |m| + 2.02 (|bias / S_O| + |Z_O|)): the roundings of a, m, b and the
//   fma, m and b being the double values rounded once (their double roundings and the reference's
//   own three are ~2^-52 relative); q0 - err and q0 + err add one rounding of u |q0 +- err|.
//   e1 = 8 u |m| and e0 = 8 u (|bias / S_O| + |Z_O|) + eb cover all of it with room to spare.
// - The reference clamps the real value before dividing; division by S_O > 0 and rounding are
//   monotone, so its quotient is U's (rounded) clamped to the bounds, and a clamp is monotone in
//   its argument and moves by no more than its bounds do: the float bounds lie within
//   2^-24 * 129.25 < 2^-16 of Lc, Hc where they matter, and eb = 2^-15 covers that and the
//   roundings of the shifted bounds.
// - Saturation: a value far past the range (err large or not) clamps to qhi +- eb at both ends,
//   whose rint is the saturated code unless the bound itself lies near a tie.
// - A tie inside the bracket (a few outputs in 10^5), an overflow (err = inf) or a NaN is
//   undecided: the caller runs requant_i8_double for those.
struct RequantCol {
  float m, b, e1, e0;
};

struct RequantTile {
  static constexpr double kBoundSlack = 0x1p-15;  // eb
  double inv_out_scale;  // 1 / S_O: m and b take one more double rounding, far inside err
  int out_zero;
  float lo_dn, hi_dn, lo_up, hi_up;  // the clamp bounds Lc, Hc less eb (rounded down), plus eb (up)

  __device__ __forceinline__ RequantTile(float lo, float hi, double out_scale, int out_zero_)
      : inv_out_scale(1.0 / out_scale), out_zero(out_zero_) {
    const double l = fmax(double(lo) * inv_out_scale + double(out_zero), -128.25);
    const double h = fmin(double(hi) * inv_out_scale + double(out_zero), 127.25);
    lo_dn = __double2float_rd(l - kBoundSlack);
    hi_dn = __double2float_rd(h - kBoundSlack);
    lo_up = __double2float_ru(l + kBoundSlack);
    hi_up = __double2float_ru(h + kBoundSlack);
  }

  __device__ __forceinline__ RequantCol column(double ws, double bias) const {
    const double m = ws * inv_out_scale, b = bias * inv_out_scale;
    RequantCol c;
    c.m = __double2float_rn(m);
    c.b = __double2float_rn(b + double(out_zero));
    c.e1 = __double2float_ru(fabs(m) * 0x1p-21);
    c.e0 = __double2float_ru((fabs(b) + fabs(double(out_zero))) * 0x1p-21 + kBoundSlack);
    // constants past the float range (S_O below ws / 3.4e38): an unbounded bracket, every output
    // undecided unless the clamp bounds coincide (then the clamp is the code either way)
    if (!(fabs(m) <= 3.0e38 && fabs(b + double(out_zero)) <= 3.0e38))
      c = RequantCol{0.f, 0.f, 0.f, __int_as_float(0x7f800000)};
    return c;
  }

  // true with the reference's code in `out`; false where only requant_i8_double knows it
  __device__ __forceinline__ bool code(int32_t acc, const RequantCol& c, int8_t& out) const {
    const float a = __int2float_rn(acc);
    const float q0 = __fmaf_rn(a, c.m, c.b);
    const float err = __fmaf_rn(fabsf(a), c.e1, c.e0);
    const float k_lo = rintf(fminf(fmaxf(__fsub_rn(q0, err), lo_dn), hi_dn));
    const float k_hi = rintf(fminf(fmaxf(__fadd_rn(q0, err), lo_up), hi_up));
    out = static_cast<int8_t>(__float2int_rz(k_lo));
    return k_lo == k_hi;
  }
};

// An epilogue's output writer for either y type, a column at a time: int8 y by the per-column
// float path (the double expression where it is undecided), f32 y by the double expression.
struct RequantOut {
  Requant rq;
  RequantTile rt;
  bool y_i8;

  struct Column {
    RequantCol c;     // the float path's constants (int8 y)
    RequantColumn d;  // the double expression's
  };

  __device__ __forceinline__ RequantOut(float lo, float hi, double out_scale, int out_zero, bool y_i8_)
      : rq(lo, hi, out_scale, out_zero), rt(lo, hi, out_scale, out_zero), y_i8(y_i8_) {}

  // ws = S_I S_W[n], bias widened to double
  __device__ __forceinline__ Column column(double ws, double bias) const {
    return Column{y_i8 ? rt.column(ws, bias) : RequantCol{0.f, 0.f, 0.f, 0.f}, RequantColumn(ws, bias)};
  }

  __device__ __forceinline__ void store(void* y, int64_t off, int32_t acc, const Column& c) const {
    if (y_i8) {
      int8_t code;
      if (!rt.code(acc, c.c, code)) code = rq.exact(acc, c.d);
      static_cast<int8_t*>(y)[off] = code;
    } else {
      static_cast<float*>(y)[off] = rq.real(acc, c.d);
    }
  }
};

}  // namespace mixq::cuda
