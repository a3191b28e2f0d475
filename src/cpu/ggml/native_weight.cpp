// Repacking a GGUF block tensor into the lane-per-row records of native_format.hpp. Prepare-time
// code: plain C++, one panel per task.
#include "cpu/ggml/native_weight.hpp"

#include <cstring>

#include "cpu/thread_pool.hpp"
#include "formats/gguf/ggml_split.hpp"
#include "mixq/error.hpp"

namespace mixq::cpu::ggml {

namespace {

// Writes row r of a record (zeroed beforehand) from its split block.
void write_row(const Format& f, const formats::GgmlSplitBlock& s, int r, uint8_t* rec) {
  uint8_t* lo = rec;
  uint8_t* hi = rec + f.off_hi();
  const int lmask = (1 << f.lb) - 1;
  for (int e = 0; e < f.qk; ++e) {
    if (f.lb == 8) {
      lo[(e / 4) * 64 + r * 4 + e % 4] = s.u[e];
    } else if (f.lb == 4) {
      const int t = e % 8;
      lo[(e / 8) * 64 + r * 4 + t % 4] |= static_cast<uint8_t>((s.u[e] & lmask) << (t < 4 ? 0 : 4));
    } else {
      const int t = e % 16;
      lo[(e / 16) * 64 + r * 4 + t % 4] |= static_cast<uint8_t>((s.u[e] & lmask) << (2 * (t / 4)));
    }
    const int high = f.lb == 8 ? 0 : s.u[e] >> f.lb;
    if (f.hb == 1) {
      const int t = e % 32;
      hi[(e / 32) * 64 + r * 4 + t % 4] |= static_cast<uint8_t>(high << (t / 4));
    } else if (f.hb == 2) {
      const int t = e % 16;
      hi[(e / 16) * 64 + r * 4 + t % 4] |= static_cast<uint8_t>(high << (2 * (t / 4)));
    }
  }
  uint8_t* sc = rec + f.off_sc();
  switch (f.sk) {
    case ScaleKind::K4:
      for (int j = 0; j < f.n_sub(); ++j) {
        sc[j * 16 + r] = s.sc[j];
        sc[(f.n_sub() + j) * 16 + r] = s.mn[j];
      }
      break;
    case ScaleKind::Q2K: case ScaleKind::Signed8:
      for (int j = 0; j < f.n_sub(); ++j) sc[j * 16 + r] = s.sc[j];
      break;
    case ScaleKind::Q3K:
      // ggml's 6-bit scale j: low4 = j < 8 ? q3[j] & 15 : q3[j - 8] >> 4,
      // high2 = (q3[8 + j % 4] >> (2 * (j / 4))) & 3; stored as native_format.hpp says.
      for (int j = 0; j < 16; ++j) {
        const int v = formats::q3k_scale(s.q3, j) + 32;
        const int low4 = v & 0xF, high2 = v >> 4;
        sc[(j / 2) * 16 + r] |= static_cast<uint8_t>(low4 << (4 * (j % 2)));
        sc[(8 + j / 4) * 16 + r] |= static_cast<uint8_t>(high2 << (2 * (j % 4)));
      }
      break;
    default: break;
  }
  std::memcpy(rec + f.off_d() + 2 * r, &s.d, 2);
  if (f.has_dm()) std::memcpy(rec + f.off_dm() + 2 * r, &s.dm, 2);
}

}  // namespace

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
  nw.fmt = format_of(nw.type);
  nw.N = w.N;
  nw.K = w.K;
  nw.n_blocks = w.K / nw.fmt.qk;
  nw.n_panels = (w.N + kPanelRows - 1) / kPanelRows;
  nw.record_bytes = nw.fmt.record_bytes();
  nw.data = AlignedBytes(static_cast<size_t>(nw.bytes()));
  const uint8_t* src = w.ggml->data.data();
  const int64_t bb = ti->block_bytes, rb = nw.n_blocks * bb;
  // One panel per task: the pages of the repacked copy are first touched by the thread that
  // fills them.
  parallel_for(resolve_num_threads(threads), nw.n_panels, [&](int64_t p) {
    const int rows = nw.rows_in_panel(p);
    uint8_t* dst = nw.data.data() + p * nw.n_blocks * nw.record_bytes;
    std::memset(dst, 0, static_cast<size_t>(nw.n_blocks * nw.record_bytes));
    formats::GgmlSplitBlock s;
    for (int64_t kb = 0; kb < nw.n_blocks; ++kb)
      for (int r = 0; r < rows; ++r) {
        formats::split_ggml_block(nw.type, src + (p * kPanelRows + r) * rb + kb * bb, s);
        write_row(nw.fmt, s, r, dst + kb * nw.record_bytes);
      }
  });
  return nw;
}

}  // namespace mixq::cpu::ggml
