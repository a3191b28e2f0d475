// f32 -> e4m3 conversions of the activation quantizers and the quantizing epilogue: the hardware
// conversion on sm_89+, the host rule of mixq/numeric.hpp (f32_to_e4m3) elsewhere; both RNE,
// saturating to +-448, NaN -> NaN.
#pragma once

#include <cstdint>

#include "mixq/numeric.hpp"

namespace mixq::cuda {

// f32 pair -> e4m3 pair (lo in the low byte), RNE, saturating to +-448, NaN -> NaN. A monotone
// function of each input (the FP8 fast path relies on that).
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  unsigned short r;
  // operand a goes to the upper byte, b to the lower one
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return static_cast<uint32_t>(f32_to_e4m3(lo)) | (static_cast<uint32_t>(f32_to_e4m3(hi)) << 8);
#endif
}

// Four values -> four e4m3 bytes (a in the low byte). One PTX block so that the two 16-bit halves
// are merged by the conversion itself (F2FP ... MERGE_C) instead of a mask and a permute.
__device__ __forceinline__ uint32_t e4m3x4(float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t r;
  asm("{\n\t.reg .b16 lo, hi;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n\t"
      "mov.b32 %0, {lo, hi};\n\t}"
      : "=r"(r)
      : "f"(a), "f"(b), "f"(c), "f"(d));
  return r;
#else
  return e4m3x2(a, b) | (e4m3x2(c, d) << 16);
#endif
}

}  // namespace mixq::cuda
