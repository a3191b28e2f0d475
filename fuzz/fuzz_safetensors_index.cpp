// libFuzzer target for sharded safetensors checkpoints: the input is the text of a
// model.safetensors.index.json placed beside two fixed, valid shards (a GPTQ module split across
// them, a dense matrix, a vector), and goes through the index parser, the shard-by-shard
// consistency checks (missing / extra / misplaced tensors and shards), inspect and load_weight of
// every weight. Any input must load or throw mixq::Error; crashes, sanitizer reports, leaks and
// other exception types are findings.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_scratch.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/safetensors.hpp"
#include "mixq/formats/safetensors_checkpoint.hpp"
#include "mixq/formats/safetensors_index.hpp"

namespace {

// The shards never change: GPTQ 4-bit K = 32, N = 8, one group; parts in both shards.
const std::string& shard_dir() {
  static const std::string dir = [] {
    const std::string d = mixq_fuzz::make_scratch_dir("mixq_fuzz_index");
    static std::vector<int32_t> qweight(4 * 8, 0x76543210), qzeros(1, 0x77777777);
    static std::vector<uint16_t> scales(8, 0x3C00), dense(4 * 32, 0x3800);
    static std::vector<float> vec(8, 1.0f);
    mixq::formats::SafetensorsWriter a, b;
    a.add("layer.qweight", "I32", {4, 8}, qweight.data(), qweight.size() * 4);
    a.add("layer.qzeros", "I32", {1, 1}, qzeros.data(), 4);
    b.add("layer.scales", "F16", {1, 8}, scales.data(), scales.size() * 2);
    b.add("dense.weight", "F16", {4, 32}, dense.data(), dense.size() * 2);
    b.add("norm.weight", "F32", {8}, vec.data(), vec.size() * 4);
    a.write(d + "/model-00001-of-00002.safetensors");
    b.write(d + "/model-00002-of-00002.safetensors");
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixq::formats;
  const std::string index = shard_dir() + "/model.safetensors.index.json";
  try {
    (void)parse_safetensors_index(reinterpret_cast<const char*>(data), size, index);
  } catch (const mixq::Error&) {
  }
  mixq_fuzz::write_file(index, data, size);
  try {
    (void)checkpoint_files(index);
    (void)SafetensorsCheckpoint::open_subset(index, {"layer.qweight", "layer.scales", "x"});
    const CheckpointInfo info = inspect_checkpoint(index);
    for (const auto& t : info.tensors) {
      if (!t.is_weight) continue;
      try {
        mixq::QuantizedWeight w = load_weight(index, t.name);
        w.validate();
        (void)mixq::dequantize_to_f32(w);
      } catch (const mixq::Error&) {
      }
    }
  } catch (const mixq::Error&) {
  }
  try {
    (void)load_weight(index, "layer");
  } catch (const mixq::Error&) {
  }
  return 0;
}
