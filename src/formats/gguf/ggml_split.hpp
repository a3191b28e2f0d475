// One GGUF block split into its parts, in the element order ggml's dequantizer gives them:
// unsigned codes u (value = u - bias of the type: native formats of the CPU and CUDA backends),
// the integer sub-block scales / mins and the raw f16 scale bits. Prepare-time code shared by the
// backends that repack GGUF tensors at their native width (src/cpu/ggml/, src/cuda/backend/).
#pragma once

#include <cstdint>

#include "mixq/formats/ggml_blocks.hpp"

namespace mixq::formats {

struct GgmlSplitBlock {
  uint8_t u[256];  // codes, natural element order (Q8_0: q ^ 0x80; IQ4: the codebook index)
  uint8_t sc[16];  // per sub-block (K4: sc, Signed8: s8 bits, Q2K: ggml's packed byte)
  uint8_t mn[16];  // K4 mins
  uint8_t q3[12];  // Q3K: the block's own 12 scale bytes
  uint16_t d = 0, dm = 0;
};

// Splits the block at b of type t (one of the twelve block types the native kernels read).
void split_ggml_block(GgmlType t, const uint8_t* b, GgmlSplitBlock& s);

// Q3_K's signed 6-bit scale j (0..15) from the block's 12 scale bytes: ggml's value - 32.
inline int q3k_scale(const uint8_t* q3, int j) {
  const int low4 = j < 8 ? (q3[j] & 0xF) : (q3[j - 8] >> 4);
  const int high2 = (q3[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low4 | (high2 << 4)) - 32;
}

}  // namespace mixq::formats
