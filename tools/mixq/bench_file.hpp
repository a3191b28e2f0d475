// `mixq bench FILE`: times the 2-D weights of a real checkpoint (GGUF, or safetensors: mixq's
// layout, GPTQ, AWQ, FP8 block, plain matrices; one file or a sharded index) instead of synthetic
// layers. Identical (shape, type) weights form one group, timed once per M; the sum over groups of
// count x time is one decode step of every linear layer of the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/name_pattern.hpp"

namespace mixq::bench {

// The weights of one (type, N, K): timed once, counted `names.size()` times in the decode step.
struct WeightGroup {
  std::string type;                // the checkpoint's type name ("Q4_K", "gptq 4-bit g128", ...)
  int64_t N = 0, K = 0;            // W[N][K]: N out features, K in features
  int64_t file_bytes = 0;          // bytes of one tensor as stored (all parts)
  std::vector<std::string> names;  // every tensor of the group, file order; names[0] is timed
};

struct SkippedTensor {
  std::string name, reason;
};

struct FileWeights {
  std::vector<WeightGroup> groups;     // in order of first appearance in the file
  std::vector<SkippedTensor> skipped;  // every tensor not timed, with why
};

// Token / position embeddings are row lookups in a model, not matrix products: skipped by name
// (token_embd, embed_tokens, tok_embeddings, word_embeddings, wte, wpe, position_embeddings,
// embed_positions).
bool is_embedding_name(const std::string& name);

// Groups the loadable 2-D weights of `info`; `only` / `skip` (may be null) filter by name.
// Skipped, with a reason: tensors that are not 2-D, embeddings, 2-D tensors of a type mixq cannot
// load, and names filtered out.
FileWeights group_file_weights(const formats::CheckpointInfo& info,
                               const formats::NamePattern* only, const formats::NamePattern* skip);

}  // namespace mixq::bench

namespace mixq::cli {

// The FILE form of `mixq bench` (run_bench hands over when a positional argument is given).
int run_bench_file(const Args& a, const std::string& command_line);
extern const char kBenchFileHelp[];

}  // namespace mixq::cli
