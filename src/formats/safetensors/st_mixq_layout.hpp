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
TensorEntry mixq_entry(const SafetensorsCheckpoint& f, const std::string& name);

}  // namespace mixq::formats
