// Repacking of the canonical weight into the CPU panel layout (see packed_weight.hpp).
#include "cpu/packed_weight.hpp"

#include <algorithm>
#include <cstring>

#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "cpu/thread_pool.hpp"

namespace mixq::cpu {

namespace {

constexpr int kLanes = 16;
constexpr int32_t kMaxSegment = 256;

CodeKind code_kind(DType t) {
  switch (t) {
    case DType::I4:
    case DType::U4: return CodeKind::Int4;
    case DType::I8: return CodeKind::Int8;
    case DType::U8: return CodeKind::Uint8;
    case DType::F8E4M3: return CodeKind::Fp8;
    case DType::F16: return CodeKind::F16;
    case DType::BF16: return CodeKind::BF16;
    case DType::F32: return CodeKind::F32;
    default: MIXQ_FAIL(ErrorCode::Unsupported, "cpu backend: code type ", dtype_name(t),
                       " is not a weight code type");
  }
}

int64_t group_bytes_of(CodeKind k) {
  switch (k) {
    case CodeKind::Int4: return 64;
    case CodeKind::Int8:
    case CodeKind::Uint8:
    case CodeKind::Fp8: return 128;
    case CodeKind::F16:
    case CodeKind::BF16: return 256;
    case CodeKind::F32: return 512;
  }
  return 0;
}

// Byte offset (within a panel) and nibble / element position of (lane r, padded column kp).
struct CodePos {
  int64_t byte;
  int shift;  // Int4: 0 or 4
};

CodePos code_pos(CodeKind kind, int64_t group_bytes, int r, int64_t kp) {
  const int64_t g = kp / 8, j = kp % 8;
  const int64_t base = g * group_bytes;
  switch (kind) {
    case CodeKind::Int4: return {base + r * 4 + (j & 3), j >= 4 ? 4 : 0};
    case CodeKind::Int8:
    case CodeKind::Uint8:
    case CodeKind::Fp8: return {base + (j / 4) * 64 + r * 4 + (j & 3), 0};
    case CodeKind::F16:
    case CodeKind::BF16: return {base + (j * kLanes + r) * 2, 0};
    case CodeKind::F32: return {base + (j * kLanes + r) * 4, 0};
  }
  return {0, 0};
}

}  // namespace

std::vector<Segment> make_segments(const QuantizedWeight& w) {
  std::vector<Segment> segs;
  int64_t kp = 0;
  const int64_t nb = w.has_scales ? w.n_blocks_k() : 1;
  for (int64_t kb = 0; kb < nb; ++kb) {
    const int64_t b0 = w.has_scales ? w.k_block_begin(kb) : 0;
    const int64_t b1 = w.has_scales ? w.k_block_end(kb) : w.K;
    for (int64_t k0 = b0; k0 < b1; k0 += kMaxSegment) {  // empty listed blocks: no segment
      const int32_t valid = static_cast<int32_t>(std::min<int64_t>(kMaxSegment, b1 - k0));
      const int32_t len = (valid + 7) / 8 * 8;
      segs.push_back({k0, valid, len, kp, kb});
      kp += len;
    }
  }
  return segs;
}

int32_t PackedWeight::code_raw_u8(int64_t p, int r, int64_t kp) const {
  const CodePos pos = code_pos(kind, group_bytes, r, kp);
  const uint8_t b = panel_codes(p)[pos.byte];
  return kind == CodeKind::Int4 ? (b >> pos.shift) & 0xF : b;
}

int32_t PackedWeight::code_int(int64_t p, int r, int64_t kp) const {
  const int32_t raw = code_raw_u8(p, r, kp);
  switch (kind) {
    case CodeKind::Int4: return raw - code_shift;
    case CodeKind::Int8: return static_cast<int8_t>(raw);
    default: return raw;
  }
}

float PackedWeight::code_value(int64_t p, int r, int64_t kp) const {
  const CodePos pos = code_pos(kind, group_bytes, r, kp);
  const uint8_t* c = panel_codes(p) + pos.byte;
  switch (kind) {
    case CodeKind::Fp8: return e4m3_to_f32(*c);
    case CodeKind::F16: { uint16_t h; std::memcpy(&h, c, 2); return f16_to_f32(h); }
    case CodeKind::BF16: { uint16_t h; std::memcpy(&h, c, 2); return bf16_to_f32(h); }
    case CodeKind::F32: { float f; std::memcpy(&f, c, 4); return f; }
    default: return static_cast<float>(code_int(p, r, kp));
  }
}

namespace {

// 8 nibbles n0..n7 (n_i = nibble i of the little-endian word x, i.e. canonical k order) into
// the packed word whose byte j holds n_j | n_{j+4} << 4; also returns the nibble sum.
inline uint32_t shuffle_nibbles(uint32_t x, int32_t* sum) {
  const uint32_t lo = x & 0x0F0F0F0Fu, hi = (x >> 4) & 0x0F0F0F0Fu;  // n0 n2 n4 n6 / n1 n3 n5 n7
  uint32_t t = lo + hi;
  t = (t & 0x00FF00FFu) + ((t >> 8) & 0x00FF00FFu);
  *sum += static_cast<int32_t>((t & 0xFFFF) + (t >> 16));
  const uint32_t first = (lo & 0xFF) | (hi & 0xFF) << 8 | ((lo >> 8) & 0xFF) << 16 |
                         ((hi >> 8) & 0xFF) << 24;                         // n0 n1 n2 n3
  const uint32_t second = ((lo >> 16) & 0xFF) | ((hi >> 16) & 0xFF) << 8 | (lo >> 24) << 16 |
                          (hi >> 24) << 24;                                // n4 n5 n6 n7
  return first | second << 4;
}

// Packs the codes of panel p (all its segments) straight from the canonical bytes, one 8-k
// group (one or two cache lines of output) at a time, and its per-segment integer code sums.
void pack_panel_codes(const QuantizedWeight& w, PackedWeight& pw, int64_t p) {
  const int64_t ns = pw.n_segs();
  uint8_t* pc = pw.codes.data() + p * pw.panel_bytes();
  const int lanes = static_cast<int>(std::min<int64_t>(kLanes, w.N - p * kLanes));
  const int64_t rb = w.row_bytes();
  const uint8_t* rows = w.codes.data() + p * kLanes * rb;
  // I4: u = nibble ^ 8 (two's complement nibble q, u = q + 8); U4: the nibble.
  const uint32_t flip = pw.code_shift ? 0x88888888u : 0u;
  for (int64_t s = 0; s < ns; ++s) {
    const Segment& sg = pw.segs[s];
    int32_t qs[kLanes] = {};
    for (int32_t i0 = 0; i0 < sg.valid; i0 += 8) {
      const int32_t cnt = std::min<int32_t>(8, sg.valid - i0);
      const int64_t k0 = sg.k0 + i0;
      uint8_t* grp = pc + (sg.kp0 + i0) / 8 * pw.group_bytes;
      for (int r = 0; r < lanes; ++r) {
        const uint8_t* row = rows + r * rb;
        switch (pw.kind) {
          case CodeKind::Int4: {
            uint32_t x = 0;
            if (cnt == 8 && (k0 & 1) == 0) {
              std::memcpy(&x, row + k0 / 2, 4);
            } else {  // odd start or ragged tail: gather the nibbles one by one
              for (int32_t j = 0; j < cnt; ++j) {
                const int64_t k = k0 + j;
                x |= static_cast<uint32_t>((row[k >> 1] >> ((k & 1) * 4)) & 0xF) << (4 * j);
              }
            }
            // Padding nibbles stay u = 0 (excluded from the sums below by the correction).
            const uint32_t valid_mask = cnt == 8 ? 0xFFFFFFFFu : (1u << (4 * cnt)) - 1;
            int32_t usum = 0;
            const uint32_t out = shuffle_nibbles((x ^ flip) & valid_mask, &usum);
            std::memcpy(grp + r * 4, &out, 4);
            qs[r] += usum - pw.code_shift * cnt;
            break;
          }
          case CodeKind::Int8:
          case CodeKind::Uint8:
          case CodeKind::Fp8: {
            const uint8_t* src = row + k0;
            if (cnt == 8) {  // two dwords: k 0..3 in the first register, 4..7 in the second
              std::memcpy(grp + r * 4, src, 4);
              std::memcpy(grp + 64 + r * 4, src + 4, 4);
            } else {
              for (int32_t j = 0; j < cnt; ++j) grp[(j / 4) * 64 + r * 4 + (j & 3)] = src[j];
            }
            if (pw.kind == CodeKind::Int8)
              for (int32_t j = 0; j < cnt; ++j) qs[r] += static_cast<int8_t>(src[j]);
            else if (pw.kind == CodeKind::Uint8)
              for (int32_t j = 0; j < cnt; ++j) qs[r] += src[j];
            break;
          }
          case CodeKind::F16:
          case CodeKind::BF16:
          case CodeKind::F32: {
            const int64_t eb = pw.kind == CodeKind::F32 ? 4 : 2;
            const uint8_t* src = row + k0 * eb;
            for (int32_t j = 0; j < cnt; ++j)
              std::memcpy(grp + (j * kLanes + r) * eb, src + j * eb, static_cast<size_t>(eb));
            break;
          }
        }
      }
    }
    if (pw.is_integer())
      std::memcpy(&pw.qsum[static_cast<size_t>((p * ns + s) * kLanes)], qs, sizeof(qs));
  }
}

// Per-(panel, segment, lane) scale / offset of output row n.
void pack_row_scales(const QuantizedWeight& w, PackedWeight& pw, int64_t n) {
  const int64_t p = n / kLanes;
  const int r = static_cast<int>(n % kLanes);
  const int64_t ns = pw.n_segs();
  for (int64_t s = 0; s < ns; ++s) {
    const size_t si = static_cast<size_t>((p * ns + s) * kLanes + r);
    if (!w.has_scales) {
      pw.scale[si] = 1.f;
      continue;
    }
    const Segment& sg = pw.segs[s];
    const int64_t nb = w.n_block(n), kb = sg.kb;
    const float sc = w.scale(nb, kb);
    pw.scale[si] = sc;
    if (w.zero_kind == ZeroKind::Offset) pw.offset[si] = w.offset(nb, kb);
    // s*(q - z) = q*s + (-s*z): one rounding of s*z more than the reference (relative 6e-8).
    if (w.zero_kind == ZeroKind::ZeroPoint)
      pw.offset[si] = -sc * static_cast<float>(w.zero_point(nb, kb));
  }
}

}  // namespace

PackedWeight pack_weight(const QuantizedWeight& w, int threads) {
  PackedWeight pw;
  pw.N = w.N;
  pw.K = w.K;
  pw.kind = code_kind(w.code_type);
  pw.code_shift = w.code_type == DType::I4 ? 8 : 0;
  pw.has_offset = w.has_scales && w.zero_kind != ZeroKind::None;
  pw.group_bytes = group_bytes_of(pw.kind);
  pw.segs = make_segments(w);
  pw.k_perm = w.k_perm;
  const Segment& last = pw.segs.back();
  pw.Kp = last.kp0 + last.len;
  pw.n_panels = (w.N + kLanes - 1) / kLanes;
  const int64_t ns = pw.n_segs();
  const size_t n_meta = static_cast<size_t>(pw.n_panels * ns * kLanes);
  // The big buffer is zero-filled by the threads that fill it (first touch, in parallel).
  pw.codes = AlignedBytes(static_cast<size_t>(pw.n_panels * pw.panel_bytes()));
  pw.scale.assign(n_meta, 0.f);
  if (pw.has_offset) pw.offset.assign(n_meta, 0.f);
  if (pw.is_integer()) pw.qsum.assign(n_meta, 0);

  // Panels in groups of 16 per task: each task owns whole panels (disjoint writes).
  const int64_t per_task = 16;
  parallel_for(resolve_num_threads(threads), (pw.n_panels + per_task - 1) / per_task,
               [&](int64_t t) {
    const int64_t p0 = t * per_task, p1 = std::min(pw.n_panels, p0 + per_task);
    std::memset(pw.codes.data() + p0 * pw.panel_bytes(), 0,
                static_cast<size_t>((p1 - p0) * pw.panel_bytes()));
    for (int64_t p = p0; p < p1; ++p) pack_panel_codes(w, pw, p);
    for (int64_t n = p0 * kLanes; n < std::min(w.N, p1 * kLanes); ++n) pack_row_scales(w, pw, n);
  });
  return pw;
}

}  // namespace mixq::cpu
