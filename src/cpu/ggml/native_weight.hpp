// A GGUF block tensor repacked once, at prepare, into the lane-per-row records of
// native_format.hpp: panel p (rows 16p .. 16p + 15), block column kb at
//   data + (p * n_blocks + kb) * record_bytes
// so a task that owns a panel reads one contiguous stream, and every 64-byte load of codes is
// directly the operand of one vpdpbusd for 16 output rows. The last panel is padded to 16 rows
// (zero codes and scales); apart from that and the spread scale bytes of Q4_K / Q5_K / IQ4_XS
// (<= 2.8 %, native_format.hpp), the repacked form is as large as the tensor in the file.
#pragma once

#include <cstdint>

#include "cpu/ggml/native_format.hpp"
#include "cpu/packed_weight.hpp"
#include "mixq/quantized_weight.hpp"

namespace mixq::cpu::ggml {

constexpr int kPanelRows = 16;

struct NativeWeight {
  GgmlType type = GgmlType::Q4_0;
  Format fmt{};
  int64_t N = 0, K = 0;
  int64_t n_blocks = 0;      // blocks per row (K / qk)
  int64_t n_panels = 0;
  int64_t record_bytes = 0;  // one (panel, block column) record
  AlignedBytes data;

  const uint8_t* panel(int64_t p) const { return data.data() + p * n_blocks * record_bytes; }
  int rows_in_panel(int64_t p) const {
    const int64_t r = N - p * kPanelRows;
    return static_cast<int>(r < kPanelRows ? r : kPanelRows);
  }
  // Bytes the kernels stream.
  int64_t bytes() const { return n_panels * n_blocks * record_bytes; }
};

// Repacks w.ggml (validated by the caller) on `threads` threads (0: all).
NativeWeight repack_native(const QuantizedWeight& w, int threads);

// Whether the native kernels read this ggml type id.
bool native_type_supported(uint32_t ggml_type);

}  // namespace mixq::cpu::ggml
