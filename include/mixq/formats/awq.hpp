// AWQ GEMM checkpoints (AutoAWQ "version": "gemm"; formats.md §4.1): pack / unpack.
//
//   qweight I32 [K, ceil(N/8)]   packed along N: nibble i of word c holds column 8c + ORDER[i],
//                                ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
//   qzeros  I32 [G, ceil(N/8)]   same packing, zero stored as is (no +-1)
//   scales  F16 [G, N]
// W[n][k] = (q - z) * s, 4-bit only, asymmetric.
#pragma once

#include <cstdint>
#include <vector>

#include "mixq/formats/grouped_int.hpp"

namespace mixq::formats {

struct AwqPacked {
  int64_t K = 0, N = 0, G = 0;
  std::vector<int32_t> qweight;  // [K][ceil(N/8)]
  std::vector<int32_t> qzeros;   // [G][ceil(N/8)]
  DType scale_type = DType::F16;
  std::vector<uint8_t> scales;  // [G][N] raw scale_type
};

struct AwqPackedView {
  int64_t K = 0, N = 0, G = 0;
  const void* qweight = nullptr;
  const void* qzeros = nullptr;
  DType scale_type = DType::F16;
  const void* scales = nullptr;
};

// Nibble of a word that holds column 8c + j (the inverse of ORDER).
int awq_nibble_of_column(int j);

AwqPacked awq_pack(const GroupedIntWeight& w);  // bits 4, no g_idx, zeros in [0, 15]
AwqPackedView awq_view(const AwqPacked& p);
GroupedIntWeight awq_unpack(const AwqPackedView& v, int64_t group_size, const std::string& what);

}  // namespace mixq::formats
