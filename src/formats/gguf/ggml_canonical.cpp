// ggml block tensors -> canonical QuantizedWeight, losslessly (formats.md §1).
//
// For every type the canonical formula reproduces gguf-py's float32 decode (and ggml's scalar
// dequantize_row_* built without FMA) bit for bit:
//   legacy types keep the fp16 block scale as an F16 scale (d * q is one rounding either way);
//   K-quants and IQ4_XS store the f32 product d * sub_scale that ggml computes first, and the
//   mins as the offset -(dmin * m) (y = dl*q - ml == dl*q + (-ml) exactly in IEEE arithmetic).
// The table of mappings and their memory cost is in docs/formats-notes.md.
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "formats/gguf/ggml_block_layout.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/ggml_blocks.hpp"

namespace mixq::formats {

using detail::f16_is_finite;
using detail::kquant_scale_min;
using detail::load_f16;
using detail::load_u16;
using detail::load_u32;
using detail::q3k_scale;
using detail::store_f32;

namespace {

// Packs pairs of nibbles taken at `shift` (0: low, 4: high) from consecutive source bytes into
// canonical bytes: out[i] = nib(src[2i]) | nib(src[2i+1]) << 4, n_out a multiple of 4. Works on
// 8 source bytes at a time (SWAR) because this is the hot loop of Q4_0 / Q4_K conversion.
inline void pack_nibble_pairs(const uint8_t* src, int shift, uint8_t* out, int n_out,
                              uint8_t xor_mask) {
  const uint64_t xm = 0x0101010101010101ull * xor_mask;
  for (int i = 0; i < n_out; i += 4) {
    uint64_t w;
    std::memcpy(&w, src + 2 * i, 8);
    uint64_t t = (w >> shift) & 0x0F0F0F0F0F0F0F0Full;
    t = (t | (t >> 4)) & 0x00FF00FF00FF00FFull;  // even bytes: nib(even) | nib(odd) << 4
    t = (t | (t >> 8)) & 0x0000FFFF0000FFFFull;
    t = (t | (t >> 16)) & 0x00000000FFFFFFFFull;
    const uint32_t r = static_cast<uint32_t>(t ^ xm);
    std::memcpy(out + i, &r, 4);
  }
}

// Packs 2*n_pairs 4-bit codes (already in [0, 15] or two's complement nibbles) into bytes.
inline void pack_codes4(const int8_t* q, uint8_t* out, int n_pairs) {
  for (int i = 0; i < n_pairs; ++i)
    out[i] = static_cast<uint8_t>((q[2 * i] & 0xF) | ((q[2 * i + 1] & 0xF) << 4));
}

// Allocates a zero-filled buffer of n bytes, asking for transparent huge pages first when it is
// large: the canonical copy of a big tensor is written once, and with 4 KiB pages the kernel's
// page faults on it cost more than the conversion itself (docs/formats-notes.md, Performance).
void alloc_output(std::vector<uint8_t>& v, size_t n) {
  v.clear();
  v.shrink_to_fit();
  v.reserve(n);  // untouched memory (large blocks come from mmap)
#if defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  if (n >= 4 * kHuge) {
    const uintptr_t b = (reinterpret_cast<uintptr_t>(v.data()) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t e = (reinterpret_cast<uintptr_t>(v.data()) + n) & ~(kHuge - 1);
    if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);  // a hint; ignore errors
  }
#endif
  v.resize(n);
}

struct Target {
  uint8_t* codes;   // start of this block's codes in the row
  uint8_t* scales;  // scale array base
  uint8_t* zeros;   // offset array base (nullptr if none)
  int64_t sidx;     // index of this block's first scale entry
};

// Returns false when a block's fp16 scale field is not finite.
bool block_q4_0(const uint8_t* b, Target t) {
  const uint16_t d = load_u16(b);
  detail::store_u16(t.scales + 2 * t.sidx, d);
  pack_nibble_pairs(b + 2, 0, t.codes, 8, 0x88);  // (q - 8) & 0xF == q ^ 8
  pack_nibble_pairs(b + 2, 4, t.codes + 8, 8, 0x88);
  return f16_is_finite(d);
}

bool block_q4_1(const uint8_t* b, Target t) {
  const uint16_t d = load_u16(b), m = load_u16(b + 2);
  detail::store_u16(t.scales + 2 * t.sidx, d);
  detail::store_u16(t.zeros + 2 * t.sidx, m);
  pack_nibble_pairs(b + 4, 0, t.codes, 8, 0);
  pack_nibble_pairs(b + 4, 4, t.codes + 8, 8, 0);
  return f16_is_finite(d) && f16_is_finite(m);
}

bool block_q5(const uint8_t* b, Target t, bool has_min) {
  const uint16_t d = load_u16(b);
  detail::store_u16(t.scales + 2 * t.sidx, d);
  bool ok = f16_is_finite(d);
  const uint8_t* p = b + 2;
  if (has_min) {
    const uint16_t m = load_u16(p);
    detail::store_u16(t.zeros + 2 * t.sidx, m);
    ok = ok && f16_is_finite(m);
    p += 2;
  }
  const uint32_t qh = load_u32(p);
  const uint8_t* qs = p + 4;
  const int bias = has_min ? 0 : 16;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0xF) | (((qh >> j) & 1) << 4);
    const int hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    t.codes[j] = static_cast<uint8_t>(lo - bias);
    t.codes[j + 16] = static_cast<uint8_t>(hi - bias);
  }
  return ok;
}

