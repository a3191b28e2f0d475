// What the file-reading fuzz targets share: a private scratch directory (in /dev/shm when
// available, since every input is written to a file), the file writer, and the optional config
// file that the first input byte chooses, so that the GPTQ / AWQ / FP8 config paths are read too.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

namespace mixq_fuzz {

// A new private directory named after the target (prefix) at each call.
inline std::string make_scratch_dir(const std::string& prefix) {
  std::string shm = "/dev/shm/" + prefix + "_XXXXXX";
  if (const char* d = mkdtemp(shm.data())) return d;
  std::string tmp = "/tmp/" + prefix + "_XXXXXX";
  const char* d = mkdtemp(tmp.data());
  if (!d) abort();
  return d;
}

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) abort();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
}

// data[0] chooses the config file written beside the checkpoint (none, GPTQ v2 act-order, GPTQ
// 3-bit per channel, AWQ, FP8 blocks of 128 x 64); the rest of the input is the checkpoint, written
// to dir/model.safetensors (a GGUF magic there makes it a GGUF file). Returns its path. size >= 1.
inline std::string write_checkpoint_with_config(const std::string& dir, const uint8_t* data, size_t size) {
  static const char* const kConfigs[] = {
      nullptr,
      R"({"bits": 4, "group_size": 128, "desc_act": true, "checkpoint_format": "gptq_v2"})",
      R"({"bits": 3, "group_size": -1})",
      R"({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemm"}})",
      R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 64]}})",
  };
  const size_t cfg = data[0] % std::size(kConfigs);
  std::remove((dir + "/quantize_config.json").c_str());
  std::remove((dir + "/config.json").c_str());
  if (kConfigs[cfg]) {
    const std::string name = cfg <= 2 ? "/quantize_config.json" : "/config.json";
    write_file(dir + name, reinterpret_cast<const uint8_t*>(kConfigs[cfg]),
               std::char_traits<char>::length(kConfigs[cfg]));
  }
  const std::string path = dir + "/model.safetensors";
  write_file(path, data + 1, size - 1);
  return path;
}

}  // namespace mixq_fuzz
