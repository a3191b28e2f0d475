// Host vectors to and from DeviceBuffers in the GPU tests, and a call context on a buffer (a buffer of at least 16 bytes, so that
// an empty vector still gives a valid pointer).
#pragma once

#include <algorithm>
#include <vector>

#include "mixq/ops.hpp"
#include "mixq/tensor.hpp"

namespace mixq::test {

template <typename T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer b(std::max<size_t>(v.size() * sizeof(T), 16));
  if (!v.empty()) b.copy_from_host(v.data(), v.size() * sizeof(T));
  return b;
}

template <typename T>
std::vector<T> download(const DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  b.copy_to_host(v.data(), n * sizeof(T));
  return v;
}

// A call context on `stream` (a cudaStream_t) with the whole of `ws` as its workspace.
inline ExecContext on_stream(void* stream, const DeviceBuffer& ws) {
  ExecContext c;
  c.stream = stream;
  c.workspace = ws.data();
  c.workspace_bytes = ws.size();
  return c;
}

}  // namespace mixq::test
