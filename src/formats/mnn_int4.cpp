// MNN int4 conv weights <-> canonical ConvWeight (formats.md §7).
#include <cmath>
#include <cstring>

#include "mixq/error.hpp"
#include "mixq/formats/mnn.hpp"

namespace mixq::formats {

ConvWeight mnn_int4_to_conv_weight(const MnnInt4Weight& m) {
  const char* w = "mnn_int4_to_conv_weight";
  MIXQ_CHECK(m.Co >= 1 && m.Ci >= 1 && m.Kh >= 1 && m.Kw >= 1 && m.Co <= (int64_t(1) << 31) &&
                 m.Ci <= (int64_t(1) << 24) && m.Kh <= 4096 && m.Kw <= 4096,
             ErrorCode::Format, w, ": bad shape Co=", m.Co, " Ci=", m.Ci, " Kh=", m.Kh,
             " Kw=", m.Kw);
  const int64_t K = m.Ci * m.Kh * m.Kw;
  MIXQ_CHECK(K <= (int64_t(1) << 31), ErrorCode::Format, w, ": Ci*Kh*Kw (", K, ") too large");
  const int64_t nb = m.blocks_per_channel;
  MIXQ_CHECK(nb >= 1 && m.Ci % nb == 0, ErrorCode::Format, w, ": ", nb,
             " blocks per output channel do not divide Ci (", m.Ci, ")");
  const int64_t total = m.Co * K;
  MIXQ_CHECK(m.packed.size() == static_cast<size_t>((total + 1) / 2), ErrorCode::Format, w,
             ": packed codes hold ", m.packed.size(), " bytes, Co*Ci*Kh*Kw = ", total, " needs ",
             (total + 1) / 2);
  const int64_t entries = m.Co * nb;
  MIXQ_CHECK(m.alpha.size() == static_cast<size_t>(entries * (m.asymmetric ? 2 : 1)),
             ErrorCode::Format, w, ": alpha holds ", m.alpha.size(), " values, expected ",
             entries * (m.asymmetric ? 2 : 1));
  ConvWeight cw;
  cw.Ci = m.Ci;
  cw.Kh = m.Kh;
  cw.Kw = m.Kw;
  cw.order = ConvKOrder::CiKhKw;
  QuantizedWeight& q = cw.weight;
  q.N = m.Co;
  q.K = K;
  q.code_type = DType::I4;
  q.block_k = K / nb;  // B * Kh * Kw, B = Ci / nb
  q.block_n = 1;
  q.scale_type = DType::F32;
  q.zero_kind = m.asymmetric ? ZeroKind::Offset : ZeroKind::None;
  q.allocate();
  // Flattened element e = oc*K + k sits in byte e/2, high nibble when e is even.
  for (int64_t oc = 0; oc < m.Co; ++oc)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = oc * K + k;
      const uint8_t b = m.packed[e / 2];
      const int nibble = (e % 2 == 0) ? (b >> 4) : (b & 0xF);
      q.set_code_int(oc, k, nibble - 8);
    }
  for (int64_t i = 0; i < entries; ++i) {
    const float scale = m.asymmetric ? m.alpha[2 * i + 1] : m.alpha[i];
    MIXQ_CHECK(std::isfinite(scale), ErrorCode::Format, w, ": scale of channel ", i / nb, " block ",
               i % nb, " is not finite");
    std::memcpy(q.scales.data() + 4 * i, &scale, 4);
    if (m.asymmetric) {
      const float mn = m.alpha[2 * i];
      MIXQ_CHECK(std::isfinite(mn), ErrorCode::Format, w, ": min of channel ", i / nb, " block ",
                 i % nb, " is not finite");
      // MNN's load-time conversion: offset = min - clampMin*scale with clampMin = -8.
      const float offset = mn + 8.0f * scale;
      std::memcpy(q.zeros.data() + 4 * i, &offset, 4);
    }
  }
  q.origin = m.asymmetric ? "mnn int4 asym" : "mnn int4 sym";
  cw.validate();
  return cw;
}

MnnInt4Weight mnn_int4_pack(const ConvWeight& cw) {
  cw.validate();
  const QuantizedWeight& q = cw.weight;
  MIXQ_CHECK_ARG(cw.order == ConvKOrder::CiKhKw && q.code_type == DType::I4 &&
                     q.scale_type == DType::F32 && q.block_n == 1 && q.has_scales &&
                     (q.zero_kind == ZeroKind::None || q.zero_kind == ZeroKind::Offset),
                 "mnn_int4_pack: needs CiKhKw order, i4 codes, f32 scales per row, none/offset "
                 "zeros; got ",
                 q.describe());
  MnnInt4Weight m;
  m.Co = q.N;
  m.Ci = cw.Ci;
  m.Kh = cw.Kh;
  m.Kw = cw.Kw;
  m.blocks_per_channel = q.n_blocks_k();
  m.asymmetric = q.zero_kind == ZeroKind::Offset;
  const int64_t K = q.K;
  m.packed.assign(static_cast<size_t>((q.N * K + 1) / 2), 0);
  for (int64_t oc = 0; oc < q.N; ++oc)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = oc * K + k;
      const uint8_t nibble = static_cast<uint8_t>(q.code_int(oc, k) + 8);
      m.packed[e / 2] |= (e % 2 == 0) ? static_cast<uint8_t>(nibble << 4) : nibble;
    }
  const int64_t entries = q.n_scale_entries();
  m.alpha.resize(static_cast<size_t>(entries * (m.asymmetric ? 2 : 1)));
  for (int64_t i = 0; i < entries; ++i) {
    const float s = q.scale(i / q.n_blocks_k(), i % q.n_blocks_k());
    if (m.asymmetric) {
      m.alpha[2 * i] = q.offset(i / q.n_blocks_k(), i % q.n_blocks_k()) - 8.0f * s;
      m.alpha[2 * i + 1] = s;
    } else {
      m.alpha[i] = s;
    }
  }
  return m;
}

}  // namespace mixq::formats
