// The weights that FP8 block activations (act = fp8-block: E4M3 codes with one scale per 128-wide
// block of a row) multiply, each 128-wide activation block against one weight K block:
// - e4m3 codes in 128 x 128 (DeepSeek-style) or 1 x 128 blocks of f32 scales;
// - W4A8: 4-bit integer codes with per-row groups of 128 along K, symmetric or with integer zero
//   points. Every q - z lies in [-15, 15], exact in e4m3, so an FP8 tensor core can multiply the
//   integers themselves, the group's scale applied to the block's sum (as the e4m3 block scale is).
//   An offset form (s q + o) would add o times the block's activation sum: not taken.
#pragma once

#include "mixq/quantized_weight.hpp"

namespace mixq {

inline bool fp8_block_k(const QuantizedWeight& w) {
  // block_k == K < 128 is what quantize_weight gives a narrow K (one partial block)
  return w.block_k == 128 || (w.K < 128 && w.block_k == w.K);
}

// e4m3 codes with scales in 128-wide K blocks (any block_n, any scale type: the reference's form)
inline bool e4m3_k_blocks(const QuantizedWeight& w) {
  return w.code_type == DType::F8E4M3 && w.has_scales && fp8_block_k(w) &&
         w.zero_kind == ZeroKind::None && w.k_perm.empty();
}

// ... in 128 x 128 or 1 x 128 blocks of f32 scales: what prepare takes
inline bool fp8_block_weight(const QuantizedWeight& w) {
  return e4m3_k_blocks(w) && (w.block_n == 128 || w.block_n == 1) && w.scale_type == DType::F32;
}

inline bool w4a8_weight(const QuantizedWeight& w) {
  return (w.code_type == DType::I4 || w.code_type == DType::U4) && w.has_scales && fp8_block_k(w) &&
         w.block_n == 1 && (w.zero_kind == ZeroKind::None || w.zero_kind == ZeroKind::ZeroPoint) &&
         w.k_perm.empty();
}

}  // namespace mixq
