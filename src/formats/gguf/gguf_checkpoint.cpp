// GGUF behind the checkpoint API (formats/checkpoint.hpp): detection, inspect, load_weight.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "formats/format_registry.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/gguf.hpp"
#include "mixq/formats/input_file.hpp"

namespace mixq::formats {

bool is_gguf_file(const std::string& path) {
  // InputFile refuses FIFOs and devices before reading, so sniffing the magic cannot block.
  const InputFile f(path, "checkpoint");
  char magic[4];
  ssize_t n;
  do {
    n = ::pread(f.fd(), magic, sizeof(magic), 0);
  } while (n < 0 && errno == EINTR);
  MIXQ_CHECK(n >= 0, ErrorCode::Io, path, ": read failed: ", std::strerror(errno));
  return has_gguf_magic(magic, static_cast<size_t>(n));
}

CheckpointInfo gguf_inspect(const std::string& path) {
  const auto f = GgufFile::open(path);
  CheckpointInfo info;
  info.path = path;
  info.format = "gguf v" + std::to_string(f->version());
  for (const auto& kv : f->metadata()) info.metadata.emplace_back(kv.first, kv.second.to_string());
  for (const auto& t : f->tensors()) {
    TensorEntry e;
    e.name = t.name;
    e.type = ggml_type_name(t.type);
    for (int d = static_cast<int>(t.n_dims) - 1; d >= 0; --d) e.shape.push_back(t.ne[d]);
    e.bytes = static_cast<int64_t>(t.nbytes);
    const int64_t elems = t.n_elements();
    e.bits_per_weight = elems > 0 ? 8.0 * static_cast<double>(t.nbytes) / static_cast<double>(elems) : 0.0;
    const GgmlTypeInfo* ti = ggml_type_info(t.type);
    e.is_weight = ti && ti->convertible && t.n_dims == 2 && elems > 0;
    info.tensors.push_back(std::move(e));
  }
  return info;
}

QuantizedWeight gguf_load_weight(const std::string& path, const std::string& tensor) {
  return GgufFile::open(path)->load_weight(tensor);
}

}  // namespace mixq::formats
