// Register dequantization of the packed weight tiles (wo_layout.hpp) into the A operand of the
// Hopper register-A wgmma (sm90_wo_wgmma*.cu): w = s*u + o', rounded once to the MMA type.
// The per-warp register layout of wgmma's A is the mma.sync m16n8k16 A-fragment layout, so one
// packed 16x64 tile gives a warp the A registers of four k16 steps.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/kernels/common/mma_sm80.cuh"
#include "cuda/kernels/common/dequant_codes.cuh"
#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/common/sm90_pair_path.hpp"

namespace mixq::cuda::sm90 {

// Biased 16-bit f16 values (1024 + u) of fragment register i (0..3) of k16 step j (0..3), from the
// lane's code words w (4 words for int4, 8 for int8; order: kernels/dequant_codes.cuh).
template <int BITS>
__device__ __forceinline__ uint32_t biased_f16(const uint32_t* w, int j, int i) {
  if constexpr (BITS == 4) {
    return lop3<kLopAndOr>(w[j] >> (4 * i), 0x000F000Fu, 0x64006400u);
  } else {
    // int8: word 2j = (r,k) (r,k+1) (r+8,k) (r+8,k+1), word 2j+1 the same at k+8
    const uint32_t src = w[2 * j + (i >> 1)];
    return prmt(src, 0x64646464u, (i & 1) ? 0x4342u : 0x4140u);
  }
}

// pack2<T>(lo, hi): kernels/dequant_codes.cuh

// How the register-A kernels dequantize a k16 step (their PAIRS template parameter):
// - Half: f16 activations, pairs exact in f16: u = (1024 + u) - 1024 exactly on the f16x2 pipe,
//   then fma(u, s, o') rounded once.
// - Bf16Zero: bf16 activations, integer zero (o' = -zc s) and groups of >= 64, s rounded to bf16
//   (the scale precision of Marlin's and tinygemm's bf16 paths). int4: (128 + u) - (128 + zc) is
//   exact on the bf16x2 pipe (integers below 256), then times s: two bf16x2 instructions a register
//   where the f32 path takes six (two conversions, two FMAs, a pack). int8, where (128 - zc) s is
//   exact in bf16 (symmetric codes: 0): fma(u - 128, s, (128 - zc) s) on the exact u - 128 of
//   bf16x2_u8_minus_128, five instructions without a conversion.
// - F32: through f32 and one pack (float offsets, f32 pairs on f16, e4m3 codes with bf16, int8
//   codes with bf16 whose (128 - zc) s is not exact in bf16, groups below 64 with bf16).
// (PairPath: kernels/common/sm90_pair_path.hpp, shared with the planner.)

// (scale, offset) of one row for the dequantization of one k16 step, in the form the paths use:
// Half s2/o2 = half2(s, s) / half2(o', o'); Bf16Zero s2/o2 = bf162(s, s) / bf162(128 + zc) for
// int4, bf162((128 - zc) s) for int8 (from the packed word of WoStreamParams::pairs_gm_bz); F32 s
// and o' - 1024 s (the mantissa-trick bias folded in).
struct RowPair {
  uint32_t s2, o2;
  float s, o;
  float s16, o16;  // f32 path, int4 registers 1 and 3 (1024 + 16u): s / 16 and o' - 64 s
};

// The raw pair (s, o') at shared address a (float2, or half2 widened).
__device__ __forceinline__ float2 read_pair_raw(uint32_t a, bool pair_f32) {
  if (pair_f32) {
    const uint2 v = lds64(a);
    return make_float2(__uint_as_float(v.x), __uint_as_float(v.y));
  }
  const uint32_t v = lds32(a);
  return __half22float2(*reinterpret_cast<const __half2*>(&v));
}

// The integer zero zc of a pair with o' = -zc s (up to f32 rounding, |zc| <= 255: an approximate
// quotient rounds to zc exactly); 0 where s is 0.
__device__ __forceinline__ float integer_zero(float2 so) {
  return so.x != 0.f ? rintf(__fdividef(-so.y, so.x)) : 0.f;
}

// Reads the pair at shared address `a` (half2 on the Half path, else float2 or half2 by pair_f32).
template <PairPath PP>
__device__ __forceinline__ RowPair read_pair(uint32_t a, bool pair_f32) {
  RowPair r{};
  if constexpr (PP == PairPath::Half) {
    const uint32_t v = lds32(a);
    const __half2 pr = *reinterpret_cast<const __half2*>(&v);
    const __half2 sv = __low2half2(pr), ov = __high2half2(pr);
    r.s2 = *reinterpret_cast<const uint32_t*>(&sv);
    r.o2 = *reinterpret_cast<const uint32_t*>(&ov);
  } else if constexpr (PP == PairPath::Bf16Zero) {
    const uint32_t v = lds32(a);  // bf16 s | bf16 (128 + zc) or (128 - zc) s << 16: halves broadcast
    r.s2 = prmt(v, 0u, 0x1010u);
    r.o2 = prmt(v, 0u, 0x3232u);
  } else {
    const float2 f = read_pair_raw(a, pair_f32);
    r.s = f.x;
    r.o = fmaf(-1024.f, f.x, f.y);  // w = (1024 + u) s + (o' - 1024 s)
    r.s16 = f.x * 0.0625f;
    r.o16 = fmaf(-64.f, f.x, f.y);  // w = (1024 + 16u) s/16 + (o' - 64 s)
  }
  return r;
}

// Biased f16 value of register i of k16 step j for the register-A dequantization: int4 registers
// 1 and 3 are masked where their nibbles sit (bit 4 of each half: 1024 + 16u, exact), which saves
// the shifts of biased_f16 (one shift per word instead of three); int8 as biased_f16.
template <int BITS>
__device__ __forceinline__ uint32_t biased_f16_x16(const uint32_t* w, int j, int i) {
  if constexpr (BITS == 4) {
    const uint32_t src = (i & 2) ? (w[j] >> 8) : w[j];
    return lop3<kLopAndOr>(src, (i & 1) ? 0x00F000F0u : 0x000F000Fu, 0x64006400u);
  } else {
    return biased_f16<8>(w, j, i);
  }
}

// A registers of k16 step j: registers 0, 2 hold row r, 1, 3 row r + 8 (pairs p0, p8).
// CODES: 4 or 8 (unsigned integer codes), kCodesE4M3 (e4m3 bytes in the int8 byte order; their
// pairs are (s, 0) by the layout's contract, wo_layout.hpp).
// Half path (f16 activations, pairs exact in f16): u = (1024 + u) - 1024 exactly (or
// (1024 + 16u) / 16 - 64, exact; e4m3: the exact f16 value), then fma(u, s, o') rounded once on
// the f16x2 pipe; Bf16Zero: (128 + u) - (128 + zc) exactly, times s (one rounding). Otherwise
// through f32 and one pack.
template <typename T, int CODES, PairPath PP>
__device__ __forceinline__ void dequant_k16(const uint32_t* w, int j, const RowPair& p0,
                                            const RowPair& p8, uint32_t (&dst)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const RowPair& pr = (i & 1) ? p8 : p0;
    if constexpr (CODES == kCodesE4M3) {
      static_assert(PP != PairPath::Bf16Zero, "e4m3 codes take the Half or F32 path");
      const uint32_t v = e4m3x2_to_f16x2(w[2 * j + (i >> 1)] >> (16 * (i & 1)));
      if constexpr (PP == PairPath::Half) {
        const __half2 r = __hmul2(*reinterpret_cast<const __half2*>(&v), *reinterpret_cast<const __half2*>(&pr.s2));
        dst[i] = *reinterpret_cast<const uint32_t*>(&r);
      } else {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&v));
        dst[i] = pack2<T>(f.x * pr.s, f.y * pr.s);
      }
      continue;
    }
    if constexpr (PP == PairPath::Bf16Zero) {
      static_assert((CODES == 4 || CODES == 8) && std::is_same_v<T, __nv_bfloat16>,
                    "Bf16Zero: int4 / int8 codes, bf16 activations");
      const __nv_bfloat162 s2 = *reinterpret_cast<const __nv_bfloat162*>(&pr.s2);
      const __nv_bfloat162 o2 = *reinterpret_cast<const __nv_bfloat162*>(&pr.o2);
      if constexpr (CODES == 4) {
        const uint32_t v = lop3<kLopAndOr>(w[j] >> (4 * i), 0x000F000Fu, 0x43004300u);  // 128 + u
        const __nv_bfloat162 u = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&v), o2);
        const __nv_bfloat162 r = __hmul2(u, s2);
        dst[i] = *reinterpret_cast<const uint32_t*>(&r);
      } else {
        // (u - 128) s + (128 - zc) s, one rounding: the second term is exact (the pair's contract)
        const uint32_t v = bf16x2_u8_minus_128(w[2 * j + (i >> 1)], (i & 1) ? 0x4342u : 0x4140u);
        const __nv_bfloat162 r = __hfma2(*reinterpret_cast<const __nv_bfloat162*>(&v), s2, o2);
        dst[i] = *reinterpret_cast<const uint32_t*>(&r);
      }
      continue;
    }
    const bool x16 = CODES == 4 && (i & 1);  // the value is 1024 + 16u
    const uint32_t v = biased_f16_x16<CODES>(w, j, i);
    if constexpr (PP == PairPath::Half) {
      const __half2 hv = *reinterpret_cast<const __half2*>(&v);
      const __half2 u = x16 ? __hfma2(hv, __half2half2(__ushort_as_half(0x2C00)),   // 1/16
                                      __half2half2(__ushort_as_half(0xD400)))       // -64
                            : __hsub2(hv, __half2half2(__ushort_as_half(0x6400)));  // 1024
      const __half2 r = __hfma2(u, *reinterpret_cast<const __half2*>(&pr.s2),
                                *reinterpret_cast<const __half2*>(&pr.o2));
      dst[i] = *reinterpret_cast<const uint32_t*>(&r);
    } else {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&v));
      const float s = x16 ? pr.s16 : pr.s, o = x16 ? pr.o16 : pr.o;
      dst[i] = pack2<T>(fmaf(f.x, s, o), fmaf(f.y, s, o));
    }
  }
}

