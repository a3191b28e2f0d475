// libFuzzer target for the safetensors reader, its JSON header parser and every converter behind
// load_weight and load_shard (mixq layout, GPTQ, AWQ, FP8 block, dense). Any input must either load or throw
// mixq::Error; crashes, sanitizer reports, leaks and other exception types are findings.
//
// The reader takes a path, so each input is written to a file in a private directory; the first
// input byte chooses an optional config file beside it (fuzz_scratch.hpp).
#include <cstdint>
#include <string>

#include "formats/safetensors/st_json.hpp"
#include "fuzz_scratch.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixq::formats;
  try {
    (void)json::parse(reinterpret_cast<const char*>(data), size, "fuzz");
  } catch (const mixq::Error&) {
  }
  if (size == 0) return 0;
  static const std::string dir = mixq_fuzz::make_scratch_dir("mixq_fuzz");
  const std::string path = mixq_fuzz::write_checkpoint_with_config(dir, data, size);
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
