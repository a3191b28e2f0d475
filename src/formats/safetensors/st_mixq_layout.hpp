// Internal: mixq's own safetensors layout (see save_mixq_safetensors in checkpoint.hpp).
#pragma once

#include <string>
#include <vector>

#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/safetensors_checkpoint.hpp"

namespace mixq::formats {

constexpr const char* kMixqFormatKey = "mixq.format";
constexpr const char* kMixqWeightPrefix = "mixq.weight.";

// Names of the weights the file's metadata describes (empty when it is not a mixq file).
std::vector<std::string> mixq_weight_names(const SafetensorsCheckpoint& f);
// Tensor names that belong to weight `name` (codes, scales, zeros, k_perm), present or not.
std::vector<std::string> mixq_weight_parts(const std::string& name);
QuantizedWeight mixq_load(const SafetensorsCheckpoint& f, const std::string& name);
// The geometry fields (N, K, types, blocks, zero form, origin) from the metadata; no data.
QuantizedWeight mixq_geometry(const SafetensorsCheckpoint& f, const std::string& name);
// Rows [n0, n1) only (n0 on a block_n boundary, n1 too or = N): copies just those rows' codes
// and scale / zero rows out of the mapping (tensor-parallel column shards, load_shard).
QuantizedWeight mixq_load_rows(const SafetensorsCheckpoint& f, const std::string& name,
                               int64_t n0, int64_t n1);
// The whole weight with only the codes of columns [k0, k1) read (the rest left 0), for a
// row-parallel shard cut out of it; scales and zeros whole (small). Needs no k_perm.
QuantizedWeight mixq_load_cols(const SafetensorsCheckpoint& f, const std::string& name, int64_t k0,
                               int64_t k1);
TensorEntry mixq_entry(const SafetensorsCheckpoint& f, const std::string& name);

}  // namespace mixq::formats
