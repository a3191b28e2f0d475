// InputFile: see input_file.hpp.
#include "mixq/formats/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mixq/error.hpp"

namespace mixq::formats {

const char* file_kind_name(unsigned mode) {
  if (S_ISREG(mode)) return "regular file";
  if (S_ISDIR(mode)) return "directory";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISLNK(mode)) return "symbolic link";
  return "special file";
}

void require_regular_file(const std::string& path, const std::string& role) {
  struct stat st {};
  MIXQ_CHECK(::stat(path.c_str(), &st) == 0, ErrorCode::Io, role, " '", path,
             "': cannot open: ", std::strerror(errno));
  MIXQ_CHECK(S_ISREG(st.st_mode), ErrorCode::Io, role, " '", path, "' is a ",
             file_kind_name(st.st_mode), ", not a regular file");
}

InputFile::InputFile(const std::string& path, const std::string& role) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer;
  // O_NOCTTY: a terminal given by mistake does not become our controlling terminal.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  MIXQ_CHECK(fd_ >= 0, ErrorCode::Io, role, " '", path, "': cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    MIXQ_FAIL(ErrorCode::Io, role, " '", path, "': cannot stat: ", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    MIXQ_FAIL(ErrorCode::Io, role, " '", path, "' is a ", file_kind_name(st.st_mode),
              ", not a regular file");
  }
  // Regular files ignore O_NONBLOCK, but clear it so later reads behave as documented anywhere.
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<uint8_t> InputFile::read_all(uint64_t limit) const {
  MIXQ_CHECK(size_ <= limit, ErrorCode::Format, path_, ": ", size_,
             " bytes is larger than the limit of ", limit, " bytes for this kind of file");
  std::vector<uint8_t> bytes(static_cast<size_t>(size_));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd_, bytes.data() + done, bytes.size() - done,
                              static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    MIXQ_CHECK(n >= 0, ErrorCode::Io, path_, ": read failed: ", std::strerror(errno));
    // The file shrank while we read it: report what we saw rather than returning zeros.
    MIXQ_CHECK(n > 0, ErrorCode::Io, path_, ": file shrank from ", size_, " to ", done,
               " bytes while being read");
    done += static_cast<size_t>(n);
  }
  return bytes;
}

}  // namespace mixq::formats
