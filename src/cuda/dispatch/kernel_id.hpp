// KernelId: which kernel instantiation a plan runs, shared by every CUDA kernel family (weight-only,
// INT8 W8A8, FP8 block), with one naming scheme:
//   <family>[<template arguments>]
// where <family> is what PrepareOptions::force_kernel / MIXQ_FORCE_KERNEL accept (e.g.
// "sm90_wo_ws", "sm80_wo_stream", "wo_dequant_cublas", "sm90_i8_128x128", "sm90_fp8_skinny_mt16")
// and the bracket lists the compile-time parameters that single out one instantiation of it,
// e.g. "sm90_wo_ws<bf16,u4,mt32,cta2,pairs=bf16zero>" or "sm90_i8_128x128<g64,offset>".
// PreparedWeight::kernel_name(M) prints this.
#pragma once

#include <cstdint>
#include <string>

namespace mixq::cuda {

enum class Family : uint8_t {
  // weight-only (ActQuant::None)
  WoStream,         // sm80_wo_stream: mma.sync weight streaming, few tokens
  WoWgmma,          // sm90_wo_ws: warp-specialized TMA + wgmma, register-A dequantization
  WoDequantCublas,  // wo_dequant_cublas: dequantize chunks of W, cuBLAS GEMM
  // INT8 x INT8 (ActQuant::Int8Block / Int8PerTensor)
  I8Sm80Small,      // sm80_i8_16x32
  I8Sm80Medium,     // sm80_i8_64x64
  I8Sm80Large,      // sm80_i8_128x128
  I8Sm90,           // sm90_i8_128x128
  I8Sm90Pair,       // sm90_i8_128x128_c2
  I8Sm90Tall,       // sm90_i8_256x64
  I8Skinny,         // sm90_i8_skinny_mt<T>
  // FP8 block (ActQuant::Fp8Block)
  Fp8Gemm,          // sm90_fp8_block_gemm_bm128_bn<B>_s<S>[_c2]
  Fp8Skinny,        // sm90_fp8_block_skinny_mt<T>
};

// Weight-only pair paths of the wgmma kernel (sm90::PairPath, in the same order).
enum class PairKind : uint8_t { F32, Half, Bf16Zero };

struct KernelId {
  Family family = Family::WoStream;
  uint8_t act = 0;      // weight-only: activation type (IoType: 0 f16, 1 bf16, 2 f32; 3 e4m3: W4A8)
  uint8_t codes = 0;    // weight-only: 4, 8, kCodesE4M3 or kCodesU4F8; W8A8: the K block (64, 128)
  uint16_t tile_m = 0;  // token tile (weight-only, skinny kernels); FP8 GEMM: 256 for 256-row tiles
  uint16_t tile_n = 0;  // weight rows per CTA tile (FP8 GEMM: 128 or 192)
  uint8_t ctas = 1;     // CTAs per SM (wgmma kernel) or per cluster (CTA pairs)
  PairKind pairs = PairKind::F32;
  bool fold = false;    // wgmma kernel: scale after the MMA
  bool wide = false;    // wgmma kernel at token tile 128: 128-K stages (WsShape::OneCtaWide)
  bool fine = false;    // streaming kernel: groups shorter than a chunk
  bool offset = false;  // W8A8: weights with offsets (the four-term formula's extra terms)
  bool tensor = false;  // INT8 per-tensor mode (requantized output)

  // The family's name (what force_kernel matches) and the full instantiation name.
  const char* family_name() const;
  std::string name() const;
  bool operator==(const KernelId& o) const;
};

}  // namespace mixq::cuda
