// GGUF v2/v3 reader (formats.md §2): memory-mapped, zero-copy, and validated before anything is
// handed out. Every count read from the file is checked against the bytes that remain before it
// is used to allocate, so a hostile header cannot make us allocate or read out of bounds.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <unordered_map>

#include "mixq/error.hpp"
#include "mixq/formats/input_file.hpp"
#include "mixq/formats/gguf.hpp"

namespace mixq::formats {

namespace {

constexpr uint32_t kMagicLE = 0x46554747u;  // "GGUF" read as a little-endian u32
constexpr int kMaxArrayDepth = 8;           // spec allows nesting; bound it (stack safety)

bool valid_utf8(const uint8_t* s, uint64_t n) {
  uint64_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    if (c < 0x80) { ++i; continue; }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return false;
    if (n - i < static_cast<uint64_t>(len)) return false;
    for (int k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // overlong forms, surrogates, beyond U+10FFFF
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return false;
    i += len;
  }
  return true;
}

// Minimum encoded size of one value of type t (used to bound array counts before allocating).
uint64_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64:
    case GgufValueType::STRING: return 8;
    case GgufValueType::ARRAY: return 12;
  }
  return 1;
}

class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size, const std::string& path)
      : base_(base), size_(size), path_(path) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const std::string& what) const {
    MIXQ_CHECK(n <= remaining(), ErrorCode::Format, path_, ": truncated file: ", what, " needs ",
               n, " bytes at offset ", pos_, " but only ", remaining(), " remain (file size ",
               size_, ")");
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));  // the reader requires a little-endian host
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& what) {
    const uint64_t len = read<uint64_t>(what + " (string length)");
    MIXQ_CHECK(len <= remaining(), ErrorCode::Format, path_, ": ", what, ": string length ", len,
               " at offset ", pos_ - 8, " exceeds the ", remaining(), " bytes left in the file");
    const uint8_t* s = base_ + pos_;
    MIXQ_CHECK(valid_utf8(s, len), ErrorCode::Format, path_, ": ", what,
               ": string at offset ", pos_, " is not valid UTF-8");
    pos_ += len;
    return std::string(reinterpret_cast<const char*>(s), static_cast<size_t>(len));
  }
  void skip(uint64_t n) {
    need(n, "skip");
    pos_ += n;
  }
  // Copies already-validated bytes [start, start + n) (n <= what was consumed since start).
  void copy(uint64_t start, uint8_t* out, uint64_t n) const {
    if (n) std::memcpy(out, base_ + start, static_cast<size_t>(n));
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

// Budget of materialized array items (strings and nested arrays) per file: real vocabularies
// have < 1M entries; the bound keeps a hostile file from costing ~20x its size in memory.
constexpr uint64_t kMaxArrayItems = uint64_t(1) << 23;

uint64_t scalar_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::STRING: case GgufValueType::ARRAY: return 0;
    default: return min_value_bytes(t);
  }
}

