// Internal: the per-format entry points behind formats/checkpoint.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

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
// Rows [b, e) of that weight, `pick(N)` choosing them from its row count: equal to
// detail::shard_row_range(safetensors_load_weight(path, tensor), b, e), converted from only the
// bytes those rows need (mixq's layout and FP8 blocks: the row blocks around them; GPTQ / AWQ:
// the packed words of their columns; dense: their rows).
QuantizedWeight safetensors_load_rows(const std::string& path, const std::string& tensor,
                                      const std::function<std::pair<int64_t, int64_t>(int64_t)>& pick);
// Original columns [b, e) of that weight (`pick(K)` choosing them), equal to
// detail::shard_col_range(safetensors_load_weight(path, tensor), b, e), converted from the run of
// whole groups (blocks) around them: GPTQ, AWQ, FP8 blocks; act-order GPTQ, mixq's layout and
// dense matrices: the whole weight laid out with only those columns' codes read. Empty for an
// act-order weight in mixq's layout (read whole).
std::optional<QuantizedWeight> safetensors_load_cols(
    const std::string& path, const std::string& tensor,
    const std::function<std::pair<int64_t, int64_t>(int64_t)>& pick);

}  // namespace mixq::formats
