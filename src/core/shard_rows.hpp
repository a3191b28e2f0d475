// Internal: the cuts of shard() on an explicit row or column range, for loaders that read a
// block-aligned run of rows or columns from a file and cut the shard out of it
// (formats::load_shard).
#pragma once

#include <cstdint>

#include "mixq/quantized_weight.hpp"

namespace mixq::detail {

// Rows [b, e) of w as shard() would give them (without the provenance suffix), validated.
QuantizedWeight shard_row_range(const QuantizedWeight& w, int64_t b, int64_t e);
// Original columns [b, e) of w as a row-parallel shard() would give them (without the
// provenance suffix), validated.
QuantizedWeight shard_col_range(const QuantizedWeight& w, int64_t b, int64_t e);

}  // namespace mixq::detail
