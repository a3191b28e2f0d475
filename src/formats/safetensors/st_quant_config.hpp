// Internal: the quantization settings found beside a safetensors file (quantize_config.json,
// config.json -> quantization_config, AutoAWQ's quant_config.json), with their synonyms folded.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mixq::formats {

struct QuantConfig {
  std::string source;        // file it came from; empty when none was found
  std::string quant_method;  // "gptq", "awq", "fp8", ... (lower case)
  int bits = 0;              // 0: not given
  int64_t group_size = 0;    // 0: not given; -1: per channel
  bool desc_act = false;
  bool sym = true;
  std::string checkpoint_format;  // "gptq" (v1), "gptq_v2", "marlin", ...
  bool has_zero_point = false, zero_point = true;
  std::string version;                                         // AWQ: "gemm", "gemv", "gemv_fast"
  int64_t block_n = 0, block_k = 0;                            // FP8 weight_block_size
  std::vector<std::pair<std::string, std::string>> printable;  // for inspect
};

// Reads the directory of `st_path`. Throws mixq::Error(Format) naming the config file when one
// exists but is malformed.
QuantConfig read_quant_config(const std::string& st_path);

}  // namespace mixq::formats
