// libFuzzer target for the expert loaders (mixq/moe.hpp): arbitrary bytes as a checkpoint (GGUF
// or safetensors, with the config file the first byte chooses: fuzz_scratch.hpp), then
// load_experts on every 3-D GGUF tensor (split per expert) and on the numbered-module patterns of
// the safetensors weights (each run of digits in a name made "{e}"), and load_experts_gate_up on
// two of them. Every expert loaded must be a valid weight of expert 0's shape; the small ones are
// dequantized. Any input must load or throw mixq::Error; crashes, sanitizer reports, leaks and
// other exception types are findings.
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_scratch.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/moe.hpp"
#include "mixq/quantized_weight.hpp"

namespace {

constexpr size_t kMaxPatterns = 6;
constexpr int64_t kMaxBytes = int64_t(1) << 24;  // bounds the work of one input

// The names with one run of digits replaced by {e} (every run, at most a few).
void add_patterns(const std::string& name, std::vector<std::string>& out) {
  for (size_t i = 0; i < name.size() && out.size() < kMaxPatterns;) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    const std::string p = name.substr(0, i) + "{e}" + name.substr(j);
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    i = j;
  }
}

// Every expert is a valid weight of expert 0's shape, and the small ones dequantize.
void check_stack(const std::vector<mixq::QuantizedWeight>& experts) {
  for (const mixq::QuantizedWeight& w : experts) {
    w.validate();
    if (w.N != experts[0].N || w.K != experts[0].K || w.code_type != experts[0].code_type) abort();
    if (w.N * w.K <= (1 << 12)) (void)mixq::dequantize_to_f32(w);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string dir = mixq_fuzz::make_scratch_dir("mixq_fuzz_moe");
  const std::string path = mixq_fuzz::write_checkpoint_with_config(dir, data, size);
  try {
    const mixq::formats::CheckpointInfo info = mixq::formats::inspect_checkpoint(path);
    const bool gguf = info.format.rfind("gguf", 0) == 0;
    std::vector<std::string> names;
    for (const auto& t : info.tensors) {
      if (names.size() >= kMaxPatterns) break;
      if (t.bytes > kMaxBytes) continue;
      if (gguf && t.shape.size() == 3) names.push_back(t.name);
      else if (!gguf && t.is_weight) add_patterns(t.name, names);
    }
    for (const std::string& n : names) try {
        check_stack(mixq::load_experts(path, n));
      } catch (const mixq::Error&) {
      }
    if (names.size() >= 2) try {
        check_stack(mixq::load_experts_gate_up(path, names[0], names[1]));
      } catch (const mixq::Error&) {
      }
  } catch (const mixq::Error&) {
  }
  return 0;
}
