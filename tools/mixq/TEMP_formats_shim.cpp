// ============================================================================================
// TEMPORARY SHIM -- DELETE AT MERGE.
// Minimal stand-ins for APIs other helpers are implementing in parallel (safetensors reader /
// writer, mixq's own safetensors layout, GGUF entry points, mixq::cpu::dense_gemm_f32), so that
// the CLI branch builds and its tests run on its own. Not part of the library; not reviewed for
// robustness beyond what the CLI tests need.
// ============================================================================================
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "formats/format_registry.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/safetensors.hpp"

namespace mixq::cpu {
void dense_gemm_f32(const float* X, int64_t M, const float* W, int64_t N, int64_t K, float* Y,
                    int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  auto work = [&](int64_t n0, int64_t n1) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = n0; n < n1; ++n) {
        const float* x = X + m * K;
        const float* w = W + n * K;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t k = 0;
        for (; k + 8 <= K; k += 8)
          for (int j = 0; j < 8; ++j) acc[j] += x[k + j] * w[k + j];
        float s = 0;
        for (; k < K; ++k) s += x[k] * w[k];
        for (int j = 0; j < 8; ++j) s += acc[j];
        Y[m * N + n] = s;
      }
  };
  std::vector<std::thread> ts;
  const int64_t chunk = (N + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const int64_t n0 = t * chunk, n1 = std::min(N, n0 + chunk);
    if (n0 < n1) ts.emplace_back(work, n0, n1);
  }
  for (auto& t : ts) t.join();
}
}  // namespace mixq::cpu

namespace mixq::formats {

namespace {

struct Json {
  enum Kind { Null, Str, Num, Arr, Obj } kind = Null;
  std::string str;
  double num = 0;
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;
};

struct JsonParser {
  const std::string& s;
  size_t i = 0;
  std::string path;
  [[noreturn]] void fail() { MIXQ_FAIL(ErrorCode::Format, path, ": bad safetensors JSON at ", i); }
  void ws() { while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i; }
  Json value(int depth = 0) {
    if (depth > 16) fail();
    ws();
    if (i >= s.size()) fail();
    Json j;
    if (s[i] == '{') {
      j.kind = Json::Obj;
      ++i;
      ws();
      if (i < s.size() && s[i] == '}') return ++i, j;
      for (;;) {
        ws();
        Json k = value(depth + 1);
        if (k.kind != Json::Str) fail();
        ws();
        if (i >= s.size() || s[i++] != ':') fail();
        j.obj.emplace_back(k.str, value(depth + 1));
        ws();
        if (i < s.size() && s[i] == ',') { ++i; continue; }
        if (i < s.size() && s[i] == '}') return ++i, j;
        fail();
      }
    }
    if (s[i] == '[') {
      j.kind = Json::Arr;
      ++i;
      ws();
      if (i < s.size() && s[i] == ']') return ++i, j;
      for (;;) {
        j.arr.push_back(value(depth + 1));
        ws();
        if (i < s.size() && s[i] == ',') { ++i; continue; }
        if (i < s.size() && s[i] == ']') return ++i, j;
        fail();
      }
    }
    if (s[i] == '"') {
      j.kind = Json::Str;
      ++i;
      while (i < s.size() && s[i] != '"') {
        if (s[i] == '\\') {
          if (++i >= s.size()) fail();
          j.str += s[i] == 'n' ? '\n' : s[i];
        } else {
          j.str += s[i];
        }
        ++i;
      }
      if (i >= s.size()) fail();
      ++i;
      return j;
    }
    size_t end = i;
    while (end < s.size() && (std::isdigit(static_cast<unsigned char>(s[end])) || s[end] == '-'))
      ++end;
    if (end == i) fail();
    j.kind = Json::Num;
    j.num = std::stod(s.substr(i, end - i));
    i = end;
    return j;
  }
};

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') { o += "\\n"; continue; }
    o += c;
  }
  return o;
}

}  // namespace

