// One lane's 32-element chunk of a native GGUF row (ggml_gpu_format.hpp): the loads, the codes as
// eight words of four signed bytes, and the chunk's f32 scales and mins.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/common/dequant_codes.cuh"  // pack2
#include "cuda/kernels/ggml/ggml_gpu_format.hpp"

namespace mixq::cuda::ggml {

// The weight planes are read once per call: no L1 allocation (the activations, read by every
// warp, keep L1), and a 256-byte L2 fetch since a warp's loads of a plane are contiguous. Not
// volatile, so the compiler may issue the loads of later chunks early.
__device__ __forceinline__ uint4 ld_stream_v4(const uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 ld_stream_v2(const uint8_t* p) {
  uint2 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t ld_stream_u32(const uint8_t* p) {
  uint32_t v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// How the small loads of a chunk's fields are issued: from global memory through the read-only
// path (the eight lanes of a super-block read the same scale bytes: one L1 line), or from a
// shared-memory copy of the planes (the tensor-core kernel's stages, which are views of the same
// layout with their own pitches).
struct LdgLoad {
  template <typename U>
  __device__ __forceinline__ U operator()(const U* p) const { return __ldg(p); }
};
struct PlainLoad {
  template <typename U>
  __device__ __forceinline__ U operator()(const U* p) const { return *p; }
};

// The f16 scale field(s) and sub-block scale bytes of chunk c of row `row`.
template <GType T, typename Ld = LdgLoad>
__device__ __forceinline__ void load_scales(const GPlanes& w, int64_t row, int64_t c, uint32_t& d,
                                            uint32_t& sc, Ld ld = {}) {
  constexpr GFormat F = gformat(T);
  const int64_t b = F.qk == 32 ? c : (c >> 3);
  const uint8_t* dp = w.d + row * w.d_pitch + b * F.d_bytes();
  if constexpr (F.d_bytes() == 4) d = ld(reinterpret_cast<const unsigned int*>(dp));
  else d = ld(reinterpret_cast<const unsigned short*>(dp));
  if constexpr (F.qk == 256) {
    const int j = int(c & 7);
    const uint8_t* sp = w.sc + row * w.sc_pitch + b * F.sc_bytes();
    if constexpr (F.sk == GScale::K4)
      sc = uint32_t(ld(reinterpret_cast<const unsigned char*>(sp + j))) |
           (uint32_t(ld(reinterpret_cast<const unsigned char*>(sp + 8 + j))) << 8);
    else if constexpr (F.halves()) sc = ld(reinterpret_cast<const unsigned short*>(sp + 2 * j));
    else sc = ld(reinterpret_cast<const unsigned char*>(sp + j));
  } else {
    sc = 0;
  }
}

template <GType T>
struct RawChunk {
  static constexpr GFormat F = gformat(T);
  uint32_t lo[F.lb];                 // 2, 4 or 8 words
  uint32_t hi[F.hb > 0 ? F.hb : 1];  // 1 or 2 words (unused when HB = 0)
  uint32_t d;                        // f16 bits, or an f16 pair
  uint32_t sc;                       // the chunk's sub-block scale bytes
};

// Chunk c (32 elements from column 32c) of row `row`.
template <GType T>
__device__ __forceinline__ void load_chunk(const GPlanes& w, int64_t row, int64_t c, RawChunk<T>& r) {
  constexpr GFormat F = gformat(T);
  const uint8_t* lo = w.lo + row * w.lo_pitch + c * F.lo_chunk();
  if constexpr (F.lb == 4) {
    const uint4 v = ld_stream_v4(lo);
    r.lo[0] = v.x; r.lo[1] = v.y; r.lo[2] = v.z; r.lo[3] = v.w;
  } else if constexpr (F.lb == 8) {
    const uint4 a = ld_stream_v4(lo), b = ld_stream_v4(lo + 16);
    r.lo[0] = a.x; r.lo[1] = a.y; r.lo[2] = a.z; r.lo[3] = a.w;
    r.lo[4] = b.x; r.lo[5] = b.y; r.lo[6] = b.z; r.lo[7] = b.w;
  } else {
    const uint2 v = ld_stream_v2(lo);
    r.lo[0] = v.x; r.lo[1] = v.y;
  }
  if constexpr (F.hb == 1) {
    r.hi[0] = ld_stream_u32(w.hi + row * w.hi_pitch + c * 4);
  } else if constexpr (F.hb == 2) {
    const uint2 v = ld_stream_v2(w.hi + row * w.hi_pitch + c * 8);
    r.hi[0] = v.x; r.hi[1] = v.y;
  }
  load_scales<T>(w, row, c, r.d, r.sc);
}

// IQ4 codebook lookup of the eight 4-bit indices of one low-plane word (byte i: index A_i in the
// low nibble, B_i in the high one) into two words of four signed values, table[A_0..A_3] and
// table[B_0..B_3]. A byte permute reads only the three low bits of each selector nibble, so one
// permute over each half of the 16-entry table looks up four nibbles at once, a third picks the
// half by each nibble's top bit, and two more separate the A and B bytes: 8 permutes and 3
// logic operations for eight codes (a per-word lookup needed ~13 instructions for four).
__device__ __forceinline__ void iq4_lookup8(uint32_t raw, uint32_t& a, uint32_t& b) {
  constexpr uint32_t t0 = uint8_t(kIq4Values[0]) | uint8_t(kIq4Values[1]) << 8 |
                          uint8_t(kIq4Values[2]) << 16 | uint32_t(uint8_t(kIq4Values[3])) << 24;
  constexpr uint32_t t1 = uint8_t(kIq4Values[4]) | uint8_t(kIq4Values[5]) << 8 |
                          uint8_t(kIq4Values[6]) << 16 | uint32_t(uint8_t(kIq4Values[7])) << 24;
  constexpr uint32_t t2 = uint8_t(kIq4Values[8]) | uint8_t(kIq4Values[9]) << 8 |
                          uint8_t(kIq4Values[10]) << 16 | uint32_t(uint8_t(kIq4Values[11])) << 24;
  constexpr uint32_t t3 = uint8_t(kIq4Values[12]) | uint8_t(kIq4Values[13]) << 8 |
                          uint8_t(kIq4Values[14]) << 16 | uint32_t(uint8_t(kIq4Values[15])) << 24;
  // selector n, or 4 + n where nibble n's top bit is set (the upper table half)
  const uint32_t half = 0x32103210u | ((raw & 0x88888888u) >> 1);
  const uint32_t r0 = __byte_perm(__byte_perm(t0, t1, raw), __byte_perm(t2, t3, raw), half);  // A0 B0 A1 B1
  const uint32_t hi = raw >> 16;
  const uint32_t r1 = __byte_perm(__byte_perm(t0, t1, hi), __byte_perm(t2, t3, hi), half >> 16);  // A2 B2 A3 B3
  a = __byte_perm(r0, r1, 0x6420);
  b = __byte_perm(r0, r1, 0x7531);
}

// The chunk's codes u as eight words of four bytes (word j: elements 4j .. 4j + 3), u < 64 so
// every byte reads the same as a signed or an unsigned dp4a operand; Q8_0 and IQ4 words hold the
// signed values themselves (bias 0).
template <GType T>
__device__ __forceinline__ void decode_codes(const RawChunk<T>& r, uint32_t (&W)[8]) {
  constexpr GFormat F = gformat(T);
  if constexpr (F.iq4) {  // 4-bit indices, no high plane: word i gives W[i] and W[i + 4]
#pragma unroll
    for (int i = 0; i < 4; ++i) iq4_lookup8(r.lo[i], W[i], W[i + 4]);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint32_t v;
      if constexpr (F.lb == 4) v = (r.lo[j & 3] >> (j < 4 ? 0 : 4)) & 0x0F0F0F0Fu;
      else if constexpr (F.lb == 8) v = r.lo[j];
      else v = (r.lo[j & 1] >> (2 * (j >> 1))) & 0x03030303u;
      if constexpr (F.hb == 1) v |= ((r.hi[0] >> j) & 0x01010101u) << F.lb;
      if constexpr (F.hb == 2) v |= ((r.hi[j >> 2] >> (2 * (j & 3))) & 0x03030303u) << 4;
      W[j] = v;
    }
  }
}

// The chunk's element scales s and offsets o (w = s * (u - bias) + o), for elements 0..15 (s0,
// o0) and 16..31 (s1, o1), computed as ggml computes them (f32 products, no contraction).
struct ChunkScales {
  float s0, s1, o0, o1;
};

__device__ __forceinline__ float f16_lo(uint32_t v) { return __half2float(__ushort_as_half(uint16_t(v))); }
__device__ __forceinline__ float f16_hi(uint32_t v) { return __half2float(__ushort_as_half(uint16_t(v >> 16))); }

// A small integer as a float without the quarter-rate I2F: 0x4B000000 | u is the float 2^23 + u
// (u < 2^23), 0x4B400000 + v the float 1.5 * 2^23 + v (|v| < 2^22); one subtraction leaves the
// exact value.
__device__ __forceinline__ float u8_to_float(uint32_t u) {
  return __fsub_rn(__uint_as_float(0x4B000000u | u), 8388608.f);
}
__device__ __forceinline__ float s8_to_float(uint32_t byte) {
  return __fsub_rn(__int_as_float(0x4B400000 + int(int8_t(byte & 0xFF))), 12582912.f);
}

template <GType T>
__device__ __forceinline__ ChunkScales decode_scales(uint32_t rd, uint32_t rsc) {
  constexpr GFormat F = gformat(T);
  ChunkScales s{0.f, 0.f, 0.f, 0.f};
  const float d = f16_lo(rd);
  if constexpr (F.sk == GScale::Single) {
    s.s0 = s.s1 = d;
  } else if constexpr (F.sk == GScale::Affine) {
    s.s0 = s.s1 = d;
    s.o0 = s.o1 = f16_hi(rd);
  } else if constexpr (F.sk == GScale::K4) {
    const float dm = f16_hi(rd);
    s.s0 = s.s1 = __fmul_rn(d, u8_to_float(rsc & 0xFF));
    s.o0 = s.o1 = -__fmul_rn(dm, u8_to_float(rsc >> 8));
  } else if constexpr (F.sk == GScale::Q2K) {
    const float dm = f16_hi(rd);
    s.s0 = __fmul_rn(d, u8_to_float(rsc & 0xF));
    s.o0 = -__fmul_rn(dm, u8_to_float((rsc >> 4) & 0xF));
    s.s1 = __fmul_rn(d, u8_to_float((rsc >> 8) & 0xF));
    s.o1 = -__fmul_rn(dm, u8_to_float((rsc >> 12) & 0xF));
  } else if constexpr (F.sk == GScale::S16) {
    s.s0 = __fmul_rn(d, s8_to_float(rsc));
    s.s1 = __fmul_rn(d, s8_to_float(rsc >> 8));
  } else {  // S32
    s.s0 = s.s1 = __fmul_rn(d, s8_to_float(rsc));
  }
  return s;
}
template <GType T>
__device__ __forceinline__ ChunkScales decode_scales(const RawChunk<T>& r) {
  return decode_scales<T>(r.d, r.sc);
}

// The four element values w = s * float(u - bias) + o of code word `w` (byte i: element i), with
// ggml's f32 operations, unfused, so that every kernel that decodes to floats (the dequantizer,
// the dequantizing tensor-core kernel) gives the same bits. float(u - bias) without the
// quarter-rate I2F: the bits 0x4B000000 | u are the float 2^23 + u (one byte permute), and one
// subtraction of 2^23 + bias leaves the exact small integer. Signed planes (Q8_0, IQ4) are
// biased by 128 first.
template <GType T>
__device__ __forceinline__ void word_values(uint32_t w, float s, float o, float (&v)[4]) {
  constexpr GFormat F = gformat(T);
  constexpr bool kSigned = F.lb == 8 || F.iq4;
  constexpr float kMagic = 8388608.f + float(kSigned ? 128 : F.bias);
  const uint32_t u4 = kSigned ? w ^ 0x80808080u : w;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float q = __fsub_rn(__uint_as_float(0x4B000000u | ((u4 >> (8 * i)) & 0xFFu)), kMagic);
    v[i] = __fmul_rn(s, q);
    if constexpr (F.has_min()) v[i] = __fadd_rn(v[i], o);
  }
}

// The two code words a thread of an mma.sync fragment needs from chunk c of a row: words t and
// t + 4 (elements 4t .. 4t + 3 and 16 + 4t .. 16 + 4t + 3), with the low and high planes' bytes
// they come from and the chunk's scale fields.
template <GType T>
struct RawPair {
  static constexpr GFormat F = gformat(T);
  uint32_t lo[F.lb == 8 ? 2 : 1];
  uint32_t hi[F.hb > 0 ? F.hb : 1];
  uint32_t d, sc;
};

template <GType T, typename Ld = LdgLoad>
__device__ __forceinline__ void load_pair(const GPlanes& w, int64_t row, int64_t c, int t,
                                          RawPair<T>& r, Ld ld = {}) {
  constexpr GFormat F = gformat(T);
  const uint8_t* lo = w.lo + row * w.lo_pitch + c * F.lo_chunk();
  const unsigned int* lw = reinterpret_cast<const unsigned int*>(lo);
  if constexpr (F.lb == 4) {
    r.lo[0] = ld(lw + t);  // low nibbles: word t, high nibbles: word t + 4
  } else if constexpr (F.lb == 8) {
    r.lo[0] = ld(lw + t);
    r.lo[1] = ld(lw + t + 4);
  } else {
    r.lo[0] = ld(lw + (t & 1));  // words t and t + 4 share the byte group t & 1
  }
  const unsigned int* hw = reinterpret_cast<const unsigned int*>(w.hi + row * w.hi_pitch + c * F.hi_chunk());
  if constexpr (F.hb == 1) r.hi[0] = ld(hw);
  if constexpr (F.hb == 2) {
    r.hi[0] = ld(hw);
    r.hi[1] = ld(hw + 1);
  }
  load_scales<T>(w, row, c, r.d, r.sc, ld);
}

// Words t and t + 4 of the chunk (decode_codes' W[t] and W[t + 4]).
template <GType T>
__device__ __forceinline__ void decode_pair(const RawPair<T>& r, int t, uint32_t& w0, uint32_t& w1) {
  constexpr GFormat F = gformat(T);
  if constexpr (F.iq4) {
    iq4_lookup8(r.lo[0], w0, w1);
    return;
  }
  if constexpr (F.lb == 4) {
    w0 = r.lo[0] & 0x0F0F0F0Fu;
    w1 = (r.lo[0] >> 4) & 0x0F0F0F0Fu;
  } else if constexpr (F.lb == 8) {
    w0 = r.lo[0];
    w1 = r.lo[1];
  } else {
    const int sh = 2 * (t >> 1);
    w0 = (r.lo[0] >> sh) & 0x03030303u;
    w1 = (r.lo[0] >> (sh + 4)) & 0x03030303u;
  }
  if constexpr (F.hb == 1) {
    w0 |= ((r.hi[0] >> t) & 0x01010101u) << F.lb;
    w1 |= ((r.hi[0] >> (t + 4)) & 0x01010101u) << F.lb;
  }
  if constexpr (F.hb == 2) {
    w0 |= ((r.hi[0] >> (2 * t)) & 0x03030303u) << 4;
    w1 |= ((r.hi[1] >> (2 * t)) & 0x03030303u) << 4;
  }
}

}  // namespace mixq::cuda::ggml
