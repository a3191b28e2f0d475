// `mixq quantize --format gguf`: the GGUF half of cmd_quantize.cpp. Tensors are encoded to ggml
// block types with mixq's reference encoders (byte-identical to ggml's quantize_row_*_ref) and
// written with mixq::formats::save_gguf.
#pragma once

#include <optional>
#include <string>

#include "mixq/formats/name_pattern.hpp"

namespace mixq::cli {

// The ggml type names `--format gguf` accepts: q4_0, q8_0, q4_k, f16, bf16, f32 (any case).
bool is_gguf_scheme(const std::string& name);

// --only / --skip: linear-time patterns (a crafted tensor name cannot exhaust the stack).
struct TensorSelection {
  std::optional<formats::NamePattern> only, skip;
  bool filtered() const { return only.has_value() || skip.has_value(); }
  bool selected(const std::string& name) const;
};

// Encodes every selected 2-D F32/F16/BF16 tensor of `in` (a safetensors file or a sharded
// checkpoint) as `scheme`;
// other float tensors of rank 1..4 are copied unchanged (their own dtype); everything else is
// left out and listed on stderr. Values or block scales the type cannot represent (overflow, or
// underflow that loses the values) are errors naming the tensor. Returns the exit code.
int quantize_to_gguf(const std::string& in, const std::string& out, const std::string& scheme,
                     const TensorSelection& sel);

}  // namespace mixq::cli