bool block_q8_0(const uint8_t* b, Target t) {
  const uint16_t d = load_u16(b);
  detail::store_u16(t.scales + 2 * t.sidx, d);
  std::memcpy(t.codes, b + 2, 32);
  return f16_is_finite(d);
}

bool block_iq4_nl(const uint8_t* b, Target t) {
  const uint16_t d = load_u16(b);
  detail::store_u16(t.scales + 2 * t.sidx, d);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    t.codes[j] = static_cast<uint8_t>(kIq4nlValues[qs[j] & 0xF]);
    t.codes[j + 16] = static_cast<uint8_t>(kIq4nlValues[qs[j] >> 4]);
  }
  return f16_is_finite(d);
}

bool block_iq4_xs(const uint8_t* b, Target t) {
  const uint16_t dh = load_u16(b);
  const float d = f16_to_f32(dh);
  const uint16_t scales_h = load_u16(b + 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
    store_f32(t.scales, t.sidx + ib, d * static_cast<float>(ls - 32));
    for (int j = 0; j < 16; ++j) {
      t.codes[32 * ib + j] = static_cast<uint8_t>(kIq4nlValues[qs[16 * ib + j] & 0xF]);
      t.codes[32 * ib + 16 + j] = static_cast<uint8_t>(kIq4nlValues[qs[16 * ib + j] >> 4]);
    }
  }
  return f16_is_finite(dh);
}

bool block_q2_k(const uint8_t* b, Target t) {
  const uint8_t* sc = b;
  const uint8_t* qs = b + 16;
  const uint16_t dh = load_u16(b + 80), mh = load_u16(b + 82);
  const float d = f16_to_f32(dh), dmin = f16_to_f32(mh);
  for (int s = 0; s < 16; ++s) {
    store_f32(t.scales, t.sidx + s, d * static_cast<float>(sc[s] & 0xF));
    store_f32(t.zeros, t.sidx + s, -(dmin * static_cast<float>(sc[s] >> 4)));
  }
  int8_t q[256];
  for (int h = 0; h < 2; ++h)
    for (int p = 0; p < 4; ++p)
      for (int l = 0; l < 32; ++l) q[128 * h + 32 * p + l] = (qs[32 * h + l] >> (2 * p)) & 3;
  pack_codes4(q, t.codes, 128);
  return f16_is_finite(dh) && f16_is_finite(mh);
}

bool block_q3_k(const uint8_t* b, Target t) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const uint16_t dh = load_u16(b + 108);
  const float d = f16_to_f32(dh);
  for (int s = 0; s < 16; ++s) store_f32(t.scales, t.sidx + s, d * static_cast<float>(q3k_scale(sc, s)));
  int8_t q[256];
  for (int h = 0; h < 2; ++h)
    for (int p = 0; p < 4; ++p)
      for (int l = 0; l < 32; ++l) {
        const int e = 128 * h + 32 * p + l;
        const int low2 = (qs[32 * h + l] >> (2 * p)) & 3;
        const int hb = (hmask[l] >> (e / 32)) & 1;
        q[e] = static_cast<int8_t>(low2 - (hb ? 0 : 4));
      }
  pack_codes4(q, t.codes, 128);
  return f16_is_finite(dh);
}