// ---- scale after the MMA ("fold"): for weights whose group covers the whole stage and whose
// offset is an integer zero (o' = -zc s), the A operand is the exact integer u - zc (or the exact
// e4m3 value), the stage's MMAs go to their own accumulators, and s is applied to those sums in
// f32 once per stage. This drops the f32 round trip of the bf16 / f32-pair paths (about six
// instructions per register down to two or three) and applies the scale in f32.

// Per-row constants of a folded stage: the f32 scale applied to the stage sums (s, or s / 16 for
// f16 int4 registers 1 and 3, which carry 16 (u - zc)) and the 16-bit value subtracted from the
// biased codes (T's bias + zc, f16 int4 odd rows 1024 + 16 zc; e4m3: unused); W4A8: the pair's
// offset o, from which a fold that takes the zero point off itself derives zc (integer_zero) only
// when it needs it (a fold whose zero point is in the activation factors does not).
struct FoldRow {
  float scale;
  uint32_t sub2;
  float off;
};
template <typename T, int CODES>
__device__ __forceinline__ FoldRow fold_row(float2 so, bool odd_rows) {
  FoldRow r{};
  const bool x16 = CODES == 4 && std::is_same_v<T, half> && odd_rows;
  r.scale = x16 ? so.x * 0.0625f : so.x;
  if constexpr (CODES == kCodesU4F8) {
    r.off = so.y;
    return r;
  }
  const float zc = integer_zero(so);
  if constexpr (std::is_same_v<T, half>) {
    const __half h = __float2half_rn(x16 ? 1024.f + 16.f * zc : 1024.f + zc);  // exact: < 2048
    r.sub2 = uint32_t(__half_as_ushort(h)) * 0x10001u;
  } else {
    const __nv_bfloat16 b = __float2bfloat16_rn(128.f + zc);  // int4: 128 + zc < 256, exact
    r.sub2 = uint32_t(__bfloat16_as_ushort(b)) * 0x10001u;
  }
  return r;
}

