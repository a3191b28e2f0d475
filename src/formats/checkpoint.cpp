// Format detection: GGUF by its magic, everything else must be safetensors.
#include "mixq/formats/checkpoint.hpp"

#include "formats/format_registry.hpp"

namespace mixq::formats {

CheckpointInfo inspect_checkpoint(const std::string& path) {
  return is_gguf_file(path) ? gguf_inspect(path) : safetensors_inspect(path);
}

QuantizedWeight load_weight(const std::string& path, const std::string& tensor) {
  return is_gguf_file(path) ? gguf_load_weight(path, tensor)
                            : safetensors_load_weight(path, tensor);
}

}  // namespace mixq::formats
