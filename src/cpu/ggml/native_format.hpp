// The lane-per-row form of a GGUF block tensor (what repack_native builds, what every native
// kernel reads). One record per (16-row panel, ggml block column), all arrays [..][16 rows]:
//
//   codes, low plane   the low LB bits of each code, in vpdpbusd's dword layout: one 32-bit
//                      lane per output row, 4 consecutive k per lane (byte j of a lane is k+j):
//                        LB = 8: 64 bytes per 4 k      (the codes themselves, biased to u8)
//                        LB = 4: 64 bytes per 8 k      (low nibble k..k+3, high nibble k+4..k+7)
//                        LB = 2: 64 bytes per 16 k     (bits 2q..2q+1 of byte j: k + 4q + j)
//   codes, high plane  HB = 1: 64 bytes per 32 k, bit b of byte j of a lane is the top bit of
//                      k + 4b + j; HB = 2: 64 bytes per 16 k, bits 2b..2b+1 of byte j belong
//                      to k + 4b + j. A register of 4 k x 16 rows is then one load, a shift and
//                      a mask of the low plane, and a shift, mask and OR (one vpternlog) of the
//                      high plane: no scalar decode, no lane crossing.
//   sub-block scales   integers, [sub-block][16] bytes (per type, below), applied once per
//                      sub-block in f32 on the int32 dot of that sub-block.
//   d, dm              the block's f16 scales, [16] each.
//
// The code u of an element is unsigned (vpdpbusd's u8 operand); its value is u - bias. Each
// element's f32 weight is ggml's own arithmetic, unfused: w = s * float(u - bias) + o with
//   Single   s = d                                   (Q4_0, Q5_0, Q8_0, IQ4_NL)
//   Affine   s = d, o = dm                           (Q4_1, Q5_1: dm is ggml's m)
//   K4       s = d * sc[j], o = -(dm * mn[j])        (Q4_K, Q5_K: u8 sc[8][16], u8 mn[8][16])
//   Q2K      s = d * (p & 15), o = -(dm * (p >> 4))  (Q2_K: u8 p[16][16], ggml's own packing)
//   Signed8  s = d * sc[j]                           (Q6_K: s8 [16][16]; IQ4_XS: ls - 32 [8][16])
//   Q3K      s = d * (sc6[j] - 32)                   (Q3_K: low 4 bits [8][16], byte i holds
//                                                     sub-blocks 2i / 2i+1; high 2 bits [4][16],
//                                                     byte i bits 2t..2t+1 sub-block 4i + t)
// IQ4_NL / IQ4_XS planes hold the 4-bit codebook index; kernels map it to the biased int8 value
// with one vpshufb. Q8_0 codes are stored as q ^ 0x80 = q + 128.
//
// Record sizes equal the file's block bytes times 16, except where the 6-bit scales were spread
// to bytes so a kernel loads 16 rows' scale with one instruction: Q4_K 148 / 144 (+2.8 %),
// Q5_K 180 / 176 (+2.3 %), IQ4_XS 138 / 136 (+1.5 %). Q3_K keeps them packed (its expanded form
// would be +3.6 %, over the size budget) and unpacks them per record in the kernel.
#pragma once

#include <cstdint>

#include "mixq/formats/ggml_blocks.hpp"

