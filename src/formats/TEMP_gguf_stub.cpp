// TEMPORARY STUB — delete at merge. Stands in for the GGUF reader (written by another helper)
// so the safetensors branch links on its own: is_gguf_file() is always false.
#include "formats/format_registry.hpp"
#include "mixq/error.hpp"

namespace mixq::formats {
bool is_gguf_file(const std::string&) {
  return false;
}
CheckpointInfo gguf_inspect(const std::string& path) {
  MIXQ_FAIL(ErrorCode::Unsupported, path, ": GGUF support is not in this build (TEMP stub)");
}
QuantizedWeight gguf_load_weight(const std::string& path, const std::string&) {
  MIXQ_FAIL(ErrorCode::Unsupported, path, ": GGUF support is not in this build (TEMP stub)");
}
}  // namespace mixq::formats
