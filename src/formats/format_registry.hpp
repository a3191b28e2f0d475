// Internal: the per-format entry points behind formats/checkpoint.hpp.
#pragma once

#include <string>

#include "mixq/formats/checkpoint.hpp"

namespace mixq::formats {

// GGUF (src/formats/gguf_*.cpp)
bool is_gguf_file(const std::string& path);
CheckpointInfo gguf_inspect(const std::string& path);
QuantizedWeight gguf_load_weight(const std::string& path, const std::string& tensor);

// safetensors-based formats: mixq's own layout, GPTQ, AWQ, FP8 block, dense F32/F16/BF16
// (src/formats/st_*.cpp)
CheckpointInfo safetensors_inspect(const std::string& path);
QuantizedWeight safetensors_load_weight(const std::string& path, const std::string& tensor);

}  // namespace mixq::formats