namespace mixq::cpu::ggml {

using formats::GgmlType;

enum class ScaleKind : uint8_t { Single, Affine, K4, Q2K, Signed8, Q3K };

struct Format {
  int qk;           // elements per block
  int lb, hb;       // low / high code bits
  int sub;          // elements per sub-block scale (== qk for one scale per block)
  int bias;         // value = u - bias
  ScaleKind sk;
  bool iq4;         // 4-bit codebook index
  // derived: byte offsets inside a record (16 rows) and its size
  constexpr int n_sub() const { return qk / sub; }
  constexpr int lo_bytes() const { return qk * 16 * lb / 8; }
  constexpr int hi_bytes() const { return qk * 16 * hb / 8; }
  constexpr int sc_bytes() const {
    switch (sk) {
      case ScaleKind::K4: return 2 * n_sub() * 16;
      case ScaleKind::Q2K: case ScaleKind::Signed8: return n_sub() * 16;
      case ScaleKind::Q3K: return 12 * 16;
      default: return 0;
    }
  }
  constexpr bool has_dm() const {
    return sk == ScaleKind::Affine || sk == ScaleKind::K4 || sk == ScaleKind::Q2K;
  }
  constexpr bool has_min() const { return has_dm(); }
  constexpr int off_hi() const { return lo_bytes(); }
  constexpr int off_sc() const { return lo_bytes() + hi_bytes(); }
  constexpr int off_d() const { return off_sc() + sc_bytes(); }
  constexpr int off_dm() const { return off_d() + 32; }
  constexpr int record_bytes() const { return off_d() + (has_dm() ? 64 : 32); }
};

template <GgmlType T> struct FormatOf;
#define MIXQ_GGML_FORMAT(TYPE, QK, LB, HB, SUB, BIAS, SK, IQ4) \
  template <> struct FormatOf<GgmlType::TYPE> {                \
    static constexpr Format f{QK, LB, HB, SUB, BIAS, ScaleKind::SK, IQ4}; \
  };
MIXQ_GGML_FORMAT(Q4_0, 32, 4, 0, 32, 8, Single, false)
MIXQ_GGML_FORMAT(Q4_1, 32, 4, 0, 32, 0, Affine, false)
MIXQ_GGML_FORMAT(Q5_0, 32, 4, 1, 32, 16, Single, false)
MIXQ_GGML_FORMAT(Q5_1, 32, 4, 1, 32, 0, Affine, false)
MIXQ_GGML_FORMAT(Q8_0, 32, 8, 0, 32, 128, Single, false)
MIXQ_GGML_FORMAT(IQ4_NL, 32, 4, 0, 32, 128, Single, true)
MIXQ_GGML_FORMAT(Q2_K, 256, 2, 0, 16, 0, Q2K, false)
MIXQ_GGML_FORMAT(Q3_K, 256, 2, 1, 16, 4, Q3K, false)
MIXQ_GGML_FORMAT(Q4_K, 256, 4, 0, 32, 0, K4, false)
MIXQ_GGML_FORMAT(Q5_K, 256, 4, 1, 32, 0, K4, false)
MIXQ_GGML_FORMAT(Q6_K, 256, 4, 2, 16, 32, Signed8, false)
MIXQ_GGML_FORMAT(IQ4_XS, 256, 4, 0, 32, 128, Signed8, true)
#undef MIXQ_GGML_FORMAT

// IQ4 codebook (ggml kvalues_iq4nl) plus 128: the unsigned operand for vpdpbusd, bias 128.
constexpr uint8_t kIq4Biased[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                    129, 141, 153, 166, 181, 197, 217, 241};

// Calls f.template operator()<T>() for the runtime type (one instantiation per type).
template <typename F>
inline void dispatch_type(GgmlType t, F&& f) {
  switch (t) {
    case GgmlType::Q4_0: f.template operator()<GgmlType::Q4_0>(); break;
    case GgmlType::Q4_1: f.template operator()<GgmlType::Q4_1>(); break;
    case GgmlType::Q5_0: f.template operator()<GgmlType::Q5_0>(); break;
    case GgmlType::Q5_1: f.template operator()<GgmlType::Q5_1>(); break;
    case GgmlType::Q8_0: f.template operator()<GgmlType::Q8_0>(); break;
    case GgmlType::IQ4_NL: f.template operator()<GgmlType::IQ4_NL>(); break;
    case GgmlType::Q2_K: f.template operator()<GgmlType::Q2_K>(); break;
    case GgmlType::Q3_K: f.template operator()<GgmlType::Q3_K>(); break;
    case GgmlType::Q4_K: f.template operator()<GgmlType::Q4_K>(); break;
    case GgmlType::Q5_K: f.template operator()<GgmlType::Q5_K>(); break;
    case GgmlType::Q6_K: f.template operator()<GgmlType::Q6_K>(); break;
    case GgmlType::IQ4_XS: f.template operator()<GgmlType::IQ4_XS>(); break;
    default: break;
  }
}

// The format of a runtime type (a supported one).
struct FormatGetter {
  Format* f;
  template <GgmlType T> void operator()() const { *f = FormatOf<T>::f; }
};
inline Format format_of(GgmlType t) {
  Format f{};
  dispatch_type(t, FormatGetter{&f});
  return f;
}

}  // namespace mixq::cpu::ggml
