// Opening files for reading without surprises: every reader goes through open_input_file, which
// refuses anything but a regular file *before* it can block or read (a FIFO with no writer would
// hang a plain open(); /dev/zero would never end; a directory has no bytes), and reads small files
// whole with a size limit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mixq::formats {

// A read-only file descriptor of a regular file, closed on destruction.
class InputFile {
 public:
  // Opens `path` without blocking (O_NONBLOCK, so a FIFO cannot hang the open), then insists on a
  // regular file. `role` names the file in messages ("input", "weights", ...). Throws
  // mixq::Error(Io) "<role> '<path>': <why>" for a missing file, a directory, a FIFO, a device.
  InputFile(const std::string& path, const std::string& role);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // The whole file; Format error when it is larger than `limit` bytes.
  std::vector<uint8_t> read_all(uint64_t limit) const;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// "directory", "FIFO", "character device", ... for a st_mode value (for messages).
const char* file_kind_name(unsigned mode);

// Throws unless `path` names a regular file (following symbolic links), without opening it.
void require_regular_file(const std::string& path, const std::string& role);

}  // namespace mixq::formats
