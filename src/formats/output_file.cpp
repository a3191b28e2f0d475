// OutputFile and check_output_path: see output_file.hpp.
#include "mixq/formats/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "mixq/error.hpp"
#include "mixq/formats/input_file.hpp"

namespace mixq::formats {

namespace {

constexpr size_t kBufferBytes = size_t(1) << 20;

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_stream_kind(unsigned mode) {
  return S_ISFIFO(mode) || S_ISCHR(mode) || S_ISSOCK(mode);
}

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// The file a rename must replace: symbolic links are followed, so that a link (for instance
// into a model cache) keeps pointing at the new contents instead of being replaced by a file.
std::string rename_target(const std::string& path) {
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) return path;
  char* resolved = ::realpath(path.c_str(), nullptr);
  MIXQ_CHECK(resolved != nullptr, ErrorCode::Io, "output '", path,
             "' is a symbolic link that cannot be followed: ", std::strerror(errno));
  std::string out(resolved);
  std::free(resolved);
  return out;
}

void write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    MIXQ_CHECK(k > 0, ErrorCode::Io, path, ": write failed: ", std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

}  // namespace

bool writes_to_stdout(const std::string& path) {
  struct stat out {}, target {};
  return ::fstat(STDOUT_FILENO, &out) == 0 && ::stat(path.c_str(), &target) == 0 &&
         same_file(out, target);
}

void check_output_path(const std::string& path, const std::string& role,
                       const std::vector<std::string>& inputs) {
  MIXQ_CHECK_ARG(!path.empty(), role, ": the output path is empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    MIXQ_CHECK(!S_ISDIR(st.st_mode), ErrorCode::Io, role, " '", path,
               "' is a directory; give a file name");
    MIXQ_CHECK(S_ISREG(st.st_mode) || is_stream_kind(st.st_mode), ErrorCode::Io, role, " '", path,
               "' is a ", file_kind_name(st.st_mode), "; mixq writes regular files and streams");
    for (const std::string& in : inputs) {
      struct stat ist {};
      if (::stat(in.c_str(), &ist) == 0 && same_file(st, ist))
        MIXQ_FAIL(ErrorCode::InvalidArgument, role, " '", path, "' is the input file '", in,
                  "' (same file); writing it would destroy the input: choose another output");
    }
    if (S_ISREG(st.st_mode))
      MIXQ_CHECK(::access(path.c_str(), W_OK) == 0, ErrorCode::Io, role, " '", path,
                 "' cannot be replaced: ", std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return;  // streamed in place: no directory entry is created
  } else {
    const int e = errno;
    struct stat lst {};
    MIXQ_CHECK(!(::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)), ErrorCode::Io, role,
               " '", path, "' is a symbolic link to a missing file");
    MIXQ_CHECK(e == ENOENT, ErrorCode::Io, role, " '", path, "': ", std::strerror(e));
  }
  const std::string dir = dir_of(rename_target(path));
  struct stat dst {};
  MIXQ_CHECK(::stat(dir.c_str(), &dst) == 0, ErrorCode::Io, role, " '", path, "': directory '",
             dir, "' does not exist");
  MIXQ_CHECK(S_ISDIR(dst.st_mode), ErrorCode::Io, role, " '", path, "': '", dir,
             "' is not a directory");
  MIXQ_CHECK(::access(dir.c_str(), W_OK | X_OK) == 0, ErrorCode::Io, role, " '", path,
             "': cannot create files in directory '", dir, "': ", std::strerror(errno));
}

OutputFile::OutputFile(const std::string& path) : path_(path) {
  MIXQ_CHECK_ARG(!path.empty(), "output path is empty");
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (writes_to_stdout(path)) {
    fd_ = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    MIXQ_CHECK(fd_ >= 0, ErrorCode::Io, path, ": cannot use standard output: ", std::strerror(errno));
    streamed_ = true;
  } else if (exists && is_stream_kind(st.st_mode)) {
    // Non-blocking open: a FIFO nobody reads fails with ENXIO here instead of hanging.
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    MIXQ_CHECK(fd_ >= 0, ErrorCode::Io, path, ": cannot open for writing: ",
               errno == ENXIO ? "no process is reading this FIFO" : std::strerror(errno));
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
    streamed_ = true;
  }
  if (streamed_) {
    temp_ = target_ = path;
    buffer_.reserve(kBufferBytes);
    return;
  }
  MIXQ_CHECK(!exists || S_ISREG(st.st_mode), ErrorCode::Io, path, " is a ",
             file_kind_name(st.st_mode), ", not a file mixq can replace");
  target_ = rename_target(path);
  // A hidden name in the same directory: rename() is atomic only within one file system.
  static std::atomic<unsigned> counter{0};
  const std::string stem = dir_of(target_) + "/." + base_of(target_) + ".tmp-" +
                           std::to_string(::getpid()) + "-";
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temp_ = stem + std::to_string(counter++);
    // O_EXCL: never reuse (or follow a link planted as) an existing name; 0666 & ~umask like any
    // newly created file.
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    MIXQ_CHECK(fd_ >= 0 || errno == EEXIST, ErrorCode::Io, path, ": cannot create '", temp_,
               "': ", std::strerror(errno));
  }
  MIXQ_CHECK(fd_ >= 0, ErrorCode::Io, path, ": cannot find a free temporary name");
  if (exists) (void)::fchmod(fd_, st.st_mode & 07777);  // a replaced file keeps its permissions
  buffer_.reserve(kBufferBytes);
}

OutputFile::~OutputFile() {
  if (!committed_) discard();
}

void OutputFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!streamed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void OutputFile::write(const void* data, size_t n) {
  MIXQ_CHECK(fd_ >= 0, ErrorCode::Internal, path_, ": write after commit");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  written_ += n;
  if (buffer_.size() + n <= kBufferBytes) {
    buffer_.insert(buffer_.end(), p, p + n);
    return;
  }
  flush();
  if (n >= kBufferBytes) {
    write_all(fd_, p, n, path_);
  } else {
    buffer_.insert(buffer_.end(), p, p + n);
  }
}

void OutputFile::flush() {
  if (buffer_.empty()) return;
  write_all(fd_, buffer_.data(), buffer_.size(), path_);
  buffer_.clear();
}

void OutputFile::commit() {
  MIXQ_CHECK(fd_ >= 0 && !committed_, ErrorCode::Internal, path_, ": commit twice");
  try {
    flush();
    // The data must be on disk before the name points at it, or a crash right after the rename
    // could leave an empty file where the old one was.
    MIXQ_CHECK(streamed_ || ::fsync(fd_) == 0, ErrorCode::Io, path_, ": fsync failed: ",
               std::strerror(errno));
  } catch (...) {
    discard();
    throw;
  }
  const int rc = ::close(fd_);
  const int e = errno;
  fd_ = -1;
  if (rc != 0) {
    discard();
    MIXQ_FAIL(ErrorCode::Io, path_, ": close failed: ", std::strerror(e));
  }
  if (!streamed_) {
    if (::rename(temp_.c_str(), target_.c_str()) != 0) {
      const int re = errno;
      discard();
      MIXQ_FAIL(ErrorCode::Io, path_, ": cannot rename the finished file into place: ",
                std::strerror(re));
    }
    const int dfd = ::open(dir_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)::fsync(dfd);  // make the rename itself durable; best effort
      ::close(dfd);
    }
  }
  committed_ = true;
}

}  // namespace mixq::formats