int safetensors_dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "U8" || d == "I8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY);
  MIXQ_CHECK(fd >= 0, ErrorCode::Io, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st;
  fstat(fd, &st);
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    f->map_ = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (f->map_ == MAP_FAILED) f->map_ = nullptr;
  }
  ::close(fd);
  MIXQ_CHECK(f->map_ != nullptr && f->size_ >= 8, ErrorCode::Format, path,
             ": not a safetensors file (too short)");
  const uint8_t* base = static_cast<const uint8_t*>(f->map_);
  uint64_t n = 0;
  std::memcpy(&n, base, 8);
  MIXQ_CHECK(n <= f->size_ - 8 && n < 100000000, ErrorCode::Format, path,
             ": not a safetensors file (header length ", n, ")");
  const std::string header(reinterpret_cast<const char*>(base + 8), n);
  MIXQ_CHECK(!header.empty() && header[0] == '{', ErrorCode::Format, path,
             ": not a safetensors file (header is not JSON)");
  JsonParser p{header, 0, path};
  Json root = p.value();
  const uint64_t buf = 8 + n, buf_size = f->size_ - buf;
  for (auto& [name, t] : root.obj) {
    if (name == "__metadata__") {
      for (auto& [k, v] : t.obj) f->metadata_[k] = v.str;
      continue;
    }
    SafetensorsTensor e;
    e.name = name;
    uint64_t b = 0, end = 0;
    for (auto& [k, v] : t.obj) {
      if (k == "dtype") e.dtype = v.str;
      if (k == "shape") for (auto& d : v.arr) e.shape.push_back(static_cast<int64_t>(d.num));
      if (k == "data_offsets" && v.arr.size() == 2) {
        b = static_cast<uint64_t>(v.arr[0].num);
        end = static_cast<uint64_t>(v.arr[1].num);
      }
    }
    const int es = safetensors_dtype_size(e.dtype);
    MIXQ_CHECK(es > 0, ErrorCode::Format, path, ": tensor '", name, "' dtype '", e.dtype, "'");
    uint64_t cnt = 1;
    for (int64_t d : e.shape) cnt *= static_cast<uint64_t>(d);
    MIXQ_CHECK(b <= end && end <= buf_size && end - b == cnt * es, ErrorCode::Format, path,
               ": tensor '", name, "' offsets [", b, ", ", end, ") do not fit the data (",
               buf_size, " bytes)");
    e.offset = buf + b;
    e.data = base + e.offset;
    e.nbytes = end - b;
    f->tensors_.push_back(e);
  }
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, size_);
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  for (auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}
const SafetensorsTensor& SafetensorsFile::get(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  MIXQ_CHECK_ARG(t, path_, ": no tensor named '", name, "'");
  return *t;
}

void SafetensorsWriter::add(const std::string& name, const std::string& dtype,
                            const std::vector<int64_t>& shape, const void* data, uint64_t nbytes) {
  entries_.push_back({name, dtype, shape, data, nbytes});
}
void SafetensorsWriter::set_metadata(const std::string& k, const std::string& v) {
  metadata_[k] = v;
}
void SafetensorsWriter::write(const std::string& path) const {
  std::ostringstream h;
  h << "{";
  bool first = true;
  if (!metadata_.empty()) {
    h << "\"__metadata__\":{";
    for (auto it = metadata_.begin(); it != metadata_.end(); ++it)
      h << (it == metadata_.begin() ? "" : ",") << "\"" << json_escape(it->first) << "\":\""
        << json_escape(it->second) << "\"";
    h << "}";
    first = false;
  }
  uint64_t off = 0;
  std::vector<uint64_t> offs;
  for (auto& e : entries_) {
    offs.push_back(off);
    h << (first ? "" : ",") << "\"" << json_escape(e.name) << "\":{\"dtype\":\"" << e.dtype
      << "\",\"shape\":[";
    for (size_t i = 0; i < e.shape.size(); ++i) h << (i ? "," : "") << e.shape[i];
    h << "],\"data_offsets\":[" << off << "," << off + e.nbytes << "]}";
    off += e.nbytes;
    first = false;
  }
  h << "}";
  std::string hs = h.str();
  while (hs.size() % 8) hs += ' ';
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  MIXQ_CHECK(f.good(), ErrorCode::Io, "cannot create '", path, "'");
  const uint64_t n = hs.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(hs.data(), static_cast<std::streamsize>(hs.size()));
  for (auto& e : entries_) f.write(static_cast<const char*>(e.data), e.nbytes);
  MIXQ_CHECK(f.good(), ErrorCode::Io, "cannot write '", path, "'");
}

namespace {
const char* st_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    default: return "U8";
  }
}
std::map<std::string, std::string> parse_kv(const std::string& s) {
  std::map<std::string, std::string> m;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ';')) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) m[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return m;
}
}  // namespace

void save_mixq_safetensors(const std::string& path,
                           const std::vector<std::pair<std::string, QuantizedWeight>>& weights,
                           const std::vector<std::pair<std::string, std::string>>& metadata) {
  SafetensorsWriter w;
  w.set_metadata("mixq.format", "1");
  for (auto& [k, v] : metadata) w.set_metadata(k, v);
  for (auto& [name, q] : weights) {
    q.validate();
    std::ostringstream d;
    d << "code=" << dtype_name(q.code_type) << ";N=" << q.N << ";K=" << q.K
      << ";block_k=" << q.block_k << ";block_n=" << q.block_n
      << ";scale=" << dtype_name(q.scale_type) << ";zero=" << zero_kind_name(q.zero_kind)
      << ";has_scales=" << q.has_scales << ";origin=" << q.origin;
    w.set_metadata("mixq.weight." + name, d.str());
    w.add(name + ".codes", "U8", {q.N, q.row_bytes()}, q.codes.data(), q.codes.size());
    if (q.has_scales)
      w.add(name + ".scales", st_dtype(q.scale_type), {q.n_blocks_n(), q.n_blocks_k()},
            q.scales.data(), q.scales.size());
    if (!q.zeros.empty())
      w.add(name + ".zeros", q.zero_kind == ZeroKind::ZeroPoint ? "I32" : st_dtype(q.scale_type),
            {q.n_blocks_n(), q.n_blocks_k()}, q.zeros.data(), q.zeros.size());
    if (!q.k_perm.empty())
      w.add(name + ".k_perm", "I32", {q.K}, q.k_perm.data(), q.k_perm.size() * 4);
  }
  w.write(path);
}

