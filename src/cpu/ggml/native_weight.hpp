// A GGUF block tensor repacked once, at prepare, for the native CPU kernels: the file's own
// blocks, bytes unchanged, with the rows of each 16-row panel interleaved block by block:
//
//   panel p (rows 16p .. 16p + rows_p - 1), block column kb, row r of the panel:
//     data + panel_offset(p) + (kb * rows_p + r) * block_bytes
//
// so a task that owns a panel reads one contiguous stream (the 16 rows' blocks of one K range
// sit side by side) instead of 16 strided ones, which is what one core's hardware prefetcher
// follows best while the kernel decodes a panel chunk into L1. The last panel holds only its
// real rows, so the repacked form is exactly as large as the tensor in the file (asserted by
// tests/unit/test_cpu_ggml_native.cpp); super-block scales stay in their compact in-block form
// and are decoded by the kernels (block_decode.hpp).
#pragma once

#include <cstdint>

#include "cpu/packed_weight.hpp"
#include "mixq/formats/ggml_blocks.hpp"

namespace mixq::cpu::ggml {

constexpr int kPanelRows = 16;

struct NativeWeight {
  formats::GgmlType type = formats::GgmlType::Q4_0;
  int64_t N = 0, K = 0;
  int64_t qk = 0;           // elements per block
  int64_t block_bytes = 0;  // bytes per block
  int64_t n_blocks = 0;     // blocks per row (K / qk)
  int64_t n_panels = 0;
  AlignedBytes data;

  int64_t row_bytes() const { return n_blocks * block_bytes; }
  int rows_in_panel(int64_t p) const {
    const int64_t r = N - p * kPanelRows;
    return static_cast<int>(r < kPanelRows ? r : kPanelRows);
  }
  const uint8_t* panel(int64_t p) const { return data.data() + p * kPanelRows * row_bytes(); }
  // Bytes the kernels stream (== the file's tensor bytes).
  int64_t bytes() const { return N * row_bytes(); }
};

// Repacks w.ggml (validated by the caller) on `threads` threads.
NativeWeight repack_native(const QuantizedWeight& w, int threads);

// Whether the native kernels read this ggml type id.
bool native_type_supported(uint32_t ggml_type);

}  // namespace mixq::cpu::ggml