// Q4_K and Q5_K share the header and the 6-bit scale/min packing.
void kquant_scales_mins(const uint8_t* b, Target t) {
  const float d = load_f16(b), dmin = load_f16(b + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    kquant_scale_min(b + 4, j, &sc, &mn);
    store_f32(t.scales, t.sidx + j, d * static_cast<float>(sc));
    store_f32(t.zeros, t.sidx + j, -(dmin * static_cast<float>(mn)));
  }
}

bool block_q4_k(const uint8_t* b, Target t) {
  kquant_scales_mins(b, t);
  const uint8_t* qs = b + 16;
  for (int c = 0; c < 4; ++c) {
    pack_nibble_pairs(qs + 32 * c, 0, t.codes + 32 * c, 16, 0);
    pack_nibble_pairs(qs + 32 * c, 4, t.codes + 32 * c + 16, 16, 0);
  }
  return f16_is_finite(load_u16(b)) && f16_is_finite(load_u16(b + 2));
}

bool block_q5_k(const uint8_t* b, Target t) {
  kquant_scales_mins(b, t);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const int e0 = 64 * c + l, e1 = e0 + 32;
      t.codes[e0] = static_cast<uint8_t>((qs[32 * c + l] & 0xF) | (((qh[l] >> (e0 / 32)) & 1) << 4));
      t.codes[e1] = static_cast<uint8_t>((qs[32 * c + l] >> 4) | (((qh[l] >> (e1 / 32)) & 1) << 4));
    }
  return f16_is_finite(load_u16(b)) && f16_is_finite(load_u16(b + 2));
}

bool block_q6_k(const uint8_t* b, Target t) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const uint16_t dh = load_u16(b + 208);
  const float d = f16_to_f32(dh);
  for (int s = 0; s < 16; ++s) store_f32(t.scales, t.sidx + s, d * static_cast<float>(sc[s]));
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t a = ql[64 * h + l], c = ql[64 * h + 32 + l], hb = qh[32 * h + l];
      uint8_t* o = t.codes + 128 * h + l;
      o[0] = static_cast<uint8_t>(((a & 0xF) | ((hb & 3) << 4)) - 32);
      o[32] = static_cast<uint8_t>(((c & 0xF) | (((hb >> 2) & 3) << 4)) - 32);
      o[64] = static_cast<uint8_t>(((a >> 4) | (((hb >> 4) & 3) << 4)) - 32);
      o[96] = static_cast<uint8_t>(((c >> 4) | (((hb >> 6) & 3) << 4)) - 32);
    }
  return f16_is_finite(dh);
}

struct Mapping {
  DType code_type;
  int64_t block_k;  // canonical scale block (16 or 32)
  DType scale_type;
  ZeroKind zero_kind;
  bool (*convert)(const uint8_t*, Target);
};

bool block_q5_0(const uint8_t* b, Target t) { return block_q5(b, t, false); }
bool block_q5_1(const uint8_t* b, Target t) { return block_q5(b, t, true); }

bool mapping_for(GgmlType type, Mapping* m) {
  switch (type) {
    case GgmlType::Q4_0: *m = {DType::I4, 32, DType::F16, ZeroKind::None, block_q4_0}; return true;
    case GgmlType::Q4_1: *m = {DType::U4, 32, DType::F16, ZeroKind::Offset, block_q4_1}; return true;
    case GgmlType::Q5_0: *m = {DType::I8, 32, DType::F16, ZeroKind::None, block_q5_0}; return true;
    case GgmlType::Q5_1: *m = {DType::U8, 32, DType::F16, ZeroKind::Offset, block_q5_1}; return true;
    case GgmlType::Q8_0: *m = {DType::I8, 32, DType::F16, ZeroKind::None, block_q8_0}; return true;
    case GgmlType::Q2_K: *m = {DType::U4, 16, DType::F32, ZeroKind::Offset, block_q2_k}; return true;
    case GgmlType::Q3_K: *m = {DType::I4, 16, DType::F32, ZeroKind::None, block_q3_k}; return true;
    case GgmlType::Q4_K: *m = {DType::U4, 32, DType::F32, ZeroKind::Offset, block_q4_k}; return true;
    case GgmlType::Q5_K: *m = {DType::U8, 32, DType::F32, ZeroKind::Offset, block_q5_k}; return true;
    case GgmlType::Q6_K: *m = {DType::I8, 16, DType::F32, ZeroKind::None, block_q6_k}; return true;
    case GgmlType::IQ4_NL: *m = {DType::I8, 32, DType::F16, ZeroKind::None, block_iq4_nl}; return true;
    case GgmlType::IQ4_XS: *m = {DType::I8, 32, DType::F32, ZeroKind::None, block_iq4_xs}; return true;
    default: return false;
  }
}

}  // namespace

