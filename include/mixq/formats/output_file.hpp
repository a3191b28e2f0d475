// Writing files without ever losing one: every writer of mixq goes through OutputFile, which
// writes a complete file under a temporary name in the destination's directory and renames it over
// the destination only once it is complete and closed. A failure (full disk, a bad value found
// half-way, a crash) leaves the old file as it was, and readers that still map the old file keep
// their bytes (the rename gives the name to a new inode).
//
// Streams are the exception: a destination that is this process's standard output, a FIFO or a
// character device (/dev/stdout, a pipe, /dev/null) is written in place, since it cannot be
// renamed over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mixq::formats {

// Checks, before any work starts, that `path` can be written (its directory exists and is
// writable; it is not a directory, block device or dangling link) and that it is none of
// `inputs` (same device and inode after following links, so a hard or symbolic link to an input
// is refused too). `role` names the option in messages ("-o", "--json"). Throws mixq::Error(Io /
// InvalidArgument) naming the path.
void check_output_path(const std::string& path, const std::string& role,
                       const std::vector<std::string>& inputs = {});

// True when `path` is (a link to) this process's standard output: data written there must not
// be mixed with the summary lines a command prints.
bool writes_to_stdout(const std::string& path);

class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  // Without commit(): the temporary file is removed, the destination stays as it was.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t n);
  uint64_t bytes_written() const { return written_; }
  // Where the data is going until commit(): the temporary file, or the destination when streamed.
  // For writers that insist on a path (flush()ing first keeps the order of bytes).
  const std::string& temp_path() const { return temp_; }
  bool streamed() const { return streamed_; }
  void flush();
  // Flushes, syncs and closes the file, then renames it over the destination. Throws on failure
  // (the temporary file is removed).
  void commit();

 private:
  void discard() noexcept;
  std::string path_, target_, temp_;
  int fd_ = -1;
  bool streamed_ = false, committed_ = false;
  uint64_t written_ = 0;
  std::vector<uint8_t> buffer_;
};

}  // namespace mixq::formats
