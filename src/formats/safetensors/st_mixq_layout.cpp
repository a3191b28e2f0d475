// mixq's own safetensors layout: the canonical QuantizedWeight stored field by field.
#include "formats/safetensors/st_mixq_layout.hpp"

#include <map>

#include "formats/safetensors/st_common.hpp"

namespace mixq::formats {

namespace {

std::string describe_geometry(const QuantizedWeight& w) {
  // origin last: it is free text and takes the rest of the string (it may contain ';' or '=').
  return std::string("code=") + dtype_name(w.code_type) + ";N=" + std::to_string(w.N) +
         ";K=" + std::to_string(w.K) + ";block_k=" + std::to_string(w.block_k) +
         ";block_n=" + std::to_string(w.block_n) + ";scale=" + dtype_name(w.scale_type) +
         ";zero=" + zero_kind_name(w.zero_kind) + ";scales=" + (w.has_scales ? "1" : "0") +
         ";origin=" + w.origin;
}

std::map<std::string, std::string> parse_geometry(const std::string& s, const std::string& what) {
  std::map<std::string, std::string> kv;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t eq = s.find('=', pos);
    MIXQ_CHECK(eq != std::string::npos, ErrorCode::Format, what, ": malformed description \"", s,
               "\"");
    const std::string key = s.substr(pos, eq - pos);
    if (key == "origin") {
      kv[key] = s.substr(eq + 1);
      break;
    }
    size_t end = s.find(';', eq + 1);
    if (end == std::string::npos) end = s.size();
    kv[key] = s.substr(eq + 1, end - eq - 1);
    pos = end + 1;
  }
  return kv;
}

int64_t parse_int(const std::map<std::string, std::string>& kv, const char* key,
                  const std::string& what) {
  const auto it = kv.find(key);
  MIXQ_CHECK(it != kv.end(), ErrorCode::Format, what, ": description lacks ", key);
  const std::string& v = it->second;
  MIXQ_CHECK(!v.empty() && v.size() <= 18 && v.find_first_not_of("0123456789") == std::string::npos,
             ErrorCode::Format, what, ": ", key, " \"", v, "\" is not a non-negative integer");
  return std::stoll(v);
}

const SafetensorsTensor& part(const SafetensorsCheckpoint& f, const std::string& name,
                              const std::string& what, const std::string& dtype,
                              const std::vector<int64_t>& shape) {
  const SafetensorsTensor* t = f.find(name);
  MIXQ_CHECK(t != nullptr, ErrorCode::Format, what, ": missing tensor \"", name, "\"");
  auto text = [](const std::vector<int64_t>& v) {
    std::string r = "[";
    for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
    return r + "]";
  };
  MIXQ_CHECK(t->dtype == dtype && t->shape == shape, ErrorCode::Format, what, ": tensor \"", name,
             "\" is ", t->dtype, " ", text(t->shape), ", expected ", dtype, " ", text(shape));
  return *t;
}

}  // namespace

std::vector<std::string> mixq_weight_names(const SafetensorsCheckpoint& f) {
  std::vector<std::string> names;
  const auto fmt = f.metadata().find(kMixqFormatKey);
  if (fmt == f.metadata().end()) return names;
  MIXQ_CHECK(fmt->second == "1", ErrorCode::Unsupported, f.path(), ": mixq layout version \"",
             fmt->second, "\" (this build reads version 1)");
  const std::string prefix = kMixqWeightPrefix;
  for (const auto& kv : f.metadata())
    if (kv.first.compare(0, prefix.size(), prefix) == 0)
      names.push_back(kv.first.substr(prefix.size()));
  return names;
}

std::vector<std::string> mixq_weight_parts(const std::string& name) {
  return {name + ".codes", name + ".scales", name + ".zeros", name + ".k_perm"};
}

QuantizedWeight mixq_load(const SafetensorsCheckpoint& f, const std::string& name) {
  return mixq_load_rows(f, name, 0, -1);
}

