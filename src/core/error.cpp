#include "mixq/error.hpp"

namespace mixq {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::Format: return "format error";
    case ErrorCode::Io: return "i/o error";
    case ErrorCode::Cuda: return "cuda error";
    case ErrorCode::Internal: return "internal error";
  }
  return "error";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(std::string("mixq: ") + error_code_name(code) + ": " + message),
      code_(code) {}

namespace detail {
void fail(ErrorCode code, const std::string& message) { throw Error(code, message); }
}  // namespace detail

}  // namespace mixq
