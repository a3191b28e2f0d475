// Repacking a GGUF block tensor into the panel-interleaved native form (native_weight.hpp).
#include "cpu/ggml/native_weight.hpp"

#include <algorithm>
#include <cstring>

#include "cpu/thread_pool.hpp"
#include "mixq/error.hpp"

namespace mixq::cpu::ggml {

using formats::GgmlType;

bool native_type_supported(uint32_t t) {
  switch (static_cast<GgmlType>(t)) {
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q8_0: case GgmlType::IQ4_NL: case GgmlType::Q2_K: case GgmlType::Q3_K:
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: case GgmlType::IQ4_XS:
      return true;
    default: return false;
  }
}

NativeWeight repack_native(const QuantizedWeight& w, int threads) {
  MIXQ_CHECK(w.ggml && native_type_supported(w.ggml->type), ErrorCode::Internal,
             "repack_native: no native ggml blocks");
  const formats::GgmlTypeInfo* ti = formats::ggml_type_info(w.ggml->type);
  NativeWeight nw;
  nw.type = static_cast<GgmlType>(w.ggml->type);
  nw.N = w.N;
  nw.K = w.K;
  nw.qk = ti->block_elems;
  nw.block_bytes = ti->block_bytes;
  nw.n_blocks = w.K / nw.qk;
  nw.n_panels = (w.N + kPanelRows - 1) / kPanelRows;
  nw.data = AlignedBytes(static_cast<size_t>(nw.bytes()));
  const uint8_t* src = w.ggml->data.data();
  const int64_t rb = nw.row_bytes(), bb = nw.block_bytes;
  // One panel per task: the pages of the repacked copy are first touched by the thread that
  // fills them, and the source rows of a panel are read once, sequentially.
  parallel_for(resolve_num_threads(threads), nw.n_panels, [&](int64_t p) {
    const int rows = nw.rows_in_panel(p);
    uint8_t* dst = nw.data.data() + p * kPanelRows * rb;
    for (int r = 0; r < rows; ++r) {
      const uint8_t* s = src + (p * kPanelRows + r) * rb;
      for (int64_t kb = 0; kb < nw.n_blocks; ++kb)
        std::memcpy(dst + (kb * rows + r) * bb, s + kb * bb, static_cast<size_t>(bb));
    }
  });
  return nw;
}

}  // namespace mixq::cpu::ggml