GgufValue read_value(Cursor& c, GgufValueType t, const std::string& what, int depth,
                     const std::string& path, uint64_t* items_left) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufValueType::U8: v.u = c.read<uint8_t>(what); v.i = static_cast<int64_t>(v.u); break;
    case GgufValueType::I8: v.i = c.read<int8_t>(what); v.u = static_cast<uint64_t>(v.i); break;
    case GgufValueType::U16: v.u = c.read<uint16_t>(what); v.i = static_cast<int64_t>(v.u); break;
    case GgufValueType::I16: v.i = c.read<int16_t>(what); v.u = static_cast<uint64_t>(v.i); break;
    case GgufValueType::U32: v.u = c.read<uint32_t>(what); v.i = static_cast<int64_t>(v.u); break;
    case GgufValueType::I32: v.i = c.read<int32_t>(what); v.u = static_cast<uint64_t>(v.i); break;
    case GgufValueType::U64: v.u = c.read<uint64_t>(what); v.i = static_cast<int64_t>(v.u); break;
    case GgufValueType::I64: v.i = c.read<int64_t>(what); v.u = static_cast<uint64_t>(v.i); break;
    case GgufValueType::F32: v.f = c.read<float>(what); break;
    case GgufValueType::F64: v.f = c.read<double>(what); break;
    case GgufValueType::BOOL: {
      const uint8_t b = c.read<uint8_t>(what);
      MIXQ_CHECK(b <= 1, ErrorCode::Format, path, ": ", what, ": bool value ", int(b),
                 " at offset ", c.pos() - 1, " is not 0 or 1");
      v.u = b;
      v.i = b;
      break;
    }
    case GgufValueType::STRING: v.str = c.string(what); break;
    case GgufValueType::ARRAY: {
      MIXQ_CHECK(depth < kMaxArrayDepth, ErrorCode::Format, path, ": ", what,
                 ": arrays nested deeper than ", kMaxArrayDepth, " levels");
      const uint32_t et = c.read<uint32_t>(what + " (array element type)");
      MIXQ_CHECK(et <= 12, ErrorCode::Format, path, ": ", what, ": unknown array element type ",
                 et, " at offset ", c.pos() - 4);
      const uint64_t n = c.read<uint64_t>(what + " (array length)");
      const GgufValueType etype = static_cast<GgufValueType>(et);
      MIXQ_CHECK(n <= c.remaining() / min_value_bytes(etype), ErrorCode::Format, path, ": ", what,
                 ": array of ", n, " ", gguf_value_type_name(etype), " at offset ", c.pos() - 8,
                 " cannot fit in the ", c.remaining(), " bytes left in the file");
      v.elem_type = etype;
      if (const uint64_t eb = scalar_bytes(etype)) {
        // n * eb fits: n <= remaining / eb was checked above
        c.need(n * eb, what + " (array data)");
        v.raw.resize(static_cast<size_t>(n * eb));
        c.copy(c.pos(), v.raw.data(), n * eb);
        if (etype == GgufValueType::BOOL) {
          for (uint64_t k = 0; k < n; ++k)
            MIXQ_CHECK(v.raw[k] <= 1, ErrorCode::Format, path, ": ", what, ": bool array element ",
                       k, " = ", int(v.raw[k]), " is not 0 or 1");
        }
        c.skip(n * eb);
      } else {
        MIXQ_CHECK(n <= *items_left, ErrorCode::Format, path, ": ", what, ": array of ", n, " ",
                   gguf_value_type_name(etype), " exceeds the limit of ", kMaxArrayItems,
                   " string/array items per file");
        *items_left -= n;
        v.items.reserve(static_cast<size_t>(n));
        for (uint64_t k = 0; k < n; ++k)
          v.items.push_back(read_value(c, etype, what, depth + 1, path, items_left));
      }
      break;
    }
    default:
      MIXQ_FAIL(ErrorCode::Format, path, ": ", what, ": unknown value type ",
                static_cast<uint32_t>(t), " at offset ", c.pos() - 4);
  }
  return v;
}

uint32_t bswap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xFF00u) | ((v << 8) & 0xFF0000u) | (v << 24);
}

}  // namespace

bool has_gguf_magic(const void* data, uint64_t size) {
  if (size < 4) return false;
  const char* p = static_cast<const char*>(data);
  return std::memcmp(p, "GGUF", 4) == 0 || std::memcmp(p, "FUGG", 4) == 0;
}

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  // Checked to be a regular file before anything is read (a FIFO or device would block or
  // never end); the descriptor closes when `in` goes out of scope, the mapping stays.
  const InputFile in(path, "checkpoint");
  f->size_ = in.size();
  if (f->size_ > 0) {
    void* m = ::mmap(nullptr, static_cast<size_t>(f->size_), PROT_READ, MAP_PRIVATE, in.fd(), 0);
    MIXQ_CHECK(m != MAP_FAILED, ErrorCode::Io, path, ": mmap of ", f->size_, " bytes failed: ",
               std::strerror(errno));
    f->map_ = m;
    f->base_ = static_cast<const uint8_t*>(m);
  }
  f->parse();
  return f;
}

