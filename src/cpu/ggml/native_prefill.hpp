// The integer tiles over a DecodedChunk (NativeKernels::i8_tile_decoded), one per kernel set:
// type independent, since the chunk holds plain biased u8 codes and f32 scales.
#pragma once

#include "cpu/ggml/native_kernels.hpp"

namespace mixq::cpu::ggml {

void i8_tile_decoded_avx512(const I8TileArgs& a, const DecodedChunk* d, int panels);
// Bias-128 types (Q8_0, IQ4_NL, IQ4_XS) expect their codes decoded as signed values (u ^ 0x80).
void i8_tile_decoded_avx2(const I8TileArgs& a, const DecodedChunk* d, int panels);

}  // namespace mixq::cpu::ggml
