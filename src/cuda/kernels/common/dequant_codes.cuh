// Fast conversion of packed unsigned weight codes into f16 / bf16 MMA A-fragments.
//
// Codes arrive in the "fragment order" written by repack (see wo_layout.hpp): one 32-bit word holds
// the 8 int4 codes a lane needs for one 16x16 A tile, in nibble slots
//   slot 0 (r, k)   slot 1 (r+8, k)   slot 2 (r, k+8)   slot 3 (r+8, k+8)
//   slot 4 (r, k+1) slot 5 (r+8, k+1) slot 6 (r, k+9)   slot 7 (r+8, k+9)
// (r = lane/4, k = 2*(lane%4)), so fragment register i = half2(slot i, slot i+4). For int8 two
// words hold the 8 bytes: word 0 = (r,k) (r,k+1) (r+8,k) (r+8,k+1), word 1 = the same at k+8.
//
// The values produced are the unsigned codes u in [0, 15] / [0, 255] plus a constant bias (the
// mantissa trick's 1024 or 128; -128 for bf16 int8), exact in f16 and bf16; the bias, the code
// offset and the zero point are folded into the per-group offset term by the kernel, so the tensor
// cores see small exact integers and the scale is applied once per group in f32.
#pragma once

#include "cuda/kernels/common/mma_sm80.cuh"
#include "cuda/kernels/common/wo_layout.hpp"

namespace mixq::cuda {

// (a & b) | c
constexpr int kLopAndOr = (0xF0 & 0xCC) | 0xAA;
// (~a & b) | c
constexpr int kLopAndNotOr = (~0xF0 & 0xCC & 0xFF) | 0xAA;

// Two int8 codes (the bytes of `word` that prmt selector `sel` puts at bits 0-7 and 16-23, e.g.
// 0x4140 for bytes 0, 1) as the exact bf16x2 (u - 128), without the f32 round trip: 255 has no
// bf16 bias (a bf16 binade holds 128 integers), so the byte is split as u = l + 128 h. Under a 0x43
// high byte the byte's bit 7 lands in the exponent's lowest bit: clearing it leaves the bf16
// 128 + l (exponent 2^7, mantissa l); the same bit selects 0x4300 (128, h = 1) or 0x4380 (256,
// h = 0). (128 + l) - (256 - 128 h) = u - 128 is exact (in [-128, 127]). Four instructions on the
// integer and f16x2 pipes, where the f32 route took two conversions per register.
__device__ __forceinline__ uint32_t bf16x2_u8_minus_128(uint32_t word, uint32_t sel) {
  const uint32_t x = prmt(word, 0x43434343u, sel);
  const uint32_t a = x & 0xFF7FFF7Fu;                                  // 128 + l
  const uint32_t b = lop3<kLopAndNotOr>(x, 0x00800080u, 0x43004300u);  // 256 - 128 h
  const __nv_bfloat162 d =
      __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&d);
}

// Fast path: the MMA consumes biased codes (u + kBias), which are exact small integers in the
// operand type; the kernel removes kBias * sum(x) together with the group offset, in f32. This
// saves the per-register subtraction (a third of the conversion work).
// kHiScale: the codes of the fragment's rows r + 8 (registers 1 and 3) may be produced as
// kBias + u / kHiScale instead (f16 int4: 1024 + 16u, which needs no shift); the kernel folds the
// factor into those rows' scale (s * kHiScale) and bias (kBias * kHiScale), exactly.
template <typename T, int BITS>
struct BiasedCodes;