QuantizedWeight ggml_to_canonical(GgmlType type, const uint8_t* data, int64_t rows, int64_t K,
                                  const std::string& what) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(type));
  MIXQ_CHECK(info != nullptr && info->convertible, ErrorCode::Unsupported, what, ": ggml type ",
             ggml_type_name(static_cast<uint32_t>(type)), " (id ", static_cast<uint32_t>(type),
             ") cannot be converted (supported: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K "
             "Q4_K Q5_K Q6_K IQ4_NL IQ4_XS)");
  MIXQ_CHECK_ARG(rows >= 1 && K >= 1, what, ": matrix [", rows, " x ", K, "] is empty");
  MIXQ_CHECK_ARG(K % info->block_elems == 0, what, ": row length ", K,
                 " is not a multiple of the ", info->name, " block size ", info->block_elems);
  const int64_t row_in = K / info->block_elems * info->block_bytes;

  QuantizedWeight w;
  w.N = rows;
  w.K = K;
  w.origin = std::string("gguf:") + info->name;
  if (type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16) {
    w.code_type = type == GgmlType::F32 ? DType::F32 : type == GgmlType::F16 ? DType::F16 : DType::BF16;
    w.has_scales = false;
    w.block_k = K;
    w.zero_kind = ZeroKind::None;
    alloc_output(w.codes, static_cast<size_t>(rows * w.row_bytes()));
    std::memcpy(w.codes.data(), data, static_cast<size_t>(rows * row_in));  // same layout
    return w;
  }
  Mapping m{DType::I8, 32, DType::F32, ZeroKind::None, nullptr};
  MIXQ_CHECK(mapping_for(type, &m), ErrorCode::Internal, what, ": no mapping for ", info->name);
  w.code_type = m.code_type;
  w.block_k = m.block_k;
  w.scale_type = m.scale_type;
  w.zero_kind = m.zero_kind;
  alloc_output(w.codes, static_cast<size_t>(rows * w.row_bytes()));
  const size_t scale_bytes = static_cast<size_t>(w.n_scale_entries() * dtype_bits(m.scale_type) / 8);
  alloc_output(w.scales, scale_bytes);
  if (m.zero_kind == ZeroKind::Offset) alloc_output(w.zeros, scale_bytes);

  const int64_t nblocks = K / info->block_elems;
  const int64_t code_bytes_per_block = dtype_bytes(m.code_type, info->block_elems);
  const int64_t scales_per_block = info->block_elems / m.block_k;
  const int64_t row_codes = w.row_bytes();
  uint8_t* zeros = w.zeros.empty() ? nullptr : w.zeros.data();
  for (int64_t n = 0; n < rows; ++n) {
    const uint8_t* src = data + n * row_in;
    bool ok = true;
    for (int64_t b = 0; b < nblocks; ++b) {
      Target t{w.codes.data() + n * row_codes + b * code_bytes_per_block, w.scales.data(), zeros,
               (n * nblocks + b) * scales_per_block};
      ok &= m.convert(src + b * info->block_bytes, t);
    }
    if (!ok) {
      for (int64_t b = 0; b < nblocks; ++b) {
        Target t{w.codes.data() + n * row_codes + b * code_bytes_per_block, w.scales.data(), zeros,
                 (n * nblocks + b) * scales_per_block};
        MIXQ_CHECK(m.convert(src + b * info->block_bytes, t), ErrorCode::Format, what, ": ",
                   info->name, " block ", b, " of row ", n, " (byte ", n * row_in + b * info->block_bytes,
                   " of the tensor data) has a non-finite fp16 scale (inf or NaN)");
      }
    }
  }
  // The file's bytes ride along so that a backend with native kernels for the type streams the
  // blocks at their own width (docs/decisions/ggml-native-weights.md); the copy costs one
  // memcpy of the tensor, small next to the conversion above.
  auto blocks = std::make_shared<GgmlBlocks>();
  blocks->type = static_cast<uint32_t>(type);
  blocks->data.assign(data, data + rows * row_in);
  w.ggml = std::move(blocks);
  return w;
}

}  // namespace mixq::formats
