// GPTQ checkpoints (AutoGPTQ / GPTQModel; formats.md §3): pack / unpack / convert.
//
//   qweight I32 [ceil(K*b/32), N]   codes packed along K (lowest k in the lowest bits; 3-bit codes
//                                   form a dense bitstream that straddles words)
//   qzeros  I32 [G, ceil(N*b/32)]   zero points packed along N the same way; v1 stores z - 1
//   scales  F16 [G, N]              (or the model dtype: BF16 / F32)
//   g_idx   I32 [K]                 group of each input channel (act-order when non-trivial)
#pragma once

#include <cstdint>
#include <vector>

#include "mixq/formats/grouped_int.hpp"

namespace mixq::formats {

enum class GptqVersion { V1, V2 };  // V1: checkpoint_format "gptq" (z - 1 stored); V2: "gptq_v2"

struct GptqPacked {
  int bits = 4;
  int64_t K = 0, N = 0, G = 0;
  std::vector<int32_t> qweight;  // [ceil(K*b/32)][N]
  std::vector<int32_t> qzeros;   // [G][ceil(N*b/32)]
  DType scale_type = DType::F16;
  std::vector<uint8_t> scales;  // [G][N] raw little-endian scale_type
  std::vector<int32_t> g_idx;   // [K]
};

// Raw arrays as found in a file (pointers may be unaligned; g_idx may be null).
struct GptqPackedView {
  int bits = 4;
  int64_t K = 0, N = 0, G = 0;
  const void* qweight = nullptr;
  const void* qzeros = nullptr;
  DType scale_type = DType::F16;
  const void* scales = nullptr;
  const void* g_idx = nullptr;
};

inline int64_t gptq_qweight_rows(int64_t K, int bits) {
  return (K * bits + 31) / 32;
}
inline int64_t gptq_qzeros_cols(int64_t N, int bits) {
  return (N * bits + 31) / 32;
}

// Packs codes, zeros, scales and g_idx (written as k / group_size when w.g_idx is empty).
// V1 needs every zero >= 1 (a stored -1 would corrupt the word, formats.md §3.3).
GptqPacked gptq_pack(const GroupedIntWeight& w, GptqVersion version);
GptqPackedView gptq_view(const GptqPacked& p);

// Unpacks; v1 zeros become stored + 1 (no mask, as GPTQ's kernels do: a stored 2^b - 1 reads as
// 2^b). group_size as in GroupedIntWeight (0: infer). `what` names file/tensor in errors.
GroupedIntWeight gptq_unpack(const GptqPackedView& v, GptqVersion version, int64_t group_size,
                             const std::string& what);

}  // namespace mixq::formats
