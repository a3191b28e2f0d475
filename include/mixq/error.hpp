// mixq error handling: one exception type carrying a code, the failed condition and the
// offending values. Every public entry point validates its arguments with MIXQ_CHECK so that bad
// input produces a message such as
//   mixq: invalid argument: linear: x.shape[1] (4095) must equal weight K (4096)
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace mixq {

enum class ErrorCode {
  InvalidArgument,  // wrong shape, type, stride, alignment, device, option value
  Unsupported,      // a valid combination that this backend / build does not implement
  Format,           // malformed file content (bad magic, truncated, inconsistent header)
  Io,               // file system errors
  Cuda,             // CUDA runtime / cuBLAS failure
  Internal,         // a bug in mixq
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// The message of e without its "mixq: <kind>: " prefix: for re-throwing an error with more
// context ("tensor 'x' row 3: ...") without repeating the prefix in the middle of the new message.
inline std::string error_message_body(const Error& e) {
  const std::string m = e.what();
  const std::string prefix = std::string("mixq: ") + error_code_name(e.code()) + ": ";
  return m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m;
}

namespace detail {

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

[[noreturn]] void fail(ErrorCode code, const std::string& message);

}  // namespace detail

}  // namespace mixq

// MIXQ_CHECK(cond, code, message parts...): throws mixq::Error(code, "<parts>") when !cond.
// The message parts are streamed, so callers write the argument names and their values:
//   MIXQ_CHECK(K % g == 0, ErrorCode::InvalidArgument, "K (", K, ") % block_k (", g, ") != 0");
#define MIXQ_CHECK(cond, code, ...)                                  \
  do {                                                               \
    if (!(cond)) ::mixq::detail::fail((code), ::mixq::detail::cat(__VA_ARGS__)); \
  } while (0)

#define MIXQ_CHECK_ARG(cond, ...) MIXQ_CHECK(cond, ::mixq::ErrorCode::InvalidArgument, __VA_ARGS__)
#define MIXQ_FAIL(code, ...) ::mixq::detail::fail((code), ::mixq::detail::cat(__VA_ARGS__))
