#include "core/kernel_k_layout.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "mixq/error.hpp"

namespace mixq {

namespace {

int log2_exact(int64_t v) {
  int s = 0;
  while ((int64_t(1) << s) < v) ++s;
  return (int64_t(1) << s) == v ? s : -1;
}

// Kernel group of a plain or phased weight: its block_k (a power of two >= min_group), or the
// whole row when one block covers it.
int plain_group_shift(const QuantizedWeight& w, int64_t min_group) {
  if (w.k_phase == 0 && w.block_k >= w.K) return 30;
  const int s = log2_exact(w.block_k);
  MIXQ_CHECK(s >= 0 && w.block_k >= min_group, ErrorCode::Unsupported, "cuda weight-only: block_k ",
             w.block_k, " must be a power of two >= ", min_group, " or cover the whole row (K = ",
             w.K, (w.k_phase ? ", k_phase = " : ""), (w.k_phase ? std::to_string(w.k_phase) : ""),
             ")");
  return s;
}

}  // namespace

KernelKLayout kernel_k_layout(const QuantizedWeight& w, int64_t min_group) {
  KernelKLayout L;
  if (w.k_block_starts.empty()) {
    L.group_shift = plain_group_shift(w, min_group);
    L.K = w.K + w.k_phase;
    L.x_shift = w.k_phase;
    if (!w.k_perm.empty()) {  // gathered: the shift moves into the column table
      L.x_col.assign(size_t(L.K), -1);
      for (int64_t k = 0; k < w.K; ++k) L.x_col[size_t(k + w.k_phase)] = w.k_perm[size_t(k)];
      L.x_shift = 0;
      if (w.k_phase) {
        L.canon_col.resize(size_t(L.K));
        for (int64_t j = 0; j < L.K; ++j) L.canon_col[size_t(j)] = int32_t(j - w.k_phase);
        L.group_block.resize(size_t((L.K + L.group() - 1) / L.group()));
        for (size_t g = 0; g < L.group_block.size(); ++g) L.group_block[g] = int32_t(g);
      }
    }
    return L;
  }
  // Listed blocks: the kernel group gv with the fewest bytes per row (codes of K' columns at the
  // code width plus one 4-byte scale pair per kernel group), ties to the larger group.
  const int64_t nb = w.n_blocks_k();
  int64_t longest = 1;
  for (int64_t b = 0; b < nb; ++b) longest = std::max(longest, w.k_block_end(b) - w.k_block_begin(b));
  const int bits = int(dtype_bits(w.code_type));
  int best_shift = -1;
  double best_bytes = 0;
  for (int s = log2_exact(min_group) >= 0 ? log2_exact(min_group) : 4; s <= 30; ++s) {
    const int64_t gv = int64_t(1) << s;
    int64_t cols = 0, groups = 0;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t g = (w.k_block_end(b) - w.k_block_begin(b) + gv - 1) / gv;
      groups += g;
      cols += g * gv;
    }
    const double bytes = double(cols) * bits / 8 + double(groups) * 4;
    if (best_shift < 0 || bytes <= best_bytes) {
      best_shift = s;
      best_bytes = bytes;
    }
    if (gv >= longest) break;
  }
  L.group_shift = best_shift;
  const int64_t gv = L.group();
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t k0 = w.k_block_begin(b), len = w.k_block_end(b) - k0;
    const int64_t groups = (len + gv - 1) / gv;
    for (int64_t i = 0; i < groups * gv; ++i)
      L.canon_col.push_back(i < len ? int32_t(k0 + i) : -1);
    for (int64_t g = 0; g < groups; ++g) L.group_block.push_back(int32_t(b));
  }
  L.K = int64_t(L.canon_col.size());
  MIXQ_CHECK(L.K <= (int64_t(1) << 30), ErrorCode::Unsupported, "cuda weight-only: the act-order "
             "shard's ", nb, " listed blocks take ", L.K, " kernel columns (>= 2^30)");
  L.x_col.resize(size_t(L.K));
  for (int64_t j = 0; j < L.K; ++j) {
    const int32_t c = L.canon_col[size_t(j)];
    L.x_col[size_t(j)] = c < 0 ? -1 : w.k_perm.empty() ? c : w.k_perm[size_t(c)];
  }
  return L;
}

std::vector<uint8_t> codes_in_kernel_layout(const QuantizedWeight& w, const KernelKLayout& L) {
  const int64_t rb_out = dtype_bytes(w.code_type, L.K), rb_in = w.row_bytes();
  std::vector<uint8_t> out(size_t(w.N * rb_out), 0);
  const bool nibbles = dtype_bits(w.code_type) == 4;
  for (int64_t n = 0; n < w.N; ++n) {
    const uint8_t* src = w.codes.data() + n * rb_in;
    uint8_t* dst = out.data() + n * rb_out;
    if (!nibbles && L.canon_col.empty()) {  // a shift of whole bytes
      std::memcpy(dst + L.x_shift, src, size_t(w.K));
      continue;
    }
    for (int64_t j = 0; j < L.K; ++j) {
      const int64_t c = L.canonical(j);
      if (c < 0) continue;
      if (nibbles) {
        const uint8_t v = (src[c >> 1] >> ((c & 1) * 4)) & 0xF;
        dst[j >> 1] = uint8_t(dst[j >> 1] | (v << ((j & 1) * 4)));
      } else {
        dst[j] = src[c];
      }
    }
  }
  return out;
}

}  // namespace mixq