CheckpointInfo safetensors_inspect(const std::string& path) {
  auto f = SafetensorsFile::open(path);
  CheckpointInfo info;
  info.path = path;
  const bool mixq = f->metadata().count("mixq.format") > 0;
  info.format = mixq ? "safetensors (mixq)" : "safetensors";
  for (auto& [k, v] : f->metadata()) info.metadata.emplace_back(k, v);
  if (mixq) {
    for (auto& [k, v] : f->metadata()) {
      if (k.rfind("mixq.weight.", 0) != 0) continue;
      const std::string name = k.substr(12);
      QuantizedWeight q = load_weight(path, name);
      TensorEntry e;
      e.name = name;
      e.type = "mixq " + q.describe();
      e.shape = {q.N, q.K};
      e.bytes = q.storage_bytes();
      e.bits_per_weight = q.bits_per_weight();
      e.is_weight = true;
      info.tensors.push_back(e);
    }
    return info;
  }
  for (auto& t : f->tensors()) {
    TensorEntry e;
    e.name = t.name;
    e.type = t.dtype;
    e.shape = t.shape;
    e.bytes = static_cast<int64_t>(t.nbytes);
    int64_t cnt = 1;
    for (int64_t d : t.shape) cnt *= d;
    e.bits_per_weight = cnt ? 8.0 * e.bytes / cnt : 0;
    e.is_weight = t.shape.size() == 2 && (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16");
    info.tensors.push_back(e);
  }
  return info;
}

QuantizedWeight safetensors_load_weight(const std::string& path, const std::string& tensor) {
  auto f = SafetensorsFile::open(path);
  auto it = f->metadata().find("mixq.weight." + tensor);
  QuantizedWeight q;
  if (it == f->metadata().end()) {
    const SafetensorsTensor& t = f->get(tensor);
    MIXQ_CHECK_ARG(t.shape.size() == 2 && (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16"),
                   path, ": tensor '", tensor, "' is not a 2-D float matrix");
    q.N = t.shape[0];
    q.K = t.shape[1];
    q.code_type = t.dtype == "F32" ? DType::F32 : t.dtype == "F16" ? DType::F16 : DType::BF16;
    q.has_scales = false;
    q.block_k = q.K;
    q.codes.assign(t.data, t.data + t.nbytes);
    q.origin = "safetensors:" + t.dtype;
    q.validate();
    return q;
  }
  auto kv = parse_kv(it->second);
  q.N = std::stoll(kv["N"]);
  q.K = std::stoll(kv["K"]);
  q.code_type = *parse_dtype(kv["code"]);
  q.block_k = std::stoll(kv["block_k"]);
  q.block_n = std::stoll(kv["block_n"]);
  q.scale_type = *parse_dtype(kv["scale"]);
  const std::string z = kv["zero"];
  q.zero_kind = z == zero_kind_name(ZeroKind::Offset)      ? ZeroKind::Offset
                : z == zero_kind_name(ZeroKind::ZeroPoint) ? ZeroKind::ZeroPoint
                                                           : ZeroKind::None;
  q.has_scales = kv["has_scales"] == "1";
  q.origin = kv["origin"];
  auto copy = [&](const std::string& suffix, std::vector<uint8_t>& dst) {
    const SafetensorsTensor* t = f->find(tensor + suffix);
    if (t) dst.assign(t->data, t->data + t->nbytes);
  };
  copy(".codes", q.codes);
  copy(".scales", q.scales);
  copy(".zeros", q.zeros);
  if (const SafetensorsTensor* t = f->find(tensor + ".k_perm")) {
    q.k_perm.resize(t->nbytes / 4);
    std::memcpy(q.k_perm.data(), t->data, t->nbytes);
  }
  q.validate();
  return q;
}

bool is_gguf_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char m[4] = {0, 0, 0, 0};
  f.read(m, 4);
  return f.gcount() == 4 && std::memcmp(m, "GGUF", 4) == 0;
}
CheckpointInfo gguf_inspect(const std::string& path) {
  MIXQ_FAIL(ErrorCode::Unsupported, path, ": GGUF reader not yet merged (temporary shim)");
}
QuantizedWeight gguf_load_weight(const std::string& path, const std::string&) {
  MIXQ_FAIL(ErrorCode::Unsupported, path, ": GGUF reader not yet merged (temporary shim)");
}

}  // namespace mixq::formats