// A registers of k16 step j in fold mode (rows r: f0, rows r + 8: f8).
template <typename T, int CODES>
__device__ __forceinline__ void fold_codes_k16(const uint32_t* w, int j, const FoldRow& f0, const FoldRow& f8,
                                               uint32_t (&dst)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const FoldRow& fr = (i & 1) ? f8 : f0;
    if constexpr (CODES == kCodesE4M3) {
      static_assert(std::is_same_v<T, half>, "e4m3 fold: f16 activations (bf16 keeps the f32 path)");
      dst[i] = e4m3x2_to_f16x2(w[2 * j + (i >> 1)] >> (16 * (i & 1)));
    } else if constexpr (std::is_same_v<T, half>) {
      const uint32_t v = biased_f16_x16<CODES>(w, j, i);  // 1024 + u (int4 odd: 1024 + 16u)
      const __half2 r = __hsub2(*reinterpret_cast<const __half2*>(&v), *reinterpret_cast<const __half2*>(&fr.sub2));
      dst[i] = *reinterpret_cast<const uint32_t*>(&r);
    } else {
      static_assert(CODES == 4, "bf16 fold: int4 codes only (int8 does not fit under a bf16 bias)");
      const uint32_t v = lop3<kLopAndOr>(w[j] >> (4 * i), 0x000F000Fu, 0x43004300u);  // 128 + u
      const __nv_bfloat162 r =
          __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&v), *reinterpret_cast<const __nv_bfloat162*>(&fr.sub2));
      dst[i] = *reinterpret_cast<const uint32_t*>(&r);
    }
  }
}

