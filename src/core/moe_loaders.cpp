// Loading the experts of one projection from a checkpoint: GGUF 3-D expert tensors split per
// expert, safetensors modules numbered per expert (any format formats::load_weight reads), and
// the fused gate+up stack.
#include <cstring>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/gguf.hpp"
#include "mixq/moe.hpp"

namespace mixq {

namespace {

// Rows [n0, n1) of w as a weight of its own (n0 and the row count on block_n boundaries, or n1
// the last row).
QuantizedWeight slice_rows(const QuantizedWeight& w, int64_t n0, int64_t n1) {
  MIXQ_CHECK(n0 % w.block_n == 0 && (n1 % w.block_n == 0 || n1 == w.N), ErrorCode::Format,
             "expert rows [", n0, ", ", n1, ") of ", w.describe(), " do not fall on its ",
             w.block_n, "-row scale blocks");
  QuantizedWeight s = w;
  s.N = n1 - n0;
  const size_t rb = size_t(w.row_bytes());
  s.codes.assign(w.codes.begin() + ptrdiff_t(size_t(n0) * rb), w.codes.begin() + ptrdiff_t(size_t(n1) * rb));
  if (w.has_scales) {
    const size_t nbk = size_t(w.n_blocks_k()), sb = size_t(dtype_bytes(w.scale_type, 1));
    const size_t b0 = size_t(n0 / w.block_n), b1 = size_t(s.n_blocks_n()) + b0;
    s.scales.assign(w.scales.begin() + ptrdiff_t(b0 * nbk * sb), w.scales.begin() + ptrdiff_t(b1 * nbk * sb));
    if (w.zero_kind != ZeroKind::None) {
      const size_t zb = w.zero_kind == ZeroKind::ZeroPoint ? 4 : sb;
      s.zeros.assign(w.zeros.begin() + ptrdiff_t(b0 * nbk * zb), w.zeros.begin() + ptrdiff_t(b1 * nbk * zb));
    }
  }
  if (w.ggml) {  // the file's own blocks of the same rows (whole rows of blocks per row)
    const size_t gb = w.ggml->data.size() / size_t(w.N);
    auto blocks = std::make_shared<GgmlBlocks>();
    blocks->type = w.ggml->type;
    blocks->data.assign(w.ggml->data.begin() + ptrdiff_t(size_t(n0) * gb),
                        w.ggml->data.begin() + ptrdiff_t(size_t(n1) * gb));
    s.ggml = std::move(blocks);
  }
  s.validate();
  return s;
}

std::string expert_name(const std::string& pattern, int64_t e) {
  const size_t at = pattern.find("{e}");
  return pattern.substr(0, at) + std::to_string(e) + pattern.substr(at + 3);
}

bool is_gguf(const std::string& path) {
  return formats::inspect_checkpoint(path).format.rfind("gguf", 0) == 0;
}

std::vector<QuantizedWeight> load_gguf_experts(const std::string& path, const std::string& name) {
  const auto f = formats::GgufFile::open(path);
  const formats::GgufTensorInfo* t = f->find(name);
  MIXQ_CHECK_ARG(t != nullptr, "load_experts: no tensor '", name, "' in ", path);
  MIXQ_CHECK(t->n_dims == 3, ErrorCode::Format, "load_experts: '", name, "' in ", path, " has ",
             t->n_dims, " dimensions; an expert tensor has 3 (ggml [K, N, E])");
  const int64_t N = t->ne[1], E = t->ne[2];
  MIXQ_CHECK(E >= 1 && N >= 1, ErrorCode::Format, "load_experts: '", name, "' has shape [",
             t->ne[0], ", ", N, ", ", E, "]");
  const QuantizedWeight all = f->load_weight(name);  // [E * N][K]
  std::vector<QuantizedWeight> out;
  out.reserve(size_t(E));
  for (int64_t e = 0; e < E; ++e) {
    out.push_back(slice_rows(all, e * N, (e + 1) * N));
    out.back().origin = all.origin + " expert " + std::to_string(e);
  }
  return out;
}

std::vector<QuantizedWeight> load_numbered_experts(const std::string& path,
                                                   const std::string& pattern) {
  std::unordered_set<std::string> names;
  for (const auto& t : formats::inspect_checkpoint(path).tensors)
    if (t.is_weight) names.insert(t.name);
  std::vector<QuantizedWeight> out;
  for (int64_t e = 0; names.count(expert_name(pattern, e)); ++e) {
    out.push_back(formats::load_weight(path, expert_name(pattern, e)));
    const QuantizedWeight& a = out.front();
    const QuantizedWeight& b = out.back();
    MIXQ_CHECK(a.N == b.N && a.K == b.K && a.code_type == b.code_type && a.block_k == b.block_k &&
                   a.zero_kind == b.zero_kind,
               ErrorCode::Format, "load_experts: '", expert_name(pattern, e), "' (", b.describe(),
               ") does not match expert 0 (", a.describe(), ") in ", path);
  }
  MIXQ_CHECK(!out.empty(), ErrorCode::Format, "load_experts: no weight '", expert_name(pattern, 0),
             "' in ", path, " (the pattern '", pattern, "' with {e} = 0)");
  return out;
}

}  // namespace

QuantizedWeight fuse_gate_up(const QuantizedWeight& gate, const QuantizedWeight& up) {
  gate.validate();
  up.validate();
  MIXQ_CHECK_ARG(gate.K == up.K && gate.code_type == up.code_type && gate.block_k == up.block_k &&
                     gate.block_n == up.block_n && gate.scale_type == up.scale_type &&
                     gate.zero_kind == up.zero_kind && gate.has_scales == up.has_scales,
                 "fuse_gate_up: gate (", gate.describe(), ") and up (", up.describe(),
                 ") must have the same K and scheme");
  MIXQ_CHECK_ARG(gate.k_perm == up.k_perm, "fuse_gate_up: gate and up have different act-order "
                 "permutations; a fused weight has one");
  MIXQ_CHECK_ARG(gate.N % gate.block_n == 0, "fuse_gate_up: gate's N (", gate.N,
                 ") must be a multiple of its block_n (", gate.block_n, ") so no scale block "
                 "straddles gate and up");
  QuantizedWeight f = gate;
  f.N = gate.N + up.N;
  f.codes.insert(f.codes.end(), up.codes.begin(), up.codes.end());
  f.scales.insert(f.scales.end(), up.scales.begin(), up.scales.end());
  f.zeros.insert(f.zeros.end(), up.zeros.begin(), up.zeros.end());
  f.ggml.reset();
  if (gate.ggml && up.ggml && gate.ggml->type == up.ggml->type) {  // rows of blocks, stacked
    auto blocks = std::make_shared<GgmlBlocks>(*gate.ggml);
    blocks->data.insert(blocks->data.end(), up.ggml->data.begin(), up.ggml->data.end());
    f.ggml = std::move(blocks);
  }
  f.origin = gate.origin == up.origin ? gate.origin + " gate+up" : gate.origin + " + " + up.origin;
  f.validate();
  return f;
}

std::vector<QuantizedWeight> load_experts(const std::string& path, const std::string& name) {
  if (is_gguf(path)) return load_gguf_experts(path, name);
  MIXQ_CHECK_ARG(name.find("{e}") != std::string::npos, "load_experts: '", name, "' in ", path,
                 " has no {e} for the expert number (safetensors keep one module per expert)");
  return load_numbered_experts(path, name);
}

std::vector<QuantizedWeight> load_experts_gate_up(const std::string& path,
                                                  const std::string& gate_name,
                                                  const std::string& up_name) {
  const std::vector<QuantizedWeight> gate = load_experts(path, gate_name);
  const std::vector<QuantizedWeight> up = load_experts(path, up_name);
  MIXQ_CHECK(gate.size() == up.size(), ErrorCode::Format, "load_experts_gate_up: ", gate.size(),
             " gate experts ('", gate_name, "') but ", up.size(), " up experts ('", up_name,
             "') in ", path);
  std::vector<QuantizedWeight> out;
  out.reserve(gate.size());
  for (size_t e = 0; e < gate.size(); ++e) out.push_back(fuse_gate_up(gate[e], up[e]));
  return out;
}

}  // namespace mixq
