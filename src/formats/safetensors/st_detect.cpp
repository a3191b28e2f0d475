// safetensors_inspect / safetensors_load_weight: recognise what each tensor group is (mixq's own
// layout, GPTQ, AWQ GEMM, FP8 block, dense float matrices) and convert it to the canonical weight.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "core/shard_rows.hpp"
#include "formats/format_registry.hpp"
#include "formats/safetensors/st_common.hpp"
#include "formats/safetensors/st_mixq_layout.hpp"
#include "formats/safetensors/st_quant_config.hpp"
#include "mixq/formats/awq.hpp"
#include "mixq/formats/fp8_block.hpp"
#include "mixq/formats/gptq.hpp"
#include "mixq/formats/safetensors_checkpoint.hpp"

namespace mixq::formats {

namespace {

// Most specific first: a file holding several kinds is named by the first (safetensors_inspect).
enum class Kind { Mixq, Gptq, Awq, Fp8, Dense, Other };
constexpr const char* kKindNames[] = {"mixq", "gptq", "awq", "fp8", "dense", "plain"};
static_assert(sizeof(kKindNames) / sizeof(kKindNames[0]) == static_cast<size_t>(Kind::Other) + 1,
              "a name per kind, Other's last");

struct Item {
  Kind kind;
  std::string name;  // what load_weight takes
  const SafetensorsTensor* tensor = nullptr;  // Dense / Other: the tensor itself (no lookup)
};

struct Scan {
  std::shared_ptr<SafetensorsCheckpoint> file;
  QuantConfig cfg;
  std::vector<Item> items;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string tensor_what(const SafetensorsCheckpoint& f, const std::string& name, const char* kind) {
  return f.path() + ": tensor \"" + name + "\" (" + kind + ")";
}

const SafetensorsTensor& need(const SafetensorsCheckpoint& f, const std::string& name,
                              const std::string& what, size_t rank) {
  const SafetensorsTensor* t = f.find(name);
  MIXQ_CHECK(t != nullptr, ErrorCode::Format, what, ": missing tensor \"", name, "\"");
  MIXQ_CHECK(t->shape.size() == rank, ErrorCode::Format, what, ": \"", name, "\" has shape ",
             shape_str(t->shape), ", expected rank ", rank);
  for (const int64_t d : t->shape)
    MIXQ_CHECK(d >= 1 && d <= (int64_t(1) << 31), ErrorCode::Format, what, ": \"", name,
               "\" has shape ", shape_str(t->shape), " (dimensions must be in [1, 2^31])");
  return *t;
}

void need_dtype(const SafetensorsTensor& t, const char* dtype, const std::string& what) {
  MIXQ_CHECK(t.dtype == dtype, ErrorCode::Format, what, ": \"", t.name, "\" is ", t.dtype,
             ", expected ", dtype);
}

DType need_scale_dtype(const SafetensorsTensor& t, const std::string& what) {
  DType s;
  MIXQ_CHECK(st::scale_dtype_from_st(t.dtype, &s), ErrorCode::Format, what, ": \"", t.name,
             "\" is ", t.dtype, ", expected F16, BF16 or F32 scales");
  return s;
}

// ----------------------------------------------------------------------------------- GPTQ

struct GptqPlan {
  GptqPackedView view;
  GptqVersion version = GptqVersion::V1;
  int64_t group_size = 0;
  std::string origin, what;
  int64_t bytes = 0;
};

GptqPlan plan_gptq(const SafetensorsCheckpoint& f, const QuantConfig& c, const std::string& p) {
  GptqPlan plan;
  plan.what = tensor_what(f, p, "gptq");
  const std::string& what = plan.what;
  const SafetensorsTensor& qw = need(f, p + ".qweight", what, 2);
  const SafetensorsTensor& qz = need(f, p + ".qzeros", what, 2);
  const SafetensorsTensor& sc = need(f, p + ".scales", what, 2);
  const SafetensorsTensor* gi = f.find(p + ".g_idx");
  need_dtype(qw, "I32", what);
  need_dtype(qz, "I32", what);
  GptqPackedView& v = plan.view;
  v.scale_type = need_scale_dtype(sc, what);
  const int64_t R = qw.shape[0], N = qw.shape[1], G = sc.shape[0], Z = qz.shape[1];
  MIXQ_CHECK(sc.shape[1] == N && qz.shape[0] == G, ErrorCode::Format, what,
             ": inconsistent shapes qweight ", shape_str(qw.shape), ", qzeros ",
             shape_str(qz.shape), ", scales ", shape_str(sc.shape),
             " (expected [K*b/32, N], [G, N*b/32], [G, N])");
  if (gi)
    MIXQ_CHECK(gi->shape.size() == 1 && gi->dtype == "I32", ErrorCode::Format, what,
               ": g_idx must be I32 [K], got ", gi->dtype, " ", shape_str(gi->shape));
  int bits = c.bits;
  if (bits == 0) {
    // The zero points are packed along N, the codes along K (= g_idx length when present):
    // together they fix the bit count; small N alone can be ambiguous.
    for (const int b : {2, 3, 4, 8})
      if (gptq_qzeros_cols(N, b) == Z && (!gi || gptq_qweight_rows(gi->shape[0], b) == R)) {
        MIXQ_CHECK(bits == 0, ErrorCode::Format, what, ": bit width is ambiguous from qzeros ",
                   shape_str(qz.shape), " with N=", N,
                   "; a quantize_config.json with \"bits\" is needed");
        bits = b;
      }
    MIXQ_CHECK(bits != 0, ErrorCode::Format, what, ": qzeros ", shape_str(qz.shape),
               " fits no bit width (2, 3, 4, 8) for N=", N);
  }
  MIXQ_CHECK(bits == 2 || bits == 3 || bits == 4 || bits == 8, ErrorCode::Unsupported, what, ": ",
             bits, "-bit GPTQ (supported: 2, 3, 4, 8)");
  MIXQ_CHECK(gptq_qzeros_cols(N, bits) == Z, ErrorCode::Format, what, ": qzeros ",
             shape_str(qz.shape), " does not hold ", N, " ", bits, "-bit zero points per group");
  int64_t K;
  if (gi) {
    K = gi->shape[0];
  } else {
    MIXQ_CHECK((R * 32) % bits == 0, ErrorCode::Format, what, ": qweight rows (", R,
               ") * 32 is not a multiple of ", bits, " bits");
    K = R * 32 / bits;
  }
  MIXQ_CHECK(K >= 1 && gptq_qweight_rows(K, bits) == R, ErrorCode::Format, what, ": qweight ",
             shape_str(qw.shape), " does not hold K=", K, " ", bits, "-bit codes per column",
             gi ? " (K is the length of g_idx)" : "");
  int64_t g = c.group_size == -1 ? K : c.group_size;
  if (!gi && g == 0) g = (K + G - 1) / G;
  if (!gi || g > 0) {
    MIXQ_CHECK(g >= 1 && (gi || (K + g - 1) / g == G), ErrorCode::Format, what, ": group size ", g,
               " and K=", K, " need ", g >= 1 ? (K + g - 1) / g : 0, " groups, scales have ", G);
  }
  const std::string fmt = c.checkpoint_format;
  if (fmt == "gptq_v2")
    plan.version = GptqVersion::V2;
  else
    MIXQ_CHECK(fmt.empty() || fmt == "gptq", ErrorCode::Unsupported, what, ": checkpoint_format \"",
               fmt, "\" (supported: gptq (v1), gptq_v2)");
  v.bits = bits;
  v.K = K;
  v.N = N;
  v.G = G;
  v.qweight = qw.data;
  v.qzeros = qz.data;
  v.scales = sc.data;
  v.g_idx = gi ? gi->data : nullptr;
  plan.group_size = g;
  plan.bytes = int64_t(qw.nbytes + qz.nbytes + sc.nbytes + (gi ? gi->nbytes : 0));
  plan.origin = std::string("gptq-") + (plan.version == GptqVersion::V1 ? "v1 " : "v2 ") +
                std::to_string(bits) + "bit " +
                (g == K  ? std::string("per-channel")
                 : g > 0 ? "g" + std::to_string(g)
                         : std::string("groups from g_idx")) +
                (c.desc_act ? " desc_act" : "");
  return plan;
}

// ----------------------------------------------------------------------------------- AWQ

struct AwqPlan {
  AwqPackedView view;
  int64_t group_size = 0;
  std::string origin, what;
  int64_t bytes = 0;
};

AwqPlan plan_awq(const SafetensorsCheckpoint& f, const QuantConfig& c, const std::string& p) {
  AwqPlan plan;
  plan.what = tensor_what(f, p, "awq");
  const std::string& what = plan.what;
  MIXQ_CHECK(c.version.empty() || c.version == "gemm", ErrorCode::Unsupported, what,
             ": AWQ version \"", c.version, "\" (supported: gemm)");
  MIXQ_CHECK(c.bits == 0 || c.bits == 4, ErrorCode::Unsupported, what, ": ", c.bits,
             "-bit AWQ (supported: 4)");
  const SafetensorsTensor& qw = need(f, p + ".qweight", what, 2);
  const SafetensorsTensor& qz = need(f, p + ".qzeros", what, 2);
  const SafetensorsTensor& sc = need(f, p + ".scales", what, 2);
  need_dtype(qw, "I32", what);
  need_dtype(qz, "I32", what);
  AwqPackedView& v = plan.view;
  v.scale_type = need_scale_dtype(sc, what);
  const int64_t K = qw.shape[0], C = qw.shape[1], G = sc.shape[0], N = sc.shape[1];
  MIXQ_CHECK((N + 7) / 8 == C && qz.shape[0] == G && qz.shape[1] == C, ErrorCode::Format, what,
             ": inconsistent shapes qweight ", shape_str(qw.shape), ", qzeros ",
             shape_str(qz.shape), ", scales ", shape_str(sc.shape),
             " (expected [K, N/8], [K/g, N/8], [K/g, N])");
  int64_t g = c.group_size == -1 ? K : c.group_size;
  if (g == 0) g = (K + G - 1) / G;
  MIXQ_CHECK(g >= 1 && (K + g - 1) / g == G, ErrorCode::Format, what, ": group size ", g,
             " and K=", K, " need ", g >= 1 ? (K + g - 1) / g : 0, " groups, scales have ", G);
  v.K = K;
  v.N = N;
  v.G = G;
  v.qweight = qw.data;
  v.qzeros = qz.data;
  v.scales = sc.data;
  plan.group_size = g;
  plan.bytes = int64_t(qw.nbytes + qz.nbytes + sc.nbytes);
  plan.origin = "awq-gemm 4bit " + (g == K ? std::string("per-channel") : "g" + std::to_string(g));
  return plan;
}

// ----------------------------------------------------------------------------------- FP8

struct Fp8Plan {
  Fp8BlockView view;
  std::string what;
  int64_t bytes = 0;
};

Fp8Plan plan_fp8(const SafetensorsCheckpoint& f, const QuantConfig& c, const std::string& name) {
  Fp8Plan plan;
  plan.what = tensor_what(f, name, "fp8 block");
  const std::string& what = plan.what;
  const SafetensorsTensor& w = need(f, name, what, 2);
  const SafetensorsTensor& s = need(f, name + "_scale_inv", what, 2);
  need_dtype(w, "F8_E4M3", what);
  need_dtype(s, "F32", what);
  Fp8BlockView& v = plan.view;
  v.N = w.shape[0];
  v.K = w.shape[1];
  v.block_n = c.block_n > 0 ? c.block_n : 128;
  v.block_k = c.block_k > 0 ? c.block_k : 128;
  MIXQ_CHECK(s.shape[0] == (v.N + v.block_n - 1) / v.block_n &&
                 s.shape[1] == (v.K + v.block_k - 1) / v.block_k,
             ErrorCode::Format, what, ": weight_scale_inv ", shape_str(s.shape), " does not match ",
             "weight ", shape_str(w.shape), " in ", v.block_n, "x", v.block_k, " blocks");
  v.weight = w.data;
  v.scale_inv = s.data;
  plan.bytes = int64_t(w.nbytes + s.nbytes);
  return plan;
}

// ----------------------------------------------------------------------------------- scan

bool is_dense_matrix(const SafetensorsTensor& t) {
  return t.shape.size() == 2 && t.shape[0] >= 1 && t.shape[1] >= 1 &&
         t.shape[0] <= (int64_t(1) << 31) && t.shape[1] <= (int64_t(1) << 31) &&
         (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16");
}

Kind classify_int(const SafetensorsCheckpoint& f, const QuantConfig& c, const std::string& p) {
  const SafetensorsTensor& qw = f.get(p + ".qweight");
  const SafetensorsTensor& sc = f.get(p + ".scales");
  MIXQ_CHECK(qw.shape.size() == 2 && sc.shape.size() == 2, ErrorCode::Format, f.path(),
             ": tensor \"", p, "\": qweight ", shape_str(qw.shape), " and scales ",
             shape_str(sc.shape), " must be matrices");
  // GPTQ packs along K (qweight keeps N columns), AWQ along N (N/8 columns).
  const bool gptq_shape = qw.shape[1] == sc.shape[1];
  const bool awq_shape = qw.shape[1] == (sc.shape[1] + 7) / 8;
  if (c.quant_method == "gptq" || c.quant_method == "awq") {
    const bool awq = c.quant_method == "awq";
    MIXQ_CHECK(awq ? awq_shape : gptq_shape, ErrorCode::Format, f.path(), ": tensor \"", p,
               "\": ", c.source, " says quant_method \"", c.quant_method, "\" but qweight ",
               shape_str(qw.shape), " with scales ", shape_str(sc.shape), " is not ",
               awq ? "AWQ-shaped [K, N/8]" : "GPTQ-shaped [K*b/32, N]");
    return awq ? Kind::Awq : Kind::Gptq;
  }
  MIXQ_CHECK(gptq_shape || awq_shape, ErrorCode::Format, f.path(), ": tensor \"", p, "\": qweight ",
             shape_str(qw.shape), " with scales ", shape_str(sc.shape),
             " fits neither GPTQ [K*b/32, N] nor AWQ [K, N/8]");
  return gptq_shape ? Kind::Gptq : Kind::Awq;
}

Scan scan(std::shared_ptr<SafetensorsCheckpoint> file) {
  Scan s;
  s.file = std::move(file);
  s.cfg = read_quant_config(s.file->anchor());
  const SafetensorsCheckpoint& f = *s.file;
  std::set<std::string> consumed;
  for (const auto& name : mixq_weight_names(f)) {
    s.items.push_back({Kind::Mixq, name});
    for (const auto& p : mixq_weight_parts(name)) consumed.insert(p);
  }
  for (const SafetensorsTensor* t : f.tensors()) {
    if (consumed.count(t->name) || !ends_with(t->name, ".qweight")) continue;
    const std::string p = t->name.substr(0, t->name.size() - 8);
    if (!f.find(p + ".qzeros") || !f.find(p + ".scales")) continue;
    s.items.push_back({classify_int(f, s.cfg, p), p});
    for (const char* part : {".qweight", ".qzeros", ".scales", ".g_idx"}) consumed.insert(p + part);
  }
  for (const SafetensorsTensor* t : f.tensors()) {
    if (consumed.count(t->name) || !ends_with(t->name, "_scale_inv")) continue;
    const std::string base = t->name.substr(0, t->name.size() - 10);
    const SafetensorsTensor* w = f.find(base);
    if (!w || w->dtype != "F8_E4M3" || consumed.count(base)) continue;
    s.items.push_back({Kind::Fp8, base});
    consumed.insert(base);
    consumed.insert(t->name);
  }
  for (const SafetensorsTensor* t : f.tensors())
    if (!consumed.count(t->name))
      s.items.push_back({is_dense_matrix(*t) ? Kind::Dense : Kind::Other, t->name, t});
  auto by_name = [](const Item& a, const Item& b) { return a.name < b.name; };
  // Headers usually list tensors sorted already: checking first keeps that case linear.
  if (!std::is_sorted(s.items.begin(), s.items.end(), by_name))
    std::sort(s.items.begin(), s.items.end(), by_name);
  return s;
}

// The names that can take part in the weight called `name`, whatever its kind: the name itself,
// the base it is a part of, and every part of that base. Scanning just these tensors classifies
// `name` exactly as a scan of the whole checkpoint would, so a sharded checkpoint opens only the
// shards that hold them.
std::vector<std::string> related_names(const std::string& name) {
  static const char* const kSuffixes[] = {".qweight", ".qzeros", ".scales", ".g_idx",
                                          "_scale_inv", ".codes", ".zeros", ".k_perm"};
  std::vector<std::string> bases{name};
  for (const char* suffix : kSuffixes)
    if (ends_with(name, suffix)) bases.push_back(name.substr(0, name.size() - std::strlen(suffix)));
  std::vector<std::string> out;
  for (const std::string& b : bases) {
    out.push_back(b);
    for (const char* suffix : kSuffixes) out.push_back(b + suffix);
  }
  return out;
}

const Item* find_item(const Scan& s, const std::string& name) {
  for (const auto& it : s.items)
    if (it.name == name) return &it;
  // Accept the GPTQ/AWQ part names too ("x.qweight" -> "x").
  for (const char* suffix : {".qweight", ".qzeros", ".scales", ".g_idx"})
    if (ends_with(name, suffix)) {
      const std::string p = name.substr(0, name.size() - std::string(suffix).size());
      for (const auto& it : s.items)
        if (it.name == p && (it.kind == Kind::Gptq || it.kind == Kind::Awq)) return &it;
    }
  return nullptr;
}

// The weight called `name` (find_item), or InvalidArgument naming the file.
const Item& item_named(const Scan& s, const std::string& path, const std::string& name) {
  const Item* it = find_item(s, name);
  MIXQ_CHECK(it != nullptr, ErrorCode::InvalidArgument, path, ": no tensor or weight named \"", name, "\"");
  return *it;
}

// Rows [n0, n1) of a dense matrix (n1 < 0: to the end); of each row only the elements of
// columns [k0, k1) are read (k1 < 0: all), the others left 0 (a row-parallel shard's layout, cut
// by the caller).
QuantizedWeight load_dense(const SafetensorsCheckpoint& f, const std::string& name, int64_t n0 = 0,
                           int64_t n1 = -1, int64_t k0 = 0, int64_t k1 = -1) {
  const SafetensorsTensor& t = f.get(name);
  if (n1 < 0) n1 = t.shape[0];
  if (k1 < 0) k1 = t.shape[1];
  const size_t row = t.nbytes / size_t(t.shape[0]), eb = row / size_t(t.shape[1]);
  QuantizedWeight w;
  w.N = n1 - n0;
  w.K = t.shape[1];
  st::scale_dtype_from_st(t.dtype, &w.code_type);
  w.has_scales = false;
  w.block_k = w.K;
  w.block_n = 1;
  if (k0 == 0 && k1 == w.K) {
    w.codes.assign(t.data + size_t(n0) * row, t.data + size_t(n1) * row);
  } else {
    w.codes.assign(size_t(w.N) * row, 0);
    for (int64_t n = 0; n < w.N; ++n)
      std::memcpy(w.codes.data() + size_t(n) * row + size_t(k0) * eb,
                  t.data + size_t(n0 + n) * row + size_t(k0) * eb, size_t(k1 - k0) * eb);
  }
  w.origin = "safetensors " + t.dtype;
  st::validate_loaded(w, f.path() + ": tensor \"" + name + "\"");
  return w;
}

QuantizedWeight load_item(const Scan& s, const Item& it) {
  const SafetensorsCheckpoint& f = *s.file;
  switch (it.kind) {
    case Kind::Mixq:
      return mixq_load(f, it.name);
    case Kind::Gptq: {
      const GptqPlan p = plan_gptq(f, s.cfg, it.name);
      const GroupedIntWeight g = gptq_unpack(p.view, p.version, p.group_size, p.what);
      return grouped_int_to_quantized(g, p.origin + (g.g_idx.empty() ? "" : " g_idx"), p.what);
    }
    case Kind::Awq: {
      const AwqPlan p = plan_awq(f, s.cfg, it.name);
      return grouped_int_to_quantized(awq_unpack(p.view, p.group_size, p.what), p.origin, p.what);
    }
    case Kind::Fp8: {
      const Fp8Plan p = plan_fp8(f, s.cfg, it.name);
      return fp8_block_to_quantized(p.view, p.what);
    }
    case Kind::Dense:
      return load_dense(f, it.name);
    case Kind::Other:
      break;
  }
  const SafetensorsTensor& t = f.get(it.name);
  MIXQ_FAIL(ErrorCode::Unsupported, f.path(), ": tensor \"", it.name, "\" (", t.dtype, " ",
            shape_str(t.shape), ") is not a weight matrix mixq can load");
}

TensorEntry entry_for(const Scan& s, const Item& it) {
  const SafetensorsCheckpoint& f = *s.file;
  TensorEntry e;
  e.name = it.name;
  auto finish = [&](int64_t N, int64_t K) {
    e.shape = {N, K};
    e.bits_per_weight = 8.0 * double(e.bytes) / (double(N) * double(K));
    e.is_weight = true;
  };
  switch (it.kind) {
    case Kind::Mixq:
      return mixq_entry(f, it.name);
    case Kind::Gptq: {
      const GptqPlan p = plan_gptq(f, s.cfg, it.name);
      e.type = p.origin + (p.view.g_idx ? " g_idx" : "");
      e.bytes = p.bytes;
      finish(p.view.N, p.view.K);
      return e;
    }
    case Kind::Awq: {
      const AwqPlan p = plan_awq(f, s.cfg, it.name);
      e.type = p.origin;
      e.bytes = p.bytes;
      finish(p.view.N, p.view.K);
      return e;
    }
    case Kind::Fp8: {
      const Fp8Plan p = plan_fp8(f, s.cfg, it.name);
      e.type = "fp8 " + std::to_string(p.view.block_n) + "x" + std::to_string(p.view.block_k);
      e.bytes = p.bytes;
      finish(p.view.N, p.view.K);
      return e;
    }
    case Kind::Dense:
    case Kind::Other: {
      const SafetensorsTensor& t = *it.tensor;
      e.type = t.dtype;
      e.shape = t.shape;
      e.bytes = static_cast<int64_t>(t.nbytes);
      int64_t count = 1;
      for (const int64_t d : t.shape) count = d > 0 && count <= INT64_MAX / d ? count * d : 0;
      e.bits_per_weight = count > 0 ? 8.0 * double(e.bytes) / double(count) : 0.0;
      if (it.kind == Kind::Dense) finish(t.shape[0], t.shape[1]);
      return e;
    }
  }
  return e;
}

}  // namespace

CheckpointInfo safetensors_inspect(const std::string& path) {
  const Scan s = scan(SafetensorsCheckpoint::open(path));
  CheckpointInfo info;
  info.path = path;
  Kind named = Kind::Other;  // the most specific kind present ("plain" when none is)
  for (const auto& it : s.items) {
    named = std::min(named, it.kind);
    info.tensors.push_back(entry_for(s, it));
  }
  const std::string kind = kKindNames[static_cast<int>(named)];
  info.format = "safetensors (" + kind + ")";
  if (s.file->sharded())
    info.format += ", " + std::to_string(s.file->index()->shards.size()) + " shards";
  for (const auto& kv : s.file->metadata()) info.metadata.emplace_back(kv.first, kv.second);
  if (!s.cfg.source.empty()) {
    info.metadata.emplace_back("quantization.config_file", s.cfg.source);
    for (const auto& kv : s.cfg.printable) info.metadata.push_back(kv);
  }
  return info;
}

QuantizedWeight safetensors_load_rows(const std::string& path, const std::string& tensor,
                                      const std::function<std::pair<int64_t, int64_t>(int64_t)>& pick) {
  const Scan s = scan(SafetensorsCheckpoint::open_subset(path, related_names(tensor)));
  const Item* it = &item_named(s, path, tensor);
  const SafetensorsCheckpoint& f = *s.file;
  // a run of whole row blocks [a0, a1) holding rows [b, e), loaded, then cut to them
  auto cut = [](const QuantizedWeight& run, int64_t a0, std::pair<int64_t, int64_t> r) {
    return detail::shard_row_range(run, r.first - a0, r.second - a0);
  };
  auto block_run = [](std::pair<int64_t, int64_t> r, int64_t bn, int64_t N) {
    return std::pair<int64_t, int64_t>(r.first / bn * bn, std::min(N, (r.second + bn - 1) / bn * bn));
  };
  switch (it->kind) {
    case Kind::Mixq: {
      const QuantizedWeight g = mixq_geometry(f, it->name);
      const auto r = pick(g.N);
      const auto a = block_run(r, g.has_scales ? g.block_n : 1, g.N);
      return cut(mixq_load_rows(f, it->name, a.first, a.second), a.first, r);
    }
    case Kind::Gptq: {
      const GptqPlan p = plan_gptq(f, s.cfg, it->name);
      const auto r = pick(p.view.N);
      const GroupedIntWeight g =
          st::gptq_unpack_window(p.view, p.version, p.group_size, p.what, {r.first, r.second, 0, p.view.K});
      return grouped_int_to_quantized(g, p.origin + (g.g_idx.empty() ? "" : " g_idx"), p.what);
    }
    case Kind::Awq: {
      const AwqPlan p = plan_awq(f, s.cfg, it->name);
      const auto r = pick(p.view.N);
      return grouped_int_to_quantized(
          st::awq_unpack_window(p.view, p.group_size, p.what, {r.first, r.second, 0, p.view.K}), p.origin, p.what);
    }
    case Kind::Fp8: {
      const Fp8Plan p = plan_fp8(f, s.cfg, it->name);
      const Fp8BlockView& v = p.view;
      const auto r = pick(v.N);
      const auto a = block_run(r, v.block_n, v.N);
      Fp8BlockView run = v;
      run.N = a.second - a.first;
      run.weight = static_cast<const uint8_t*>(v.weight) + a.first * v.K;
      run.scale_inv = static_cast<const uint8_t*>(v.scale_inv) +
                      (a.first / v.block_n) * ((v.K + v.block_k - 1) / v.block_k) * 4;
      return cut(fp8_block_to_quantized(run, p.what), a.first, r);
    }
    case Kind::Dense: {
      const auto r = pick(it->tensor->shape[0]);
      return load_dense(f, it->name, r.first, r.second);
    }
    case Kind::Other:
      break;
  }
  return load_item(s, *it);  // what cannot be loaded says so
}

std::optional<QuantizedWeight> safetensors_load_cols(
    const std::string& path, const std::string& tensor,
    const std::function<std::pair<int64_t, int64_t>(int64_t)>& pick) {
  const Scan s = scan(SafetensorsCheckpoint::open_subset(path, related_names(tensor)));
  const Item* it = &item_named(s, path, tensor);
  const SafetensorsCheckpoint& f = *s.file;
  // the run of whole groups (blocks) [a0, a1) holding columns [b, e), converted, then cut
  auto group_run = [](std::pair<int64_t, int64_t> r, int64_t g, int64_t K) {
    return st::Window{0, 0, r.first / g * g, std::min(K, (r.second + g - 1) / g * g)};
  };
  auto cut = [](const QuantizedWeight& run, const st::Window& a, std::pair<int64_t, int64_t> r) {
    return detail::shard_col_range(run, r.first - a.k0, r.second - a.k0);
  };
  switch (it->kind) {
    case Kind::Gptq: {
      const GptqPlan p = plan_gptq(f, s.cfg, it->name);
      const GptqPackedView& v = p.view;
      const int64_t g = p.group_size > 0 ? p.group_size : (v.K + v.G - 1) / v.G;
      bool act_order = false;  // a g_idx that is not k / g: the groups are spread over K
      if (v.g_idx)
        for (int64_t k = 0; k < v.K && !act_order; ++k) act_order = st::load_i32(v.g_idx, k) != k / g;
      const auto r = pick(v.K);
      if (act_order) {
        // the shard's columns come from every group: the whole canonical weight is laid out with
        // only their codes read (rows [b, e) of qweight), then cut as shard() cuts it
        st::Window all{0, v.N, 0, v.K};
        all.codes_k0 = r.first;
        all.codes_k1 = r.second;
        const GroupedIntWeight gw = st::gptq_unpack_window(v, p.version, p.group_size, p.what, all);
        return detail::shard_col_range(grouped_int_to_quantized(gw, p.origin + " g_idx", p.what), r.first, r.second);
      }
      st::Window a = group_run(r, g, v.K);
      a.n1 = v.N;
      const GroupedIntWeight run = st::gptq_unpack_window(v, p.version, p.group_size, p.what, a);
      return cut(grouped_int_to_quantized(run, p.origin + (run.g_idx.empty() ? "" : " g_idx"), p.what), a, r);
    }
    case Kind::Awq: {
      const AwqPlan p = plan_awq(f, s.cfg, it->name);
      const auto r = pick(p.view.K);
      st::Window a = group_run(r, p.group_size, p.view.K);
      a.n1 = p.view.N;
      return cut(grouped_int_to_quantized(st::awq_unpack_window(p.view, p.group_size, p.what, a), p.origin, p.what),
                 a, r);
    }
    case Kind::Fp8: {
      const Fp8Plan p = plan_fp8(f, s.cfg, it->name);
      const Fp8BlockView& v = p.view;
      const auto r = pick(v.K);
      const st::Window a = group_run(r, v.block_k, v.K);
      // the run's bytes of every row, and its block columns of every scale row
      const int64_t kw = a.k1 - a.k0, nbk = (v.K + v.block_k - 1) / v.block_k;
      const int64_t b0 = a.k0 / v.block_k, bw = (kw + v.block_k - 1) / v.block_k;
      Fp8BlockPacked run;
      run.N = v.N;
      run.K = kw;
      run.block_n = v.block_n;
      run.block_k = v.block_k;
      run.weight.resize(size_t(v.N * kw));
      for (int64_t n = 0; n < v.N; ++n)
        std::memcpy(run.weight.data() + n * kw, static_cast<const uint8_t*>(v.weight) + n * v.K + a.k0, size_t(kw));
      const int64_t nbn = (v.N + v.block_n - 1) / v.block_n;
      run.scale_inv.resize(size_t(nbn * bw));
      for (int64_t i = 0; i < nbn; ++i)
        std::memcpy(run.scale_inv.data() + i * bw, static_cast<const uint8_t*>(v.scale_inv) + (i * nbk + b0) * 4,
                    size_t(bw * 4));
      return cut(fp8_block_to_quantized(fp8_block_view(run), p.what), a, r);
    }
    case Kind::Mixq: {
      if (f.find(it->name + ".k_perm")) return std::nullopt;  // act-order: read whole
      const auto r = pick(mixq_geometry(f, it->name).K);
      return detail::shard_col_range(mixq_load_cols(f, it->name, r.first, r.second), r.first, r.second);
    }
    case Kind::Dense: {
      // the whole matrix laid out with only each row's elements [b, e) read, then cut
      const auto r = pick(it->tensor->shape[1]);
      return detail::shard_col_range(load_dense(f, it->name, 0, -1, r.first, r.second), r.first, r.second);
    }
    default:
      return std::nullopt;
  }
}

QuantizedWeight safetensors_load_weight(const std::string& path, const std::string& tensor) {
  const Scan s = scan(SafetensorsCheckpoint::open_subset(path, related_names(tensor)));
  const Item* it = &item_named(s, path, tensor);
  return load_item(s, *it);
}

}  // namespace mixq::formats