// f16 int4: nibble slot i sits at bits 4i and 16 + 4i. Slots 0 and 2 (rows r) are masked at bit
// 0 into the mantissa of 1024 (1024 + u); slots 1 and 3 (rows r + 8) are masked where they are,
// at bit 4 (1024 + 16u: still exact, the f16 spacing at 1024 is 1). One shift and four lop3 per
// 16x16 tile instead of three shifts and four.
template <>
struct BiasedCodes<half, 4> {
  static constexpr float kBias = 1024.f;
  static constexpr float kHiScale = 1.f / 16.f;
  static __device__ __forceinline__ void convert(const uint32_t* w, Frag16x16& a) {
    const uint32_t w8 = w[0] >> 8;
    a.r[0] = lop3<kLopAndOr>(w[0], 0x000F000Fu, 0x64006400u);
    a.r[1] = lop3<kLopAndOr>(w[0], 0x00F000F0u, 0x64006400u);
    a.r[2] = lop3<kLopAndOr>(w8, 0x000F000Fu, 0x64006400u);
    a.r[3] = lop3<kLopAndOr>(w8, 0x00F000F0u, 0x64006400u);
  }
};
template <>
struct BiasedCodes<__nv_bfloat16, 4> {
  static constexpr float kBias = 128.f;
  static constexpr float kHiScale = 1.f;
  static __device__ __forceinline__ void convert(const uint32_t* w, Frag16x16& a) {
#pragma unroll
    for (int i = 0; i < 4; ++i) a.r[i] = lop3<kLopAndOr>(w[0] >> (4 * i), 0x000F000Fu, 0x43004300u);
  }
};
template <>
struct BiasedCodes<half, 8> {
  static constexpr float kBias = 1024.f;
  static constexpr float kHiScale = 1.f;
  static __device__ __forceinline__ void convert(const uint32_t* w, Frag16x16& a) {
    a.r[0] = prmt(w[0], 0x64646464u, 0x4140u);
    a.r[1] = prmt(w[0], 0x64646464u, 0x4342u);
    a.r[2] = prmt(w[1], 0x64646464u, 0x4140u);
    a.r[3] = prmt(w[1], 0x64646464u, 0x4342u);
  }
};
// bf16 int8: the MMA consumes u - 128 (a negative bias: bf16x2_u8_minus_128).
template <>
struct BiasedCodes<__nv_bfloat16, 8> {
  static constexpr float kBias = -128.f;
  static constexpr float kHiScale = 1.f;
  static __device__ __forceinline__ void convert(const uint32_t* w, Frag16x16& a) {
    a.r[0] = bf16x2_u8_minus_128(w[0], 0x4140u);
    a.r[1] = bf16x2_u8_minus_128(w[0], 0x4342u);
    a.r[2] = bf16x2_u8_minus_128(w[1], 0x4140u);
    a.r[3] = bf16x2_u8_minus_128(w[1], 0x4342u);
  }
};

// ---- e4m3 weight bytes (FP8 weight-only): the MMA consumes the exact e4m3 values (every e4m3
// value, subnormals included, is exact in f16 and in bf16), no bias. Byte order as for int8.

// Two e4m3 bytes (bits 0-7 and 8-15 of v) -> f16x2, exact.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(static_cast<unsigned short>(v)));
  return r;
#else
  // Bytes to the top of each 16-bit half, then magnitude >> 1: exponent (4 bits) and mantissa
  // (3) land in the f16 fields with the f16 bias 15 instead of 7, i.e. the value times 2^-8
  // (subnormals included); the multiply by 2^8 is exact.
  const uint32_t x = prmt(v, 0u, 0x1404u);  // (0, b0, 0, b1)
  const uint32_t r = lop3<kLopAndOr>(x >> 1, 0x3F803F80u, x & 0x80008000u);
  const __half2 h = __hmul2(*reinterpret_cast<const __half2*>(&r), __half2half2(__ushort_as_half(0x5C00u)));
  return *reinterpret_cast<const uint32_t*>(&h);
#endif
}

// Two e4m3 bytes -> bf16x2, exact: magnitude << 4 puts exponent and mantissa in the bf16 fields
// with bias 127 instead of 7 (the value times 2^-120, subnormals included); times 2^120 is exact.
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t v) {
  const uint32_t x = prmt(v, 0u, 0x1404u);  // (0, b0, 0, b1): each half = b << 8
  const uint32_t r = lop3<kLopAndOr>(x >> 4, 0x07F007F0u, x & 0x80008000u);
  const __nv_bfloat162 k = __halves2bfloat162(__ushort_as_bfloat16(0x7B80u), __ushort_as_bfloat16(0x7B80u));
  const __nv_bfloat162 b = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&r), k);
  return *reinterpret_cast<const uint32_t*>(&b);
}

template <>
struct BiasedCodes<half, kCodesE4M3> {
  static constexpr float kBias = 0.f;
  static constexpr float kHiScale = 1.f;
  static __device__ __forceinline__ void convert(const uint32_t* w, Frag16x16& a) {
    a.r[0] = e4m3x2_to_f16x2(w[0]);
    a.r[1] = e4m3x2_to_f16x2(w[0] >> 16);
    a.r[2] = e4m3x2_to_f16x2(w[1]);
    a.r[3] = e4m3x2_to_f16x2(w[1] >> 16);
  }
};
template <>
struct BiasedCodes<__nv_bfloat16, kCodesE4M3> {
  static constexpr float kBias = 0.f;
  static constexpr float kHiScale = 1.f;
  static __device__ __forceinline__ void convert(const uint32_t* w, Frag16x16& a) {
    a.r[0] = e4m3x2_to_bf16x2(w[0]);
    a.r[1] = e4m3x2_to_bf16x2(w[0] >> 16);
    a.r[2] = e4m3x2_to_bf16x2(w[1]);
    a.r[3] = e4m3x2_to_bf16x2(w[1] >> 16);
  }
};

// Two floats rounded to a 16-bit pair (lo in the low half: the lower address), as one register.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<half>(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

}  // namespace mixq::cuda
