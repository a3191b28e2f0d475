// Repacking a GGUF block tensor into the lane-per-row records of native_format.hpp. Prepare-time
// code: plain C++, one panel per task.
#include "cpu/ggml/native_weight.hpp"

#include <cstring>

#include "cpu/thread_pool.hpp"
#include "mixq/error.hpp"

namespace mixq::cpu::ggml {

namespace {

// One file block split into its parts: unsigned codes (natural element order), integer
// sub-block scales / mins as the record stores them, and the raw f16 scale bits.
struct Split {
  uint8_t u[256];
  uint8_t sc[16];  // per sub-block (K4: sc, Signed8: s8 bits, Q2K: ggml's packed byte)
  uint8_t mn[16];  // K4 mins
  uint8_t q3[12];  // Q3K: the block's own 12 scale bytes
  uint16_t d = 0, dm = 0;
};

uint16_t f16_at(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

void nibbles(const uint8_t* qs, uint8_t* u) {  // 16 bytes -> 32 codes, low nibbles first
  for (int i = 0; i < 16; ++i) {
    u[i] = qs[i] & 0xF;
    u[i + 16] = qs[i] >> 4;
  }
}

void q5_high(const uint8_t* qh_p, uint8_t* u) {
  uint32_t qh;
  std::memcpy(&qh, qh_p, 4);
  for (int j = 0; j < 32; ++j) u[j] = static_cast<uint8_t>(u[j] | (((qh >> j) & 1) << 4));
}

void split_block(GgmlType t, const uint8_t* b, Split& s) {
  switch (t) {
    case GgmlType::Q4_0: case GgmlType::IQ4_NL:
      s.d = f16_at(b);
      nibbles(b + 2, s.u);  // IQ4_NL: the codebook index
      break;
    case GgmlType::Q4_1:
      s.d = f16_at(b);
      s.dm = f16_at(b + 2);
      nibbles(b + 4, s.u);
      break;
    case GgmlType::Q5_0:
      s.d = f16_at(b);
      nibbles(b + 6, s.u);
      q5_high(b + 2, s.u);
      break;
    case GgmlType::Q5_1:
      s.d = f16_at(b);
      s.dm = f16_at(b + 2);
      nibbles(b + 8, s.u);
      q5_high(b + 4, s.u);
      break;
    case GgmlType::Q8_0:
      s.d = f16_at(b);
      for (int e = 0; e < 32; ++e) s.u[e] = static_cast<uint8_t>(b[2 + e] ^ 0x80);
      break;
    case GgmlType::Q2_K:
      for (int j = 0; j < 16; ++j) s.sc[j] = b[j];
      s.d = f16_at(b + 80);
      s.dm = f16_at(b + 82);
      for (int h = 0; h < 2; ++h)
        for (int p = 0; p < 4; ++p)
          for (int l = 0; l < 32; ++l)
            s.u[128 * h + 32 * p + l] = (b[16 + 32 * h + l] >> (2 * p)) & 3;
      break;
    case GgmlType::Q3_K: {
      const uint8_t* hm = b;
      const uint8_t* qs = b + 32;
      std::memcpy(s.q3, b + 96, 12);
      s.d = f16_at(b + 108);
      // value = low2 - (hbit ? 0 : 4) = u - 4 with u = low2 | hbit << 2.
      for (int h = 0; h < 2; ++h)
        for (int p = 0; p < 4; ++p)
          for (int l = 0; l < 32; ++l)
            s.u[128 * h + 32 * p + l] = static_cast<uint8_t>(
                ((qs[32 * h + l] >> (2 * p)) & 3) | (((hm[l] >> (4 * h + p)) & 1) << 2));
      break;
    }
    case GgmlType::Q4_K: case GgmlType::Q5_K: {
      s.d = f16_at(b);
      s.dm = f16_at(b + 2);
      const uint8_t* q = b + 4;  // ggml get_scale_min_k4
      for (int j = 0; j < 8; ++j) {
        if (j < 4) {
          s.sc[j] = q[j] & 63;
          s.mn[j] = q[j + 4] & 63;
        } else {
          s.sc[j] = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
          s.mn[j] = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
        }
      }
      const bool five = t == GgmlType::Q5_K;
      const uint8_t* qh = b + 16;
      const uint8_t* qs = b + (five ? 48 : 16);
      for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
          const uint8_t v = qs[32 * c + l];
          uint8_t lo = v & 0xF, hi = v >> 4;
          if (five) {
            lo = static_cast<uint8_t>(lo | (((qh[l] >> (2 * c)) & 1) << 4));
            hi = static_cast<uint8_t>(hi | (((qh[l] >> (2 * c + 1)) & 1) << 4));
          }
          s.u[64 * c + l] = lo;
          s.u[64 * c + 32 + l] = hi;
        }
      break;
    }
    case GgmlType::Q6_K: {
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      for (int j = 0; j < 16; ++j) s.sc[j] = b[192 + j];
      s.d = f16_at(b + 208);
      for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
          const uint8_t a = ql[64 * h + l], c = ql[64 * h + 32 + l], hb = qh[32 * h + l];
          uint8_t* o = s.u + 128 * h + l;
          o[0] = static_cast<uint8_t>((a & 0xF) | ((hb & 3) << 4));
          o[32] = static_cast<uint8_t>((c & 0xF) | (((hb >> 2) & 3) << 4));
          o[64] = static_cast<uint8_t>((a >> 4) | (((hb >> 4) & 3) << 4));
          o[96] = static_cast<uint8_t>((c >> 4) | (((hb >> 6) & 3) << 4));
        }
      break;
    }
    case GgmlType::IQ4_XS: {
      s.d = f16_at(b);
      const uint16_t sh = f16_at(b + 2);
      for (int ib = 0; ib < 8; ++ib) {
        const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
        s.sc[ib] = static_cast<uint8_t>(static_cast<int8_t>(ls - 32));
        nibbles(b + 8 + 16 * ib, s.u + 32 * ib);
      }
      break;
    }
    default: break;
  }
}

// Writes row r of a record (zeroed beforehand) from its split block.
void write_row(const Format& f, const Split& s, int r, uint8_t* rec) {
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
        const int low4 = j < 8 ? (s.q3[j] & 0xF) : (s.q3[j - 8] >> 4);
        const int high2 = (s.q3[8 + j % 4] >> (2 * (j / 4))) & 3;
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
    Split s;
    for (int64_t kb = 0; kb < nw.n_blocks; ++kb)
      for (int r = 0; r < rows; ++r) {
        split_block(nw.type, src + (p * kPanelRows + r) * rb + kb * bb, s);
        write_row(nw.fmt, s, r, dst + kb * nw.record_bytes);
      }
  });
  return nw;
}

}  // namespace mixq::cpu::ggml