std::shared_ptr<GgufFile> GgufFile::from_memory(const void* data, uint64_t size,
                                                const std::string& name) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  f->owned_.assign(p, p + size);
  f->base_ = f->owned_.data();
  f->size_ = size;
  f->parse();
  return f;
}

GgufFile::~GgufFile() {
  if (map_) ::munmap(map_, static_cast<size_t>(size_));
}

void GgufFile::parse() {
  const std::string& path = path_;
  Cursor c(base_, size_, path);
  c.need(4, "magic");
  MIXQ_CHECK(has_gguf_magic(base_, size_), ErrorCode::Format, path,
             ": not a GGUF file (magic bytes are not \"GGUF\")");
  MIXQ_CHECK(std::memcmp(base_, "FUGG", 4) != 0, ErrorCode::Unsupported, path,
             ": big-endian GGUF files are not supported (convert with gguf-py's "
             "gguf_convert_endian.py)");
  c.read<uint32_t>("magic");
  const uint32_t version = c.read<uint32_t>("version");
  // ggml's heuristic: a big-endian file's version reads with its low 16 bits zero.
  MIXQ_CHECK(!((version & 0xFFFFu) == 0 && (bswap32(version) == 2 || bswap32(version) == 3)),
             ErrorCode::Unsupported, path, ": big-endian GGUF (version field ", bswap32(version),
             " byte-swapped) is not supported");
  MIXQ_CHECK(version == 2 || version == 3, ErrorCode::Format, path, ": GGUF version ", version,
             " is not supported (2 and 3 are; version 1 used 32-bit counts)");
  version_ = version;
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A KV record is at least 8 (key length) + 4 (type) + 1 bytes; a tensor info at least
  // 8 + 4 + 8 + 4 + 8 bytes. Bound the counts by the file size before reserving anything.
  MIXQ_CHECK(n_kv <= c.remaining() / 13, ErrorCode::Format, path, ": metadata count ", n_kv,
             " cannot fit in a file of ", size_, " bytes");
  MIXQ_CHECK(n_tensors <= c.remaining() / 32, ErrorCode::Format, path, ": tensor count ",
             n_tensors, " cannot fit in a file of ", size_, " bytes");

  kv_.reserve(static_cast<size_t>(n_kv));
  std::set<std::string> keys;
  uint64_t items_left = kMaxArrayItems;
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string where = "metadata entry " + std::to_string(k);
    std::string key = c.string(where + " key");
    MIXQ_CHECK(!key.empty(), ErrorCode::Format, path, ": ", where, " has an empty key");
    MIXQ_CHECK(keys.insert(key).second, ErrorCode::Format, path, ": duplicate metadata key '",
               key, "'");
    const std::string what = "metadata '" + key + "'";
    const uint32_t t = c.read<uint32_t>(what + " (value type)");
    MIXQ_CHECK(t <= 12, ErrorCode::Format, path, ": ", what, ": unknown value type ", t,
               " at offset ", c.pos() - 4);
    GgufValue v = read_value(c, static_cast<GgufValueType>(t), what, 0, path, &items_left);
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = find_value("general.alignment")) {
    MIXQ_CHECK(a->type == GgufValueType::U32, ErrorCode::Format, path,
               ": metadata 'general.alignment' must be a UINT32, it is a ",
               gguf_value_type_name(a->type));
    MIXQ_CHECK(a->u != 0 && (a->u & (a->u - 1)) == 0, ErrorCode::Format, path,
               ": metadata 'general.alignment' = ", a->u, " is not a power of two");
    alignment_ = a->u;
  }

  tensors_.reserve(static_cast<size_t>(n_tensors));
  index_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    t.name = c.string("tensor info " + std::to_string(k) + " name");
    const std::string what = "tensor '" + t.name + "'";
    MIXQ_CHECK(index_.emplace(t.name, tensors_.size()).second, ErrorCode::Format, path,
               ": duplicate tensor name '", t.name, "'");
    t.n_dims = c.read<uint32_t>(what + " n_dims");
    MIXQ_CHECK(t.n_dims >= 1 && t.n_dims <= 4, ErrorCode::Format, path, ": ", what, ": n_dims ",
               t.n_dims, " is outside [1, 4]");
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>(what + " ne[" + std::to_string(d) + "]");
      MIXQ_CHECK(ne <= static_cast<uint64_t>(INT64_MAX), ErrorCode::Format, path, ": ", what,
                 ": ne[", d, "] = ", ne, " is negative as int64");
      t.ne[d] = static_cast<int64_t>(ne);
    }
    t.type = c.read<uint32_t>(what + " type");
    t.offset = c.read<uint64_t>(what + " offset");
    const GgmlTypeInfo* info = ggml_type_info(t.type);
    MIXQ_CHECK(info != nullptr, ErrorCode::Format, path, ": ", what, ": unknown ggml type id ",
               t.type);
    MIXQ_CHECK(t.ne[0] % info->block_elems == 0, ErrorCode::Format, path, ": ", what, ": ne[0] = ",
               t.ne[0], " is not a multiple of the ", info->name, " block size ", info->block_elems);
    // nbytes = ne0/QK * block_bytes * ne1 * ne2 * ne3, each step checked against overflow
    // (and against 2^62 so later additions cannot overflow either).
    const uint64_t kLimit = uint64_t(1) << 62;
    uint64_t nbytes = static_cast<uint64_t>(t.ne[0] / info->block_elems);
    bool overflow = nbytes > kLimit / static_cast<uint64_t>(info->block_bytes);
    if (!overflow) nbytes *= static_cast<uint64_t>(info->block_bytes);
    uint64_t elems = static_cast<uint64_t>(t.ne[0]);
    for (int d = 1; d < 4 && !overflow; ++d) {
      const uint64_t ne = static_cast<uint64_t>(t.ne[d]);
      if (ne != 0 && (nbytes > kLimit / ne || elems > kLimit / ne)) overflow = true;
      else { nbytes *= ne; elems *= ne; }
    }
    MIXQ_CHECK(!overflow, ErrorCode::Format, path, ": ", what, ": dimensions [", t.ne[0], ", ",
               t.ne[1], ", ", t.ne[2], ", ", t.ne[3], "] overflow the tensor size");
    t.nbytes = nbytes;
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment after the tensor infos.
  const uint64_t end_of_infos = c.pos();
  const uint64_t pad = (alignment_ - end_of_infos % alignment_) % alignment_;
  data_offset_ = end_of_infos + pad;
  const uint64_t data_size = data_offset_ <= size_ ? size_ - data_offset_ : 0;
  MIXQ_CHECK(tensors_.empty() || data_offset_ <= size_, ErrorCode::Format, path,
             ": truncated file: data section would start at ", data_offset_, " beyond the file end ",
             size_);

  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) {
    GgufTensorInfo& t = tensors_[i];
    order[i] = i;
    const std::string what = "tensor '" + t.name + "'";
    MIXQ_CHECK(t.offset % alignment_ == 0, ErrorCode::Format, path, ": ", what, ": data offset ",
               t.offset, " is not a multiple of the alignment ", alignment_);
    MIXQ_CHECK(t.offset <= data_size && t.nbytes <= data_size - t.offset, ErrorCode::Format, path,
               ": ", what, ": data [", t.offset, ", ", t.offset + (t.offset <= data_size ? t.nbytes : 0),
               ") of ", ggml_type_name(t.type), " ", t.nbytes, " bytes lies beyond the end of the ",
               data_size, "-byte data section (truncated file?)");
    t.data = base_ + data_offset_ + t.offset;
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors_[a].offset < tensors_[b].offset;
  });
  // Overlap: walk by offset, remembering the non-empty tensor that reaches furthest.
  const GgufTensorInfo* reach = nullptr;
  for (size_t i : order) {
    const GgufTensorInfo& q = tensors_[i];
    if (q.nbytes == 0) continue;
    if (reach) {
      MIXQ_CHECK(reach->offset + reach->nbytes <= q.offset, ErrorCode::Format, path, ": tensors '",
                 reach->name, "' [", reach->offset, ", ", reach->offset + reach->nbytes, ") and '",
                 q.name, "' [", q.offset, ", ", q.offset + q.nbytes,
                 ") overlap in the data section");
    }
    if (!reach || q.offset + q.nbytes > reach->offset + reach->nbytes) reach = &q;
  }
}

