// Tensor-parallel shards of a canonical weight (docs/decisions/tensor-parallel-shards.md).
//
//   ShardSpec spec{rank, world, ShardAxis::Column};   // split N (output features)
//   QuantizedWeight local = mixq::shard(global, spec);
//
// Column-parallel: rank r holds output rows shard_range(N, spec); its outputs are columns of Y,
// and the ranks' outputs concatenated along N are the global Y.
// Row-parallel: rank r holds original K columns shard_range(K, spec) (original order: the
// columns of X this rank receives); Y is the sum of the ranks' outputs (so a bias or clamp
// belongs after the sum, or the bias on one rank only). For an act-order weight
// the shard keeps the canonical columns whose original column falls in the range, in canonical
// order, with k_perm renumbered into the local X slice: no rank permutes the global X.
//
// Any split is taken: a cut through a quantization group or an FP8 128x128 block keeps that
// block's scale (and zero) whole and records where the shard starts in it (k_phase / n_phase, or
// k_block_starts for act-order), so every element dequantizes to the global weight's bits.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "mixq/quantized_weight.hpp"

namespace mixq {

enum class ShardAxis : uint8_t {
  Column,  // split N: concatenate outputs
  Row,     // split K: sum outputs
};
const char* shard_axis_name(ShardAxis a);

struct ShardSpec {
  int64_t rank = 0;
  int64_t world = 1;
  ShardAxis axis = ShardAxis::Column;
  // Split points fall on multiples of this many elements (1: anywhere). With granularity g the
  // dim is cut into ceil(dim / g) units, balanced over the ranks like any dim (the last unit may
  // be short). E.g. g = 128 keeps FP8 blocks or groups whole when the dim allows it.
  int64_t granularity = 1;
};

// [begin, end) of `dim` held by spec.rank: balanced contiguous ranges, the first
// (units % world) ranks holding one unit more. Throws when a rank would get nothing (world
// larger than the number of units), or on a bad rank / world / granularity.
std::pair<int64_t, int64_t> shard_range(int64_t dim, const ShardSpec& spec);

// The canonical weight of one shard (validated). The GGUF native blocks (QuantizedWeight::ggml)
// are sliced along when the split allows it (rows; K on the type's block boundaries), else
// dropped (the canonical fields describe the same values).
QuantizedWeight shard(const QuantizedWeight& w, const ShardSpec& spec);

// Checks that `shards` are the complete set of one split of one weight: same world and axis in
// every spec, each rank 0..world-1 exactly once (shards[i] is rank specs[i].rank), and every
// shard of the same scheme (code type, blocks, scale type, zero form, act-order) with the
// non-split dim equal. Throws InvalidArgument naming the first mismatch.
void check_shard_set(const std::vector<QuantizedWeight>& shards,
                     const std::vector<ShardSpec>& specs);

}  // namespace mixq
