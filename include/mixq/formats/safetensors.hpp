// safetensors files: a memory-mapped, zero-copy reader with full validation, and a writer.
// Format: u64 LE header length N, N bytes of JSON header (may be space-padded), then the data
// buffer; offsets in the header are relative to the buffer start (formats.md §6).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mixq::formats {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // as in the file: "F16", "BF16", "F32", "I32", "U8", "F8_E4M3", ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into the mapping (may be unaligned)
  uint64_t nbytes = 0;
  uint64_t offset = 0;  // offset of the data within the file
};

// Bytes per element of a safetensors dtype string; 0 for unknown dtypes (and for the sub-byte
// F4 / F6_* types, whose size is given by safetensors_dtype_bits).
int safetensors_dtype_size(const std::string& dtype);
// Bits per element (4 for F4, 6 for F6_E2M3 / F6_E3M2); 0 for unknown dtypes.
int safetensors_dtype_bits(const std::string& dtype);
// Byte size of a tensor; false when the dtype is unknown, a dimension negative, the product
// overflows 64 bits, or a sub-byte tensor does not end on a byte boundary.
bool safetensors_tensor_bytes(const std::string& dtype, const std::vector<int64_t>& shape,
                              uint64_t* nbytes);

class SafetensorsFile {
 public:
  // Maps the file and validates the header (JSON syntax, dtypes, shapes vs byte sizes, offsets
  // inside the file, no overlaps, full coverage). Throws mixq::Error(Format/Io) naming the path.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;  // nullptr when absent; O(1)
  const SafetensorsTensor& get(const std::string& name) const;   // throws when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t file_size() const { return size_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  uint64_t size_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  // name -> position in tensors_: lookups by name must not be linear (converters look up several
  // parts per tensor, and a one-file mixture-of-experts checkpoint has 10^4-10^5 tensors)
  // (keys view tensors_[i].name, which no longer moves once open() has filled tensors_)
  std::unordered_map<std::string_view, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

class SafetensorsWriter {
 public:
  // Copies nothing until write(): `data` must stay valid until then.
  void add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
           const void* data, uint64_t nbytes);
  void set_metadata(const std::string& key, const std::string& value);
  // Writes the file: header padded with spaces to a multiple of 8 (so the buffer starts 8-aligned),
  // tensors back to back (the format forbids holes) ordered by element size, largest first, and
  // in the order added within one size, so every tensor is naturally aligned. add() validates
  // names (unique, not __metadata__), dtypes and shape-vs-size. Throws mixq::Error(Io) on failure.
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    const void* data;
    uint64_t nbytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace mixq::formats