// ---- W4A8 (kCodesU4F8): the fold's A operand for the e4m3 MMA. The byte of a 4-bit code u
// (0000uuuu) read as e4m3 is exactly u * 2^-9: u < 8 is the subnormal u/8 * 2^-6, u >= 8 the
// normal (1 + (u - 8)/8) * 2^-6. So the A registers are the code nibbles spread to bytes, one
// lop3 per four codes, with no conversion instruction (the f16 -> e4m3 conversion it replaces ran
// at a quarter of the ALU rate and took as many cycles as the MMAs). The MMA sums u * a * 2^-9;
// the fold scales them by 512 s_a and takes zc s_a * sum(a) off (the activation factors of the
// stage, act_quant.hpp), then applies the row scale.

// A registers of k32 step jj of a 64-K chunk (code words w in the kCodesU4F8 order, wo_repack.cu):
// register i holds rows r (i even) or r + 8 (i odd), bytes b = 0..3 at columns 16 (i / 2) + 4 t + b
// of the step; word 2 jj + i / 2 carries byte b of row r in nibble slot 2 b and of row r + 8 in
// slot 2 b + 1, so one mask (after a 4-bit shift for r + 8) spreads the four codes to the bytes.
__device__ __forceinline__ void u4_bytes_k32(const uint32_t* w, int jj, uint32_t (&dst)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    dst[i] = (w[2 * jj + (i >> 1)] >> (4 * (i & 1))) & 0x0F0F0F0Fu;
    // pinned here: left to ptxas, the masks sank next to the wgmma that reads them and it
    // serialized every wgmma of the kernel behind an inserted warpgroup arrive (C7520)
    asm volatile("" : "+r"(dst[i])::"memory");
  }
}

}  // namespace mixq::cuda::sm90
