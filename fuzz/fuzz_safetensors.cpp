// libFuzzer target for the safetensors reader, its JSON header parser and every converter behind
// load_weight and load_shard (mixq layout, GPTQ, AWQ, FP8 block, dense). Any input must either load or throw
// mixq::Error; crashes, sanitizer reports, leaks and other exception types are findings.
//
// The reader takes a path, so each input is written to a file in a private directory (in
// /dev/shm when available). The first input byte chooses an optional config file beside it so
// the GPTQ / AWQ / FP8 config paths are exercised too.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "formats/safetensors/st_json.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/safetensors.hpp"

namespace {

std::string scratch_dir() {
  static std::string dir = [] {
    char shm[] = "/dev/shm/mixq_fuzz_XXXXXX";
    if (const char* d = mkdtemp(shm)) return std::string(d);
    char tmp[] = "/tmp/mixq_fuzz_XXXXXX";
    const char* d = mkdtemp(tmp);
    return std::string(d ? d : "/tmp");
  }();
  return dir;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) abort();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
}

const char* const kConfigs[] = {
    nullptr,
    R"({"bits": 4, "group_size": 128, "desc_act": true, "checkpoint_format": "gptq_v2"})",
    R"({"bits": 3, "group_size": -1})",
    R"({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemm"}})",
    R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 64]}})",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixq::formats;
  try {
    (void)json::parse(reinterpret_cast<const char*>(data), size, "fuzz");
  } catch (const mixq::Error&) {
  }
  if (size == 0) return 0;
  const std::string dir = scratch_dir();
  const std::string path = dir + "/model.safetensors";
  const int cfg = data[0] % 5;
  std::remove((dir + "/quantize_config.json").c_str());
  std::remove((dir + "/config.json").c_str());
  if (kConfigs[cfg]) {
    const std::string name = cfg <= 2 ? "/quantize_config.json" : "/config.json";
    write_file(dir + name, reinterpret_cast<const uint8_t*>(kConfigs[cfg]),
               std::char_traits<char>::length(kConfigs[cfg]));
  }
  write_file(path, data + 1, size - 1);
  try {
    const CheckpointInfo info = inspect_checkpoint(path);
    for (const auto& t : info.tensors) {
      if (!t.is_weight) continue;
      try {
        const mixq::QuantizedWeight w = load_weight(path, t.name);
        w.validate();
        if (w.N * w.K <= (1 << 16)) (void)mixq::dequantize_to_f32(w);
      } catch (const mixq::Error&) {
      }
      // the shard loaders read windows of the same tensors (rows, packed columns, group runs)
      for (const mixq::ShardAxis axis : {mixq::ShardAxis::Column, mixq::ShardAxis::Row})
        try {
          load_shard(path, t.name, mixq::ShardSpec{1, 3, axis}).validate();
        } catch (const mixq::Error&) {
        }
    }
  } catch (const mixq::Error&) {
  }
  return 0;
}
