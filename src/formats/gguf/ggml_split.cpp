// Splitting a GGUF block into codes, sub-block scales and f16 scale bits (ggml_split.hpp).
#include "formats/gguf/ggml_split.hpp"

#include <cstring>

namespace mixq::formats {

namespace {

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

}  // namespace

void split_ggml_block(GgmlType t, const uint8_t* b, GgmlSplitBlock& s) {
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

}  // namespace mixq::formats