QuantizedWeight mixq_geometry(const SafetensorsCheckpoint& f, const std::string& name) {
  const std::string what = f.path() + ": mixq weight \"" + name + "\"";
  const auto it = f.metadata().find(kMixqWeightPrefix + name);
  MIXQ_CHECK(it != f.metadata().end(), ErrorCode::InvalidArgument, what,
             ": not described in the metadata");
  const auto kv = parse_geometry(it->second, what);
  QuantizedWeight w;
  auto dtype_field = [&](const char* key) {
    const auto d = kv.find(key);
    MIXQ_CHECK(d != kv.end() && parse_dtype(d->second).has_value(), ErrorCode::Format, what,
               ": bad or missing ", key);
    return *parse_dtype(d->second);
  };
  w.code_type = dtype_field("code");
  w.scale_type = dtype_field("scale");
  w.N = parse_int(kv, "N", what);
  w.K = parse_int(kv, "K", what);
  w.block_k = parse_int(kv, "block_k", what);
  w.block_n = parse_int(kv, "block_n", what);
  MIXQ_CHECK(w.N >= 1 && w.K >= 1 && w.N <= (int64_t(1) << 31) && w.K <= (int64_t(1) << 31) &&
                 w.block_k >= 1 && w.block_n >= 1,
             ErrorCode::Format, what, ": bad geometry ", it->second);
  const auto zk = kv.find("zero");
  MIXQ_CHECK(zk != kv.end(), ErrorCode::Format, what, ": description lacks zero");
  if (zk->second == "none")
    w.zero_kind = ZeroKind::None;
  else if (zk->second == "offset")
    w.zero_kind = ZeroKind::Offset;
  else if (zk->second == "zero-point")
    w.zero_kind = ZeroKind::ZeroPoint;
  else
    MIXQ_FAIL(ErrorCode::Format, what, ": unknown zero kind \"", zk->second, "\"");
  w.has_scales = parse_int(kv, "scales", what) != 0;
  if (kv.count("origin")) w.origin = kv.at("origin");
  return w;
}

namespace {

// The scale (and zero) rows of N blocks [b0, b1) of w (geometry only) out of the mapping.
void load_block_meta(const SafetensorsCheckpoint& f, const std::string& name, const std::string& what,
                     QuantizedWeight& w, int64_t b0, int64_t b1) {
  if (!w.has_scales) return;
  const std::vector<int64_t> sshape = {w.n_blocks_n(), w.n_blocks_k()};
  auto rows_of = [&](const SafetensorsTensor& t) {
    const int64_t rb = static_cast<int64_t>(t.nbytes) / sshape[0];
    return std::vector<uint8_t>(t.data + b0 * rb, t.data + b1 * rb);
  };
  const SafetensorsTensor& s = part(f, name + ".scales", what, st::st_dtype_of(w.scale_type), sshape);
  w.scales = rows_of(s);
  if (w.zero_kind != ZeroKind::None) {
    const char* zdt = w.zero_kind == ZeroKind::Offset ? st::st_dtype_of(w.scale_type) : "I32";
    const SafetensorsTensor& z = part(f, name + ".zeros", what, zdt, sshape);
    w.zeros = rows_of(z);
  }
}

}  // namespace

QuantizedWeight mixq_load_rows(const SafetensorsCheckpoint& f, const std::string& name,
                               int64_t n0, int64_t n1) {
  const std::string what = f.path() + ": mixq weight \"" + name + "\"";
  QuantizedWeight w = mixq_geometry(f, name);
  if (n1 < 0) n1 = w.N;
  const int64_t bn = w.has_scales ? w.block_n : 1;
  MIXQ_CHECK_ARG(n0 >= 0 && n0 < n1 && n1 <= w.N && n0 % bn == 0 && (n1 % bn == 0 || n1 == w.N),
                 what, ": rows [", n0, ", ", n1, ") are not block_n (", bn,
                 ") aligned rows of [0, N=", w.N, ")");
  const int64_t row_bytes = w.row_bytes();
  const SafetensorsTensor& codes = part(f, name + ".codes", what, "U8", {w.N, row_bytes});
  w.codes.assign(codes.data + n0 * row_bytes, codes.data + n1 * row_bytes);
  // scale / zero rows of the blocks [n0 / bn, ceil(n1 / bn))
  load_block_meta(f, name, what, w, n0 / bn, (n1 + bn - 1) / bn);
  w.N = n1 - n0;
  if (const SafetensorsTensor* p = f.find(name + ".k_perm")) {
    part(f, name + ".k_perm", what, "I32", {w.K});
    w.k_perm.resize(static_cast<size_t>(w.K));
    for (int64_t k = 0; k < w.K; ++k) w.k_perm[k] = st::load_i32(p->data, k);
  }
  st::validate_loaded(w, what);
  return w;
}

