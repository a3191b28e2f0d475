// Internal: where a weight's K columns sit in a kernel K axis whose scale groups are aligned,
// power-of-two runs from column 0 (the CUDA weight-only layout, cuda/kernels/common/wo_layout.hpp).
//
// A plain weight maps one to one. A tensor-parallel shard whose split cut a group
// (docs/decisions/tensor-parallel-shards.md) does not: its first group holds block_k - k_phase
// columns, or, for act-order row shards, every listed block holds any number of columns. Such a
// shard is laid into the kernel axis so that each of its blocks starts on a kernel group:
//   - k_phase p: the kernel axis starts p columns before the shard (K + p columns), kernel column
//     j is the shard's column j - p, and the kernel reads X[:, j - p] with zeros left of X (no
//     gather: the activations are read in place);
//   - listed blocks (k_block_starts): kernel groups of a power of two gv >= 16 chosen for the
//     fewest bytes, each block taking ceil(len / gv) of them and its last one padded with holes;
//     the kernel gathers X through a column table whose holes read zero.
// A hole's code is 0 and its activation is 0, so it adds nothing; every real column keeps its
// block's scale pair, so every element dequantizes to the global weight's bits.
#pragma once

#include <cstdint>
#include <vector>

#include "mixq/quantized_weight.hpp"

namespace mixq {

struct KernelKLayout {
  int64_t K = 0;              // kernel columns
  int group_shift = 30;       // log2 of the kernel group; 30: one group per row
  int64_t x_shift = 0;        // kernel column j reads X[:, j - x_shift] (zero for j < x_shift)
  // Non-empty for listed blocks: canonical column of kernel column j ([K], -1: a hole) and
  // canonical K block of kernel group g ([groups]).
  std::vector<int32_t> canon_col;
  std::vector<int32_t> group_block;
  // Non-empty when the kernel gathers X: X column of kernel column j ([K], -1: zero). The weight's
  // act-order permutation composed with the layout.
  std::vector<int32_t> x_col;

  bool identity() const { return x_shift == 0 && canon_col.empty(); }
  int64_t group() const { return int64_t(1) << group_shift; }
  // canonical column of kernel column j, -1 for a hole (0 <= j < K)
  int64_t canonical(int64_t j) const {
    if (!canon_col.empty()) return canon_col[size_t(j)];
    return j - x_shift;
  }
  // canonical K block of kernel group g (may be past the weight's blocks: kernel padding)
  int64_t block_of_group(int64_t g) const {
    if (!group_block.empty()) return g < int64_t(group_block.size()) ? group_block[size_t(g)] : int64_t(1) << 40;
    return g;
  }
};

// The layout for w, for a kernel whose groups are powers of two of at least min_group columns.
// Throws Unsupported when a plain or phased weight's block_k is not such a power of two (and does
// not cover the row), naming block_k and K.
KernelKLayout kernel_k_layout(const QuantizedWeight& w, int64_t min_group);

// The weight's codes rewritten over the kernel axis ([N][layout.K], the weight's code type; holes
// hold code 0). Only for a non-identity layout.
std::vector<uint8_t> codes_in_kernel_layout(const QuantizedWeight& w, const KernelKLayout& layout);

}  // namespace mixq
