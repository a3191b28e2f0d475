// The INT8 per-tensor mode's output (int8_params.hpp), one element: the reference's
// (ref::linear_int8_requant / conv2d_int8_requant) double-precision expression, operation for
// operation, each rounded once (no contraction), so that every kernel writes the reference's bytes:
//   real = clamp((S_I S_W[n]) acc + bias, lo, hi)
//   y    = clamp(rint(real / S_O) + Z_O, -128, 127) (int8 y), or (float) real (f32 y).
// acc: the exact int32 sum with the Z_I term already subtracted; ws = S_I S_W[n] in double.
#pragma once

#include <cstdint>

namespace mixq::cuda {

__device__ __forceinline__ void store_requant(void* y, int64_t off, bool y_i8, int32_t acc, double ws,
                                              double bias, float lo, float hi, double out_scale, int out_zero) {
  double real = __dadd_rn(__dmul_rn(ws, double(acc)), bias);
  if (real < double(lo)) real = lo;
  if (real > double(hi)) real = hi;
  if (y_i8) {
    double q = rint(__ddiv_rn(real, out_scale)) + double(out_zero);
    q = fmin(127.0, fmax(-128.0, q));
    static_cast<int8_t*>(y)[off] = static_cast<int8_t>(q);
  } else {
    static_cast<float*>(y)[off] = __double2float_rn(real);
  }
}

}  // namespace mixq::cuda
