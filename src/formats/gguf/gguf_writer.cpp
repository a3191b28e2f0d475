// GGUF v3 writer (formats.md §2): header, metadata, tensor infos, then each tensor's data padded
// to the alignment, in the order given (the layout ggml and gguf-py write).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>

#include "mixq/error.hpp"
#include "mixq/formats/gguf.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/output_file.hpp"

namespace mixq::formats {

namespace {

// Little-endian serialization onto an OutputFile (written under a temporary name, renamed into
// place by close()).
class Out {
 public:
  explicit Out(const std::string& path) : f_(path) {}
  void bytes(const void* p, uint64_t n) {
    f_.write(p, static_cast<size_t>(n));
    pos_ += n;
  }
  template <typename T>
  void le(T v) {  // little-endian host assumed (x86-64, aarch64)
    bytes(&v, sizeof(T));
  }
  void str(const std::string& s) {
    le<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad(uint64_t alignment) {
    static const uint8_t zeros[256] = {};
    uint64_t n = (alignment - pos_ % alignment) % alignment;
    while (n > 0) {
      const uint64_t k = n < sizeof(zeros) ? n : sizeof(zeros);
      bytes(zeros, k);
      n -= k;
    }
  }
  // Before the file takes its name, mixq's own reader must accept it: a writer bug must not
  // leave a file behind that only fails later, far from its cause.
  void close() {
    f_.flush();
    if (!f_.streamed()) GgufFile::open(f_.temp_path());
    f_.commit();
  }
  uint64_t pos() const { return pos_; }

 private:
  OutputFile f_;
  uint64_t pos_ = 0;
};

void write_value(Out& o, const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL:
      o.le<uint8_t>(static_cast<uint8_t>(v.u)); break;
    case GgufValueType::U16: case GgufValueType::I16: o.le<uint16_t>(static_cast<uint16_t>(v.u)); break;
    case GgufValueType::U32: case GgufValueType::I32: o.le<uint32_t>(static_cast<uint32_t>(v.u)); break;
    case GgufValueType::U64: case GgufValueType::I64: o.le<uint64_t>(v.u); break;
    case GgufValueType::F32: o.le<float>(static_cast<float>(v.f)); break;
    case GgufValueType::F64: o.le<double>(v.f); break;
    case GgufValueType::STRING: o.str(v.str); break;
    case GgufValueType::ARRAY:
      o.le<uint32_t>(static_cast<uint32_t>(v.elem_type));
      o.le<uint64_t>(v.array_size());
      if (!v.raw.empty()) o.bytes(v.raw.data(), v.raw.size());
      for (const auto& item : v.items) write_value(o, item);
      break;
  }
}

struct Planned {
  const GgufTensorToWrite* t;
  const GgmlTypeInfo* info;
  int64_t ne[4];
  uint32_t n_dims;
  int64_t rows, K;
  uint64_t nbytes, offset;
};

}  // namespace

void save_gguf(const std::string& path, const std::vector<GgufTensorToWrite>& tensors,
               const std::vector<std::pair<std::string, GgufValue>>& metadata,
               uint32_t alignment) {
  MIXQ_CHECK_ARG(alignment >= 8 && (alignment & (alignment - 1)) == 0, "save_gguf: alignment ",
                 alignment, " must be a power of two >= 8");
  std::vector<Planned> plan;
  std::set<std::string> names;
  bool quantized = false;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    const std::string what = "save_gguf: tensor '" + t.name + "'";
    MIXQ_CHECK_ARG(!t.name.empty(), "save_gguf: a tensor has an empty name");
    MIXQ_CHECK_ARG(names.insert(t.name).second, "save_gguf: duplicate tensor name '", t.name, "'");
    Planned p{&t, ggml_type_info(static_cast<uint32_t>(t.type)), {1, 1, 1, 1}, 0, 1, 0, 0, 0};
    MIXQ_CHECK_ARG(p.info != nullptr, what, ": unknown ggml type id ", static_cast<uint32_t>(t.type));
    MIXQ_CHECK_ARG(!t.shape.empty() && t.shape.size() <= 4, what, ": shape has ", t.shape.size(),
                   " dims, expected 1..4");
    p.n_dims = static_cast<uint32_t>(t.shape.size());
    for (uint32_t d = 0; d < p.n_dims; ++d) {
      const int64_t s = t.shape[p.n_dims - 1 - d];  // ne is the reversed numpy shape
      MIXQ_CHECK_ARG(s >= 1 && s <= (int64_t(1) << 40), what, ": shape dim ", p.n_dims - 1 - d,
                     " = ", s, " is outside [1, 2^40]");
      p.ne[d] = s;
    }
    p.K = p.ne[0];
    p.rows = p.ne[1] * p.ne[2] * p.ne[3];
    MIXQ_CHECK_ARG(p.K % p.info->block_elems == 0, what, ": row length ", p.K,
                   " is not a multiple of the ", p.info->name, " block size ", p.info->block_elems);
    p.nbytes = static_cast<uint64_t>(p.K / p.info->block_elems * p.info->block_bytes) *
               static_cast<uint64_t>(p.rows);
    if (t.raw != nullptr) {
      MIXQ_CHECK_ARG(t.raw_bytes == p.nbytes, what, ": raw data holds ", t.raw_bytes,
                     " bytes, the ", p.info->name, " tensor needs ", p.nbytes);
    } else {
      MIXQ_CHECK_ARG(t.values != nullptr, what, ": neither values nor raw bytes given");
      MIXQ_CHECK_ARG(ggml_can_encode(t.type), what, ": mixq cannot encode ", p.info->name,
                     " (encoders: F32 F16 BF16 Q4_0 Q8_0 Q4_K; pass raw bytes for other types)");
    }
    quantized |= p.info->block_elems > 1;
    p.offset = offset;
    offset += (p.nbytes + alignment - 1) / alignment * alignment;
    plan.push_back(p);
  }

