// safetensors files: a memory-mapped, zero-copy reader with full validation, and a writer.
// Format: u64 LE header length N, N bytes of JSON header (may be space-padded), then the data
// buffer; offsets in the header are relative to the buffer start (formats.md §6).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mixq::formats {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;           // as in the file: "F16", "BF16", "F32", "I32", "U8", "F8_E4M3", ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into the mapping (may be unaligned)
  uint64_t nbytes = 0;
  uint64_t offset = 0;         // offset of the data within the file
};

// Bytes per element of a safetensors dtype string; 0 for unknown dtypes.
int safetensors_dtype_size(const std::string& dtype);

class SafetensorsFile {
 public:
  // Maps the file and validates the header (JSON syntax, dtypes, shapes vs byte sizes, offsets
  // inside the file, no overlaps, full coverage). Throws mixq::Error(Format/Io) naming the path.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;  // nullptr when absent
  const SafetensorsTensor& get(const std::string& name) const;    // throws when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t file_size() const { return size_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  uint64_t size_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

class SafetensorsWriter {
 public:
  // Copies nothing until write(): `data` must stay valid until then.
  void add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
           const void* data, uint64_t nbytes);
  void set_metadata(const std::string& key, const std::string& value);
  // Writes the file (header padded with spaces to a multiple of 8, tensors 8-aligned in the
  // order added). Throws mixq::Error(Io) on failure.
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
