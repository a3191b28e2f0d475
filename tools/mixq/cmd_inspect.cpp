// mixq inspect FILE: every tensor of a checkpoint (GGUF or any safetensors layout) with its type,
// logical shape, bits per weight and stored bytes, and the file's quantization metadata.
#include <cstdio>

#include "cli.hpp"
#include "mixq/formats/checkpoint.hpp"

namespace mixq::cli {

namespace {

const char kHelp[] =
    "usage: mixq inspect FILE\n\n"
    "Lists every tensor of a checkpoint (GGUF, or safetensors: mixq's own layout, GPTQ, AWQ,\n"
    "FP8 block, plain F32/F16/BF16) with its type, logical shape ([N, K] for matrices), bits per\n"
    "weight and stored bytes, then the file's metadata. Tensors marked '*' can be loaded as\n"
    "weights by 'mixq dequantize' and 'mixq matmul'. FILE may be a sharded safetensors\n"
    "checkpoint: its *.safetensors.index.json, or the directory holding it (every shard is\n"
    "read and checked against the index).\n\n"
    "options:\n"
    "  --max-value-chars N   truncate metadata values longer than N characters (default 160)\n";

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

int run_inspect(int argc, char** argv) {
  Args a("inspect", argc, argv, {{"--max-value-chars", "", true}});
  if (a.help()) return print_help(kHelp);
  a.expect_positionals(1, 1, "FILE");
  const size_t max_chars = static_cast<size_t>(a.get_int("--max-value-chars", 160, 8, 1 << 20));

  const formats::CheckpointInfo info = formats::inspect_checkpoint(a.positionals()[0]);
  std::printf("file:    %s\nformat:  %s\ntensors: %zu\n\n", info.path.c_str(),
              info.format.c_str(), info.tensors.size());

  size_t wname = 4, wtype = 4, wshape = 5;
  for (const auto& t : info.tensors) {
    wname = std::max(wname, t.name.size());
    wtype = std::max(wtype, t.type.size());
    wshape = std::max(wshape, shape_text(t.shape).size());
  }
  std::printf("  %-*s  %-*s  %-*s  %8s  %14s\n", int(wname), "name", int(wtype), "type",
              int(wshape), "shape", "bits/w", "bytes");
  int64_t total = 0;
  for (const auto& t : info.tensors) {
    std::printf("%c %-*s  %-*s  %-*s  %8.3f  %14lld\n", t.is_weight ? '*' : ' ', int(wname),
                t.name.c_str(), int(wtype), t.type.c_str(), int(wshape),
                shape_text(t.shape).c_str(), t.bits_per_weight, static_cast<long long>(t.bytes));
    total += t.bytes;
  }
  std::printf("\ntotal tensor bytes: %lld\n", static_cast<long long>(total));
  if (!info.metadata.empty()) {
    std::printf("\nmetadata:\n");
    for (const auto& [k, v] : info.metadata) {
      std::string value = one_line(v);
      if (value.size() > max_chars)
        value = value.substr(0, max_chars) + "... (" + std::to_string(v.size()) + " chars)";
      std::printf("  %s = %s\n", one_line(k).c_str(), value.c_str());
    }
  }
  return 0;
}

}  // namespace mixq::cli