const GgufValue* GgufFile::find_value(const std::string& key) const {
  for (const auto& kv : kv_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

const GgufTensorInfo* GgufFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo* t = find(name);
  MIXQ_CHECK_ARG(t != nullptr, path_, ": no tensor named '", name, "' (the file has ",
                 tensors_.size(), " tensors)");
  return *t;
}

QuantizedWeight GgufFile::load_weight(const std::string& name) const {
  const GgufTensorInfo& t = tensor(name);
  const std::string what = path_ + ": tensor '" + name + "'";
  MIXQ_CHECK_ARG(t.n_elements() > 0, what, " has no elements");
  const int64_t rows = t.ne[1] * t.ne[2] * t.ne[3];
  return ggml_to_canonical(static_cast<GgmlType>(t.type), t.data, rows, t.ne[0], what);
}

QuantizedWeight GgufFile::load_weight_rows(const std::string& name, int64_t n0, int64_t n1) const {
  const GgufTensorInfo& t = tensor(name);
  const std::string what = path_ + ": tensor '" + name + "'";
  MIXQ_CHECK_ARG(t.n_elements() > 0, what, " has no elements");
  const int64_t rows = t.ne[1] * t.ne[2] * t.ne[3];
  MIXQ_CHECK_ARG(n0 >= 0 && n0 < n1 && n1 <= rows, what, ": rows [", n0, ", ", n1,
                 ") outside [0, ", rows, ")");
  const GgmlTypeInfo* info = ggml_type_info(t.type);
  MIXQ_CHECK(info != nullptr && t.ne[0] % info->block_elems == 0, ErrorCode::Format, what,
             ": type ", ggml_type_name(t.type), " rows of ", t.ne[0], " elements");
  // Rows are whole runs of blocks in the file: only rows [n0, n1) of the mapping are touched.
  const int64_t row_bytes = t.ne[0] / info->block_elems * info->block_bytes;
  return ggml_to_canonical(static_cast<GgmlType>(t.type), t.data + n0 * row_bytes, n1 - n0,
                           t.ne[0], what);
}

QuantizedWeight GgufFile::load_weight_cols(const std::string& name, int64_t k0, int64_t k1) const {
  const GgufTensorInfo& t = tensor(name);
  const std::string what = path_ + ": tensor '" + name + "'";
  MIXQ_CHECK_ARG(t.n_elements() > 0, what, " has no elements");
  const GgmlTypeInfo* info = ggml_type_info(t.type);
  MIXQ_CHECK(info != nullptr && t.ne[0] % info->block_elems == 0, ErrorCode::Format, what,
             ": type ", ggml_type_name(t.type), " rows of ", t.ne[0], " elements");
  const int64_t qk = info->block_elems, K = t.ne[0], rows = t.ne[1] * t.ne[2] * t.ne[3];
  MIXQ_CHECK_ARG(k0 >= 0 && k0 < k1 && k1 <= K && k0 % qk == 0 && k1 % qk == 0, what, ": columns [",
                 k0, ", ", k1, ") are not whole ", qk, "-element blocks of [0, ", K, ")");
  // each row's blocks [k0 / qk, k1 / qk), gathered: only those bytes of the mapping are touched
  const int64_t row_bytes = K / qk * info->block_bytes, win_bytes = (k1 - k0) / qk * info->block_bytes;
  std::vector<uint8_t> win(size_t(rows * win_bytes));
  for (int64_t n = 0; n < rows; ++n)
    std::memcpy(win.data() + n * win_bytes, t.data + n * row_bytes + k0 / qk * info->block_bytes,
                size_t(win_bytes));
  return ggml_to_canonical(static_cast<GgmlType>(t.type), win.data(), rows, k1 - k0, what);
}

}  // namespace mixq::formats