QuantizedWeight mixq_load_cols(const SafetensorsCheckpoint& f, const std::string& name, int64_t k0,
                               int64_t k1) {
  const std::string what = f.path() + ": mixq weight \"" + name + "\"";
  const QuantizedWeight g = mixq_geometry(f, name);
  MIXQ_CHECK_ARG(k0 >= 0 && k0 < k1 && k1 <= g.K && !f.find(name + ".k_perm"), what, ": columns [",
                 k0, ", ", k1, ") of K=", g.K, " (act-order weights are read whole)");
  // everything but the codes, then each row's bytes of columns [k0, k1) (a sub-byte code shares
  // its byte with its neighbour: the neighbour is cut away by the caller)
  QuantizedWeight w = g;
  const int64_t row_bytes = g.row_bytes(), bits = dtype_bits(g.code_type);
  const SafetensorsTensor& codes = part(f, name + ".codes", what, "U8", {g.N, row_bytes});
  const int64_t b0 = k0 * bits / 8, b1 = std::min(row_bytes, (k1 * bits + 7) / 8);
  load_block_meta(f, name, what, w, 0, g.n_blocks_n());
  w.codes.assign(size_t(g.N * row_bytes), 0);
  for (int64_t n = 0; n < g.N; ++n)
    std::memcpy(w.codes.data() + n * row_bytes + b0, codes.data + n * row_bytes + b0, size_t(b1 - b0));
  st::validate_loaded(w, what);
  return w;
}

TensorEntry mixq_entry(const SafetensorsCheckpoint& f, const std::string& name) {
  const QuantizedWeight w = mixq_load(f, name);
  TensorEntry e;
  e.name = name;
  e.type = "mixq " + w.describe();
  e.shape = {w.N, w.K};
  for (const auto& p : mixq_weight_parts(name))
    if (const SafetensorsTensor* t = f.find(p)) e.bytes += static_cast<int64_t>(t->nbytes);
  e.bits_per_weight = 8.0 * double(e.bytes) / (double(w.N) * double(w.K));
  e.is_weight = true;
  return e;
}

void save_mixq_safetensors(const std::string& path,
                           const std::vector<std::pair<std::string, QuantizedWeight>>& weights,
                           const std::vector<std::pair<std::string, std::string>>& metadata) {
  SafetensorsWriter writer;
  for (const auto& kv : metadata) {
    MIXQ_CHECK_ARG(kv.first != kMixqFormatKey && kv.first.compare(0, 12, kMixqWeightPrefix) != 0,
                   "save_mixq_safetensors: metadata key \"", kv.first, "\" is reserved");
    writer.set_metadata(kv.first, kv.second);
  }
  writer.set_metadata(kMixqFormatKey, "1");
  for (const auto& nw : weights) {
    const std::string& name = nw.first;
    const QuantizedWeight& w = nw.second;
    MIXQ_CHECK_ARG(!name.empty(), "save_mixq_safetensors: empty weight name");
    w.validate();
    // The layout has no fields for a shard's cut blocks; a shard is cut again at load time.
    MIXQ_CHECK(w.plain_blocks(), ErrorCode::Unsupported, "save_mixq_safetensors: weight \"", name,
               "\" has k_phase (", w.k_phase, "), n_phase (", w.n_phase, ") or k_block_starts (",
               w.k_block_starts.size(), " entries); save the global weight and shard it on load");
    writer.set_metadata(kMixqWeightPrefix + name, describe_geometry(w));
    writer.add(name + ".codes", "U8", {w.N, w.row_bytes()}, w.codes.data(), w.codes.size());
    if (w.has_scales) {
      const std::vector<int64_t> sshape = {w.n_blocks_n(), w.n_blocks_k()};
      writer.add(name + ".scales", st::st_dtype_of(w.scale_type), sshape, w.scales.data(),
                 w.scales.size());
      if (w.zero_kind != ZeroKind::None)
        writer.add(name + ".zeros",
                   w.zero_kind == ZeroKind::Offset ? st::st_dtype_of(w.scale_type) : "I32", sshape,
                   w.zeros.data(), w.zeros.size());
    }
    if (!w.k_perm.empty())
      writer.add(name + ".k_perm", "I32", {w.K}, w.k_perm.data(), w.k_perm.size() * 4);
  }
  writer.write(path);
}

}  // namespace mixq::formats
