// MNN int4 weight storage for (1x1 or kxk) convolutions and linear layers (formats.md §7).
//
// Codes: the [Co][Ci][Kh][Kw] weights as one 4-bit bitstream over the whole tensor, two per byte,
// HIGH nibble first (a byte may straddle two output channels when Ci*Kh*Kw is odd); q = nibble - 8.
// Scales per (output channel, block) along the flattened [Ci, Kh, Kw] axis, block = B*Kh*Kw:
//   symmetric:  alpha[oc * nb + b] = scale                      w = q * scale
//   asymmetric: alpha[2i] = min, alpha[2i + 1] = scale          w = q * scale + offset,
//               offset = min + 8 * scale (MNN's load-time conversion, §7.3), in f32.
#pragma once

#include <cstdint>
#include <vector>

#include "mixq/ops.hpp"

namespace mixq::formats {

struct MnnInt4Weight {
  int64_t Co = 0, Ci = 0, Kh = 1, Kw = 1;
  int64_t blocks_per_channel = 1;  // nb; 1 = one scale per output channel
  bool asymmetric = false;
  std::vector<uint8_t> packed;  // ceil(Co*Ci*Kh*Kw / 2) bytes
  std::vector<float> alpha;     // Co*nb (sym) or 2*Co*nb (asym) entries
};

// Decodes the nibble pair of one byte: {first element, second element} as q = nibble - 8.
inline void mnn_int4_byte(uint8_t b, int* first, int* second) {
  *first = (b >> 4) - 8;
  *second = (b & 0xF) - 8;
}

// To ConvWeight (ConvKOrder::CiKhKw, I4 codes, F32 scales, ZeroKind::None when symmetric,
// Offset when asymmetric). Throws mixq::Error(Format) on inconsistent sizes, blocks that do not
// divide Ci, non-finite alpha.
ConvWeight mnn_int4_to_conv_weight(const MnnInt4Weight& m);
// The reverse packer (for tests and tools): needs CiKhKw order, I4 codes, F32 scales, None or
// Offset. Offsets are written back as min = offset - 8 * scale.
MnnInt4Weight mnn_int4_pack(const ConvWeight& w);

}  // namespace mixq::formats
