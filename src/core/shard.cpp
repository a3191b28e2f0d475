// Tensor-parallel shards of the canonical weight (mixq/shard.hpp,
// docs/decisions/tensor-parallel-shards.md). Codes are copied, scales / zeros of every block the
// shard touches are copied whole, never re-quantized: a shard dequantizes to the global bits.
#include "mixq/shard.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "mixq/error.hpp"
#include "mixq/formats/ggml_blocks.hpp"
#include "core/shard_rows.hpp"

namespace mixq {

const char* shard_axis_name(ShardAxis a) {
  switch (a) {
    case ShardAxis::Column: return "column";
    case ShardAxis::Row: return "row";
  }
  return "?";
}

namespace {

void check_spec(const ShardSpec& s, const char* op) {
  MIXQ_CHECK_ARG(s.world >= 1, op, ": world (", s.world, ") must be >= 1");
  MIXQ_CHECK_ARG(s.rank >= 0 && s.rank < s.world, op, ": rank (", s.rank, ") must be in [0, world=",
                 s.world, ")");
  MIXQ_CHECK_ARG(s.axis == ShardAxis::Column || s.axis == ShardAxis::Row, op, ": axis (",
                 int(s.axis), ") must be Column or Row");
  MIXQ_CHECK_ARG(s.granularity >= 1, op, ": granularity (", s.granularity, ") must be >= 1");
}

int64_t scale_bytes(const QuantizedWeight& w) { return dtype_bits(w.scale_type) / 8; }
int64_t zero_bytes(const QuantizedWeight& w) {
  return w.zero_kind == ZeroKind::ZeroPoint ? 4 : scale_bytes(w);
}

// Copies the [nb0, nb0 + s.n_blocks_n()) x kbs scale (and zero) entries of w into s.
void copy_block_meta(const QuantizedWeight& w, QuantizedWeight& s, int64_t nb0,
                     const std::vector<int64_t>& kbs) {
  if (!w.has_scales) return;
  const int64_t nbn = s.n_blocks_n(), nbk = static_cast<int64_t>(kbs.size());
  const int64_t sb = scale_bytes(w), zb = zero_bytes(w), wk = w.n_blocks_k();
  s.scales.assign(static_cast<size_t>(nbn * nbk * sb), 0);
  if (w.zero_kind != ZeroKind::None) s.zeros.assign(static_cast<size_t>(nbn * nbk * zb), 0);
  for (int64_t i = 0; i < nbn; ++i)
    for (int64_t j = 0; j < nbk; ++j) {
      const size_t from = static_cast<size_t>((nb0 + i) * wk + kbs[j]), to = size_t(i * nbk + j);
      std::memcpy(&s.scales[to * sb], &w.scales[from * sb], static_cast<size_t>(sb));
      if (w.zero_kind != ZeroKind::None)
        std::memcpy(&s.zeros[to * zb], &w.zeros[from * zb], static_cast<size_t>(zb));
    }
}

uint32_t get_nibble(const uint8_t* row, int64_t k) { return (row[k >> 1] >> ((k & 1) * 4)) & 0xF; }

// Column-parallel: rows [b, e). K-side fields (phase, listed blocks, k_perm) are unchanged.
void shard_rows(const QuantizedWeight& w, int64_t b, int64_t e, QuantizedWeight& s) {
  s.N = e - b;
  s.K = w.K;
  s.k_phase = w.k_phase;
  s.k_block_starts = w.k_block_starts;
  s.k_perm = w.k_perm;
  const int64_t rb = w.row_bytes();
  s.codes.assign(w.codes.begin() + b * rb, w.codes.begin() + e * rb);
  if (!w.has_scales) return;
  const int64_t nb0 = w.n_block(b), nb1 = w.n_block(e - 1) + 1;
  s.n_phase = b + w.n_phase - nb0 * w.block_n;
  if (nb1 - nb0 == 1) {
    // One N block: row 0 of the shard uses it whatever the phase, so the phase is dropped.
    s.n_phase = 0;
    if (s.block_n > std::max<int64_t>(s.N, 128)) s.block_n = s.N;
  }
  std::vector<int64_t> kbs(static_cast<size_t>(w.n_blocks_k()));
  for (size_t j = 0; j < kbs.size(); ++j) kbs[j] = static_cast<int64_t>(j);
  copy_block_meta(w, s, nb0, kbs);
  if (w.ggml) {  // whole rows of ggml blocks: the same bytes, fewer rows
    const formats::GgmlTypeInfo* t = formats::ggml_type_info(w.ggml->type);
    const int64_t grb = w.K / t->block_elems * t->block_bytes;
    auto g = std::make_shared<GgmlBlocks>();
    g->type = w.ggml->type;
    g->data.assign(w.ggml->data.begin() + b * grb, w.ggml->data.begin() + e * grb);
    s.ggml = std::move(g);
  }
}

// Row-parallel: original K columns [b, e).
void shard_cols(const QuantizedWeight& w, int64_t b, int64_t e, QuantizedWeight& s) {
  s.N = w.N;
  s.K = e - b;
  s.n_phase = w.n_phase;
  // The canonical columns this rank keeps, in canonical order (act-order: those whose original
  // column is in [b, e); their blocks stay in canonical order, so the kept blocks ascend).
  std::vector<int64_t> cols;
  cols.reserve(static_cast<size_t>(s.K));
  if (w.k_perm.empty()) {
    for (int64_t k = b; k < e; ++k) cols.push_back(k);
  } else {
    s.k_perm.reserve(static_cast<size_t>(s.K));
    for (int64_t j = 0; j < w.K; ++j)
      if (w.k_perm[j] >= b && w.k_perm[j] < e) {
        cols.push_back(j);
        s.k_perm.push_back(static_cast<int32_t>(w.k_perm[j] - b));
      }
  }
  // Codes.
  const int64_t rb = w.row_bytes(), srb = s.row_bytes();
  s.codes.assign(static_cast<size_t>(s.N * srb), 0);
  const bool contiguous = w.k_perm.empty();
  for (int64_t n = 0; n < w.N; ++n) {
    const uint8_t* src = w.codes.data() + n * rb;
    uint8_t* dst = s.codes.data() + n * srb;
    if (!is_subbyte(w.code_type)) {
      const int64_t eb = dtype_bits(w.code_type) / 8;
      if (contiguous) {
        std::memcpy(dst, src + b * eb, static_cast<size_t>(s.K * eb));
      } else {
        for (int64_t j = 0; j < s.K; ++j)
          std::memcpy(dst + j * eb, src + cols[j] * eb, static_cast<size_t>(eb));
      }
    } else if (contiguous && (b & 1) == 0) {
      std::memcpy(dst, src + b / 2, static_cast<size_t>(srb));
      if (s.K & 1) dst[srb - 1] &= 0x0F;  // the unused high nibble of an odd row stays 0
    } else {
      for (int64_t j = 0; j < s.K; ++j)
        dst[j >> 1] |= static_cast<uint8_t>(get_nibble(src, cols[j]) << ((j & 1) * 4));
    }
  }
  if (!w.has_scales) return;
  // Kept K blocks and how many kept columns each holds.
  std::vector<int64_t> kbs, sizes;
  for (int64_t j = 0; j < s.K; ++j) {
    const int64_t kb = w.k_block(cols[j]);
    if (kbs.empty() || kbs.back() != kb) {
      kbs.push_back(kb);
      sizes.push_back(0);
    }
    ++sizes.back();
  }
  const size_t B = kbs.size();
  bool uniform = true;  // full interior blocks: a phase describes them
  for (size_t i = 1; i + 1 < B; ++i) uniform = uniform && sizes[i] == w.block_k;
  if (B == 1) {
    s.block_k = s.K;  // one block: its scale covers the whole shard row
  } else if (uniform) {
    s.k_phase = w.block_k - sizes[0];
  } else {
    s.k_block_starts.assign(1, 0);
    for (size_t i = 0; i < B; ++i)
      s.k_block_starts.push_back(static_cast<int32_t>(s.k_block_starts.back() + sizes[i]));
  }
  copy_block_meta(w, s, 0, kbs);
  if (w.ggml && s.plain_blocks()) {  // the split falls on ggml block boundaries: slice each row
    const formats::GgmlTypeInfo* t = formats::ggml_type_info(w.ggml->type);
    const int64_t qk = t->block_elems, bb = t->block_bytes;
    if (b % qk == 0 && e % qk == 0) {
      const int64_t grb = w.K / qk * bb, sgrb = s.K / qk * bb;
      auto g = std::make_shared<GgmlBlocks>();
      g->type = w.ggml->type;
      g->data.resize(static_cast<size_t>(w.N * sgrb));
      for (int64_t n = 0; n < w.N; ++n)
        std::memcpy(g->data.data() + n * sgrb, w.ggml->data.data() + n * grb + b / qk * bb,
                    static_cast<size_t>(sgrb));
      s.ggml = std::move(g);
    }
  }
}

// The scheme fields of w, no data.
QuantizedWeight empty_like(const QuantizedWeight& w) {
  QuantizedWeight s;
  s.code_type = w.code_type;
  s.block_k = w.block_k;
  s.block_n = w.block_n;
  s.scale_type = w.scale_type;
  s.zero_kind = w.zero_kind;
  s.has_scales = w.has_scales;
  return s;
}

}  // namespace

namespace {

// w cut to [b, e) of its rows (shard_rows) or original columns (shard_cols), validated, with its
// provenance unchanged.
template <typename Cut>
QuantizedWeight cut_range(const QuantizedWeight& w, int64_t b, int64_t e, bool rows, Cut cut) {
  w.validate();
  const int64_t dim = rows ? w.N : w.K;
  MIXQ_CHECK_ARG(b >= 0 && b < e && e <= dim, rows ? "shard_row_range: rows [" : "shard_col_range: columns [",
                 b, ", ", e, ") outside [0, ", rows ? "N=" : "K=", dim, ")");
  QuantizedWeight s = empty_like(w);
  cut(w, b, e, s);
  s.origin = w.origin;
  s.validate();
  return s;
}

}  // namespace

QuantizedWeight detail::shard_row_range(const QuantizedWeight& w, int64_t b, int64_t e) {
  return cut_range(w, b, e, true, shard_rows);
}

QuantizedWeight detail::shard_col_range(const QuantizedWeight& w, int64_t b, int64_t e) {
  return cut_range(w, b, e, false, shard_cols);
}

std::pair<int64_t, int64_t> shard_range(int64_t dim, const ShardSpec& spec) {
  check_spec(spec, "shard_range");
  MIXQ_CHECK_ARG(dim >= 1, "shard_range: dim (", dim, ") must be >= 1");
  const int64_t g = spec.granularity, units = (dim + g - 1) / g;
  MIXQ_CHECK_ARG(units >= spec.world, "shard_range: dim (", dim, ") in units of granularity ", g,
                 " has ", units, " units, fewer than world (", spec.world,
                 "): some rank would hold nothing");
  const int64_t base = units / spec.world, extra = units % spec.world;
  const int64_t u0 = spec.rank * base + std::min(spec.rank, extra);
  const int64_t u1 = u0 + base + (spec.rank < extra ? 1 : 0);
  return {u0 * g, std::min(dim, u1 * g)};
}

QuantizedWeight shard(const QuantizedWeight& w, const ShardSpec& spec) {
  check_spec(spec, "shard");
  w.validate();
  const bool col = spec.axis == ShardAxis::Column;
  const auto r = shard_range(col ? w.N : w.K, spec);
  QuantizedWeight s = empty_like(w);
  if (col)
    shard_rows(w, r.first, r.second, s);
  else
    shard_cols(w, r.first, r.second, s);
  s.origin = w.origin + (w.origin.empty() ? "" : " ") + "tp " + shard_axis_name(spec.axis) + " " +
             std::to_string(spec.rank) + "/" + std::to_string(spec.world) + " [" +
             std::to_string(r.first) + ", " + std::to_string(r.second) + ")";
  s.validate();
  return s;
}

void check_shard_set(const std::vector<QuantizedWeight>& shards,
                     const std::vector<ShardSpec>& specs) {
  const char* op = "check_shard_set";
  MIXQ_CHECK_ARG(!shards.empty() && shards.size() == specs.size(), op, ": ", shards.size(),
                 " shards and ", specs.size(), " specs (need as many, at least one)");
  const ShardSpec& s0 = specs[0];
  MIXQ_CHECK_ARG(static_cast<int64_t>(specs.size()) == s0.world, op, ": ", specs.size(),
                 " shards for world ", s0.world);
  std::vector<uint8_t> seen(specs.size(), 0);
  int64_t total = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    check_spec(specs[i], op);
    MIXQ_CHECK_ARG(specs[i].world == s0.world, op, ": shard ", i, " has world ", specs[i].world,
                   ", shard 0 has world ", s0.world);
    MIXQ_CHECK_ARG(specs[i].axis == s0.axis, op, ": shard ", i, " is ",
                   shard_axis_name(specs[i].axis), "-parallel, shard 0 is ",
                   shard_axis_name(s0.axis), "-parallel");
    MIXQ_CHECK_ARG(specs[i].granularity == s0.granularity, op, ": shard ", i, " has granularity ",
                   specs[i].granularity, ", shard 0 has ", s0.granularity);
    MIXQ_CHECK_ARG(!seen[static_cast<size_t>(specs[i].rank)], op, ": rank ", specs[i].rank,
                   " appears twice (shard ", i, ")");
    seen[static_cast<size_t>(specs[i].rank)] = 1;
    const QuantizedWeight& a = shards[0];
    const QuantizedWeight& b = shards[i];
    b.validate();
    const bool col = s0.axis == ShardAxis::Column;
    // A row shard holding one K block has block_k = its K (shard_cols): any block_k matches it.
    const bool same_block_k = a.block_k == b.block_k ||
                              (!col && (a.n_blocks_k() == 1 || b.n_blocks_k() == 1));
    const bool same = a.code_type == b.code_type && a.scale_type == b.scale_type &&
                      a.zero_kind == b.zero_kind && a.has_scales == b.has_scales &&
                      a.block_n == b.block_n && same_block_k &&
                      a.k_perm.empty() == b.k_perm.empty();
    MIXQ_CHECK_ARG(same, op, ": shard ", i, " (", b.describe(), ") is not the scheme of shard 0 (",
                   a.describe(), ")");
    MIXQ_CHECK_ARG(col ? a.K == b.K : a.N == b.N, op, ": shard ", i, " is [", b.N, " x ", b.K,
                   "], shard 0 is [", a.N, " x ", a.K, "]: the ", col ? "K" : "N",
                   " of ", shard_axis_name(s0.axis), "-parallel shards must agree");
    total += col ? b.N : b.K;
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto r = shard_range(total, specs[i]);
    const int64_t have = s0.axis == ShardAxis::Column ? shards[i].N : shards[i].K;
    MIXQ_CHECK_ARG(have == r.second - r.first, op, ": shard ", i, " (rank ", specs[i].rank,
                   ") holds ", have, " ", s0.axis == ShardAxis::Column ? "rows" : "columns",
                   ", rank ", specs[i].rank, " of ", specs[i].world, " over ", total, " holds ",
                   r.second - r.first);
  }
}

}  // namespace mixq
