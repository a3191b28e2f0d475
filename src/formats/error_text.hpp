// Internal: re-throwing a mixq::Error with more context ("tensor 'x' row 3: ...") without
// repeating its "mixq: <kind>: " prefix in the middle of the new message.
#pragma once

#include <string>

#include "mixq/error.hpp"

namespace mixq::formats {

inline std::string bare_message(const Error& e) {
  const std::string m = e.what();
  const std::string prefix = std::string("mixq: ") + error_code_name(e.code()) + ": ";
  return m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m;
}

}  // namespace mixq::formats
