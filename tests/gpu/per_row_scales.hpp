// The float64 references take FP8 128x128 blocks from row 0; a column shard that starts inside a
// row block (n_phase) is handed to them as the same values with one scale row per weight row.
#pragma once

#include <cstring>

#include "mixq/quantized_weight.hpp"

namespace mixq::test {

inline QuantizedWeight with_row_scales(const QuantizedWeight& w) {
  if (w.n_phase == 0 || w.block_n == 1) return w;
  QuantizedWeight plain = w;
  const int64_t nbk = w.n_blocks_k(), eb = dtype_bytes(w.scale_type, 1);
  plain.block_n = 1;
  plain.n_phase = 0;
  plain.scales.assign(size_t(w.N * nbk * eb), 0);
  for (int64_t n = 0; n < w.N; ++n)
    std::memcpy(&plain.scales[size_t(n * nbk * eb)], &w.scales[size_t(w.n_block(n) * nbk * eb)],
                size_t(nbk * eb));
  return plain;
}

}  // namespace mixq::test
