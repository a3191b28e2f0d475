// The integer tiles over a DecodedChunk (NativeKernels::i8_tile_decoded), one per kernel set:
// type independent, since the chunk holds plain biased u8 codes and f32 scales.
#pragma once

#include "cpu/ggml/native_kernels.hpp"

namespace mixq::cpu::ggml {

void i8_tile_decoded_avx512(const I8TileArgs& a, const DecodedChunk* d, int panels);
// (the avx2 and avx2vnni sets compile theirs from native_prefill_avx2_body.hpp)

}  // namespace mixq::cpu::ggml