  std::vector<std::pair<std::string, GgufValue>> kv;
  std::set<std::string> keys;
  for (const auto& e : metadata) {
    MIXQ_CHECK_ARG(keys.insert(e.first).second, "save_gguf: duplicate metadata key '", e.first, "'");
    if (e.first == "general.alignment")
      MIXQ_CHECK_ARG(e.second.type == GgufValueType::U32 && e.second.u == alignment,
                     "save_gguf: metadata general.alignment must be the uint32 ", alignment);
  }
  kv = metadata;
  if (alignment != 32 && !keys.count("general.alignment"))
    kv.emplace_back("general.alignment", GgufValue::u32(alignment));
  if (quantized && !keys.count("general.quantization_version"))
    kv.emplace_back("general.quantization_version", GgufValue::u32(2));

  Out o(path);
  o.bytes("GGUF", 4);
  o.le<uint32_t>(3);
  o.le<uint64_t>(plan.size());
  o.le<uint64_t>(kv.size());
  for (const auto& e : kv) {
    o.str(e.first);
    o.le<uint32_t>(static_cast<uint32_t>(e.second.type));
    write_value(o, e.second);
  }
  for (const auto& p : plan) {
    o.str(p.t->name);
    o.le<uint32_t>(p.n_dims);
    for (uint32_t d = 0; d < p.n_dims; ++d) o.le<uint64_t>(static_cast<uint64_t>(p.ne[d]));
    o.le<uint32_t>(static_cast<uint32_t>(p.t->type));
    o.le<uint64_t>(p.offset);
  }
  o.pad(alignment);
  std::vector<uint8_t> row;
  for (const auto& p : plan) {
    if (p.t->raw != nullptr) {
      o.bytes(p.t->raw, p.nbytes);
    } else {
      const uint64_t row_bytes = p.nbytes / static_cast<uint64_t>(p.rows);
      row.resize(static_cast<size_t>(row_bytes));
      const std::string what = "save_gguf: tensor '" + p.t->name + "'";
      ggml_check_values(p.t->type, p.t->values, p.rows * p.K, what);
      for (int64_t r = 0; r < p.rows; ++r) {
        try {
          ggml_quantize_row(p.t->type, p.t->values + r * p.K, row.data(), p.K);
        } catch (const Error& e) {
          MIXQ_FAIL(e.code(), what, " row ", r, ": ", error_message_body(e));
        }
        o.bytes(row.data(), row_bytes);
      }
    }
    o.pad(alignment);
  }
  o.close();
}

}  // namespace mixq::formats
