// safetensors reader (mmap, zero-copy, validated) and writer (formats.md §6).
#include "mixq/formats/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "formats/safetensors/st_json.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/input_file.hpp"
#include "mixq/formats/output_file.hpp"

namespace mixq::formats {

namespace {

// The reference implementation's limit; it keeps a hostile length from driving a huge parse.
constexpr uint64_t kMaxHeaderBytes = 100000000;

struct DTypeEntry {
  const char* name;
  int bits;
};
constexpr DTypeEntry kDTypes[] = {
    {"BOOL", 8},    {"U8", 8},          {"I8", 8},          {"I16", 16},    {"U16", 16},
    {"F16", 16},    {"BF16", 16},       {"I32", 32},        {"U32", 32},    {"F32", 32},
    {"F64", 64},    {"I64", 64},        {"U64", 64},        {"C64", 64},    {"F8_E4M3", 8},
    {"F8_E5M2", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"F8_E8M0", 8}, {"F4", 4},
    {"F6_E2M3", 6}, {"F6_E3M2", 6},
};

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Non-negative int64 from JSON, or a Format error naming the file, tensor and field.
int64_t json_size(const json::Value& v, const std::string& path, const std::string& tensor,
                  const char* field) {
  MIXQ_CHECK(v.is_int() && v.integer >= 0, ErrorCode::Format, path, ": tensor \"", tensor,
             "\": ", field, " must be a non-negative integer (got a ", json::kind_name(v.kind),
             v.is_int() ? " " + std::to_string(v.integer) : std::string(), ")");
  return v.integer;
}

}  // namespace

int safetensors_dtype_bits(const std::string& dtype) {
  for (const auto& d : kDTypes)
    if (dtype == d.name) return d.bits;
  return 0;
}

int safetensors_dtype_size(const std::string& dtype) {
  const int bits = safetensors_dtype_bits(dtype);
  return bits % 8 == 0 ? bits / 8 : 0;
}

bool safetensors_tensor_bytes(const std::string& dtype, const std::vector<int64_t>& shape,
                              uint64_t* nbytes) {
  const int bits = safetensors_dtype_bits(dtype);
  if (bits == 0) return false;
  uint64_t count = 1;
  for (const int64_t d : shape) {
    if (d < 0) return false;
    const uint64_t ud = static_cast<uint64_t>(d);
    if (ud != 0 && count > UINT64_MAX / ud) return false;
    count *= ud;
  }
  if (count > UINT64_MAX / static_cast<uint64_t>(bits)) return false;
  const uint64_t total_bits = count * static_cast<uint64_t>(bits);
  if (total_bits % 8 != 0) return false;  // sub-byte tensors must end on a byte boundary
  *nbytes = total_bits / 8;
  return true;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  // Checked to be a regular file before anything is read (a FIFO or device would block or
  // never end); the descriptor is closed when `in` goes out of scope, the mapping stays.
  const InputFile in(path, "checkpoint");
  f->size_ = in.size();
  MIXQ_CHECK(f->size_ >= 8, ErrorCode::Format, path, ": truncated safetensors file (", f->size_,
             " bytes, the 8-byte header length alone needs 8)");
  void* map = ::mmap(nullptr, static_cast<size_t>(f->size_), PROT_READ, MAP_PRIVATE, in.fd(), 0);
  MIXQ_CHECK(map != MAP_FAILED, ErrorCode::Io, path, ": mmap failed: ", std::strerror(errno));
  f->map_ = map;  // owned from here: the destructor unmaps even if validation throws

  const uint8_t* base = static_cast<const uint8_t*>(map);
  const uint64_t header_len = read_u64_le(base);
  MIXQ_CHECK(header_len <= kMaxHeaderBytes, ErrorCode::Format, path, ": safetensors header length ",
             header_len, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  MIXQ_CHECK(header_len <= f->size_ - 8, ErrorCode::Format, path, ": safetensors header length ",
             header_len, " runs past the end of the file (", f->size_, " bytes)");
  MIXQ_CHECK(header_len >= 2 && base[8] == '{', ErrorCode::Format, path,
             ": safetensors header does not start with '{'");
  const uint64_t data_start = 8 + header_len;
  const uint64_t buffer_size = f->size_ - data_start;
  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  bool seen_metadata = false;
  std::vector<size_t> key_offsets;  // of each tensor's key, for the duplicate-key message
  const std::string what = path + ": header";
  // Member by member: the header of a checkpoint with 500k tensors would otherwise be held as a
  // JSON tree of several hundred MB before any of it is used.
  json::parse_members(reinterpret_cast<const char*>(base + 8), static_cast<size_t>(header_len),
                      what, [&](std::string&& key, json::Value&& value, size_t key_at) {
    const std::string& name = key;
    const json::Value& v = value;
    if (name == "__metadata__") {
      MIXQ_CHECK(!std::exchange(seen_metadata, true), ErrorCode::Format, what,
                 ": JSON duplicate key \"", name, "\" at byte ", key_at);
      MIXQ_CHECK(v.is_object(), ErrorCode::Format, path, ": __metadata__ must be an object, got a ",
                 json::kind_name(v.kind));
      for (const auto& m : v.object) {
        MIXQ_CHECK(m.second.is_string(), ErrorCode::Format, path, ": __metadata__ \"", m.first,
                   "\" must be a string, got a ", json::kind_name(m.second.kind));
        f->metadata_[m.first] = m.second.string;
      }
      return;
    }
    MIXQ_CHECK(v.is_object(), ErrorCode::Format, path, ": tensor \"", name,
               "\": entry must be an object, got a ", json::kind_name(v.kind));
    for (const auto& m : v.object)
      MIXQ_CHECK(m.first == "dtype" || m.first == "shape" || m.first == "data_offsets",
                 ErrorCode::Format, path, ": tensor \"", name, "\": unknown field \"", m.first,
                 "\"");
    const json::Value* dt = v.get("dtype");
    const json::Value* sh = v.get("shape");
    const json::Value* off = v.get("data_offsets");
    MIXQ_CHECK(dt && sh && off, ErrorCode::Format, path, ": tensor \"", name,
               "\": needs dtype, shape and data_offsets");
    MIXQ_CHECK(dt->is_string(), ErrorCode::Format, path, ": tensor \"", name,
               "\": dtype must be a string");
    MIXQ_CHECK(safetensors_dtype_bits(dt->string) != 0, ErrorCode::Format, path, ": tensor \"",
               name, "\": unknown dtype \"", dt->string, "\"");
    MIXQ_CHECK(sh->kind == json::Value::Kind::Array, ErrorCode::Format, path, ": tensor \"", name,
               "\": shape must be an array");
    MIXQ_CHECK(off->kind == json::Value::Kind::Array && off->array.size() == 2, ErrorCode::Format,
               path, ": tensor \"", name, "\": data_offsets must be an array of 2 integers");
    SafetensorsTensor t;
    t.dtype = dt->string;
    for (const auto& d : sh->array) t.shape.push_back(json_size(d, path, name, "shape entry"));
    const uint64_t begin =
        static_cast<uint64_t>(json_size(off->array[0], path, name, "data_offsets[0]"));
    const uint64_t end =
        static_cast<uint64_t>(json_size(off->array[1], path, name, "data_offsets[1]"));
    MIXQ_CHECK(begin <= end, ErrorCode::Format, path, ": tensor \"", name, "\": data_offsets [",
               begin, ", ", end, "] are reversed");
    MIXQ_CHECK(end <= buffer_size, ErrorCode::Format, path, ": tensor \"", name,
               "\": data_offsets [", begin, ", ", end, "] run past the data buffer (", buffer_size,
               " bytes)");
    uint64_t expected = 0;
    // Built only for a message: this loop runs once per tensor of headers with 10^5+ of them.
    auto shape_text = [&t] {
      std::string text;
      for (const int64_t d : t.shape) text += (text.empty() ? "" : ", ") + std::to_string(d);
      return text;
    };
    MIXQ_CHECK(safetensors_tensor_bytes(t.dtype, t.shape, &expected), ErrorCode::Format, path,
               ": tensor \"", name, "\": shape [", shape_text(), "] of ", t.dtype,
               " overflows or does not end on a byte boundary");
    MIXQ_CHECK(expected == end - begin, ErrorCode::Format, path, ": tensor \"", name, "\": shape [",
               shape_text(), "] of ", t.dtype, " needs ", expected, " bytes, data_offsets [", begin,
               ", ", end, "] hold ", end - begin);
    t.nbytes = end - begin;
    t.offset = data_start + begin;
    t.data = base + t.offset;
    spans.push_back({begin, end, f->tensors_.size()});
    t.name = std::move(key);  // the parsed member is not needed after this
    f->tensors_.push_back(std::move(t));
    key_offsets.push_back(key_at);
  });
  // The name index, built once tensors_ stops moving; it also finds repeated names (a valid
  // header has unique keys).
  f->index_.reserve(f->tensors_.size());
  for (size_t i = 0; i < f->tensors_.size(); ++i)
    MIXQ_CHECK(f->index_.emplace(f->tensors_[i].name, i).second, ErrorCode::Format, what,
               ": JSON duplicate key \"", f->tensors_[i].name, "\" at byte ", key_offsets[i]);
  // The tensors must tile the buffer exactly: sorted by offset, each starts where the last ended.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    const std::string& name = f->tensors_[s.index].name;
    MIXQ_CHECK(s.begin >= pos, ErrorCode::Format, path, ": tensor \"", name, "\" [", s.begin, ", ",
               s.end, ") overlaps tensor \"", f->tensors_[spans[i - 1].index].name, "\" (ends at ",
               pos, ")");
    MIXQ_CHECK(s.begin == pos, ErrorCode::Format, path, ": tensor \"", name, "\" starts at ",
               s.begin, " leaving a hole [", pos, ", ", s.begin, ") in the data buffer");
    pos = s.end;
  }
  MIXQ_CHECK(pos == buffer_size, ErrorCode::Format, path, ": tensors cover ", pos, " of the ",
             buffer_size, " data bytes (trailing bytes not described by the header)");
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, static_cast<size_t>(size_));
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsTensor& SafetensorsFile::get(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  MIXQ_CHECK(t != nullptr, ErrorCode::InvalidArgument, path_, ": no tensor named \"", name, "\"");
  return *t;
}

// ------------------------------------------------------------------------------------ writer

void SafetensorsWriter::add(const std::string& name, const std::string& dtype,
                            const std::vector<int64_t>& shape, const void* data, uint64_t nbytes) {
  MIXQ_CHECK_ARG(name != "__metadata__",
                 "SafetensorsWriter::add: the name __metadata__ is reserved");
  for (const auto& e : entries_)
    MIXQ_CHECK_ARG(e.name != name, "SafetensorsWriter::add: duplicate tensor name \"", name, "\"");
  uint64_t expected = 0;
  MIXQ_CHECK_ARG(safetensors_tensor_bytes(dtype, shape, &expected),
                 "SafetensorsWriter::add: tensor \"", name, "\": bad dtype \"", dtype,
                 "\" or shape");
  MIXQ_CHECK_ARG(expected == nbytes, "SafetensorsWriter::add: tensor \"", name, "\": shape needs ",
                 expected, " bytes, got ", nbytes);
  MIXQ_CHECK_ARG(data != nullptr || nbytes == 0, "SafetensorsWriter::add: tensor \"", name,
                 "\": null data");
  entries_.push_back({name, dtype, shape, data, nbytes});
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

void SafetensorsWriter::write(const std::string& path) const {
  // The format forbids holes between tensors, so alignment comes from the order: larger elements
  // first (stable otherwise), as the reference writer does; every tensor then starts at a
  // multiple of its element size within the 8-aligned buffer.
  std::vector<size_t> order(entries_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return safetensors_dtype_bits(entries_[a].dtype) > safetensors_dtype_bits(entries_[b].dtype);
  });
  std::string header = "{";
  if (!metadata_.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& kv : metadata_) {
      if (!first) header += ',';
      first = false;
      json::append_quoted(header, kv.first);
      header += ':';
      json::append_quoted(header, kv.second);
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (const size_t i : order) {
    const Entry& e = entries_[i];
    if (header.size() > 1) header += ',';
    json::append_quoted(header, e.name);
    header += ":{\"dtype\":";
    json::append_quoted(header, e.dtype);
    header += ",\"shape\":[";
    for (size_t d = 0; d < e.shape.size(); ++d)
      header += (d ? "," : "") + std::to_string(e.shape[d]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + e.nbytes) + "]}";
    offset += e.nbytes;
  }
  header += '}';
  while (header.size() % 8 != 0) header += ' ';

  OutputFile out(path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(uint64_t(header.size()) >> (8 * i));
  out.write(len, 8);
  out.write(header.data(), header.size());
  for (const size_t i : order) {
    const Entry& e = entries_[i];
    if (e.nbytes) out.write(e.data, static_cast<size_t>(e.nbytes));
  }
  // mixq's own reader must accept the file before it takes its name (see the GGUF writer).
  out.flush();
  if (!out.streamed()) SafetensorsFile::open(out.temp_path());
  out.commit();
}

}  // namespace mixq::formats
