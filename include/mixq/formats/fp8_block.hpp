// FP8 block checkpoints (DeepSeek-V3 / HF "fp8"; formats.md §5.1):
//   weight            F8_E4M3 [N, K]
//   weight_scale_inv  F32     [ceil(N/bn), ceil(K/bk)]   (bn = bk = 128 by default)
// W[n][k] = e4m3(weight[n][k]) * weight_scale_inv[n / bn][k / bk]   ("inv" is a misnomer: it
// multiplies). Converts to canonical F8E4M3 codes, F32 scales, ZeroKind::None.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixq/quantized_weight.hpp"

namespace mixq::formats {

struct Fp8BlockPacked {
  int64_t N = 0, K = 0;
  int64_t block_n = 128, block_k = 128;
  std::vector<uint8_t> weight;   // [N][K] e4m3 bytes
  std::vector<float> scale_inv;  // [ceil(N/bn)][ceil(K/bk)]
};

struct Fp8BlockView {
  int64_t N = 0, K = 0;
  int64_t block_n = 128, block_k = 128;
  const void* weight = nullptr;     // may be unaligned
  const void* scale_inv = nullptr;  // little-endian f32, may be unaligned
};

// block_k is stored as min(bk, K) and block_n as bn (canonical validation wants block_k <= K;
// the blocking is the same).
QuantizedWeight fp8_block_to_quantized(const Fp8BlockView& v, const std::string& what);
// The reverse: needs F8E4M3 codes, F32 scales, ZeroKind::None, no k_perm.
Fp8BlockPacked fp8_block_pack(const QuantizedWeight& w);
Fp8BlockView fp8_block_view(const Fp8BlockPacked& p);

}  // namespace mixq::formats
