// GGUF files (formats.md §2): a memory-mapped, fully validated, zero-copy reader for versions 2
// and 3 (little-endian), and a version-3 writer.
//
//   auto f = mixq::formats::GgufFile::open("model.gguf");
//   const GgufTensorInfo& t = f->tensor("blk.0.attn_q.weight");   // t.data points into the map
//   QuantizedWeight w = f->load_weight("blk.0.attn_q.weight");
//
// Every malformed input (truncation, absurd counts, overlapping or misaligned tensors, invalid
// UTF-8, ...) throws mixq::Error(ErrorCode::Format) naming the file, the key or tensor and the
// problem; nothing is read out of bounds and nothing is allocated from an unchecked count.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mixq/formats/ggml_blocks.hpp"
#include "mixq/quantized_weight.hpp"

namespace mixq::formats {

enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8,
  ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);

// One metadata value. Integers and bools live in `u` / `i` (both set, as the value's own
// signedness gives), floats in `f`, strings in `str`. Arrays of scalars keep their elements
// compactly as little-endian bytes in `raw` (a 150k-entry token-type array stays 600 KB, and a
// hostile file cannot make us allocate many times its own size); arrays of strings or arrays
// keep them in `items`. Use array_size() / at(i) to read either kind.
struct GgufValue {
  GgufValueType type = GgufValueType::U32;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string str;
  GgufValueType elem_type = GgufValueType::U8;  // arrays only
  std::vector<uint8_t> raw;                     // arrays of scalars
  std::vector<GgufValue> items;                 // arrays of strings / arrays

  uint64_t array_size() const;
  GgufValue at(uint64_t index) const;  // element `index` of an array (bounds-checked)

  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue array(GgufValueType elem, std::vector<GgufValue> items);

  // Printable form; long arrays are abbreviated ("[151936 x string: "a", "b", ...]").
  std::string to_string(size_t max_items = 8) const;
};

struct GgufTensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] = innermost (K for a matrix)
  uint32_t type = 0;             // ggml type id
  uint64_t offset = 0;           // relative to the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // zero-copy view into the mapping
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
 public:
  // Memory-maps `path` (read-only) and validates everything. Throws Error(Io) when the file
  // cannot be opened, Error(Format) for malformed content, Error(Unsupported) for big-endian.
  static std::shared_ptr<GgufFile> open(const std::string& path);
  // Parses a copy of `size` bytes (fuzzing, tests); `name` is used in error messages.
  static std::shared_ptr<GgufFile> from_memory(const void* data, uint64_t size,
                                               const std::string& name);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section
  uint64_t file_size() const { return size_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find_value(const std::string& key) const;  // nullptr when absent
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find(const std::string& name) const;   // nullptr when absent
  const GgufTensorInfo& tensor(const std::string& name) const;  // throws InvalidArgument

  // The tensor as a canonical weight W[N][K] with K = ne[0] and N = ne[1]*ne[2]*ne[3].
  QuantizedWeight load_weight(const std::string& name) const;
  // Rows [n0, n1) of the matrix only (a column-parallel shard): reads those rows' bytes.
  QuantizedWeight load_weight_rows(const std::string& name, int64_t n0, int64_t n1) const;
  // Columns [k0, k1) of every row, both multiples of the type's block (k1 may be the row's end):
  // the canonical weight of a row-parallel window, converted from only those blocks of each row.
  QuantizedWeight load_weight_cols(const std::string& name, int64_t k0, int64_t k1) const;

 private:
  GgufFile() = default;
  void parse();
  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* map_ = nullptr;              // mmap'ed region (open) ...
  std::vector<uint8_t> owned_;       // ... or an owned copy (from_memory)
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;  // tensor name -> position in tensors_
};

// True when the first bytes are the GGUF magic (either byte order).
bool has_gguf_magic(const void* data, uint64_t size);

// One tensor for save_gguf. The matrix (or vector) is given in numpy order: shape = [N, K] for a
// weight (stored as ne = [K, N]), up to 4 dims. Either `values` (prod(shape) floats, row-major,
// encoded to `type` by mixq's reference encoders: F32, F16, BF16, Q4_0, Q8_0, Q4_K) or `raw`
// (already-encoded bytes of any known type, raw_bytes = exactly the tensor's size).
struct GgufTensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  GgmlType type = GgmlType::F32;
  const float* values = nullptr;
  const uint8_t* raw = nullptr;
  uint64_t raw_bytes = 0;
};

// Writes a GGUF v3 file: metadata in the given order (general.alignment is added when
// `alignment` != 32 and general.quantization_version = 2 when any tensor is quantized, unless the
// caller gave them), tensor infos in the given order, each tensor padded to `alignment`.
// Throws InvalidArgument for bad shapes/types/names, Io when the file cannot be written.
void save_gguf(const std::string& path, const std::vector<GgufTensorToWrite>& tensors,
               const std::vector<std::pair<std::string, GgufValue>>& metadata = {},
               uint32_t alignment = 32);

}  // namespace mixq::formats
