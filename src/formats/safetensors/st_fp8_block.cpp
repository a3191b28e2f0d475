// FP8 block (DeepSeek-V3 style) <-> canonical (formats.md §5.1).
#include <cmath>
#include <cstring>

#include "formats/safetensors/st_common.hpp"
#include "mixq/formats/fp8_block.hpp"

namespace mixq::formats {

QuantizedWeight fp8_block_to_quantized(const Fp8BlockView& v, const std::string& what) {
  MIXQ_CHECK(v.N >= 1 && v.K >= 1 && v.N <= (int64_t(1) << 31) && v.K <= (int64_t(1) << 31),
             ErrorCode::Format, what, ": bad shape [", v.N, ", ", v.K, "]");
  MIXQ_CHECK(v.block_n >= 1 && v.block_k >= 1, ErrorCode::Format, what, ": bad block size [",
             v.block_n, ", ", v.block_k, "]");
  QuantizedWeight w;
  w.N = v.N;
  w.K = v.K;
  w.code_type = DType::F8E4M3;
  w.block_k = std::min(v.block_k, v.K);
  w.block_n = v.block_n;
  w.scale_type = DType::F32;
  w.zero_kind = ZeroKind::None;
  w.allocate();
  MIXQ_CHECK(w.n_blocks_k() == (v.K + v.block_k - 1) / v.block_k, ErrorCode::Internal, what,
             ": block count");
  std::memcpy(w.codes.data(), v.weight, w.codes.size());
  const int64_t nbk = w.n_blocks_k();
  for (int64_t i = 0; i < w.n_scale_entries(); ++i) {
    const float s = st::load_scale(v.scale_inv, DType::F32, i);
    MIXQ_CHECK(std::isfinite(s), ErrorCode::Format, what, ": weight_scale_inv[", i / nbk, "][",
               i % nbk, "] is not finite (", s, ")");
    std::memcpy(w.scales.data() + 4 * i, &s, 4);
  }
  w.origin = "fp8 block " + std::to_string(v.block_n) + "x" + std::to_string(v.block_k);
  st::validate_loaded(w, what);
  return w;
}

Fp8BlockPacked fp8_block_pack(const QuantizedWeight& w) {
  w.validate();
  MIXQ_CHECK_ARG(w.code_type == DType::F8E4M3 && w.scale_type == DType::F32 &&
                     w.zero_kind == ZeroKind::None && w.has_scales && w.k_perm.empty() && w.plain_blocks(),
                 "fp8_block_pack: needs f8e4m3 codes, f32 scales, no zeros, no k_perm, no "
                 "shard phase; got ",
                 w.describe());
  Fp8BlockPacked p;
  p.N = w.N;
  p.K = w.K;
  p.block_n = w.block_n;
  p.block_k = w.block_k;
  p.weight = w.codes;
  p.scale_inv.resize(static_cast<size_t>(w.n_scale_entries()));
  std::memcpy(p.scale_inv.data(), w.scales.data(), w.scales.size());
  return p;
}

Fp8BlockView fp8_block_view(const Fp8BlockPacked& p) {
  Fp8BlockView v;
  v.N = p.N;
  v.K = p.K;
  v.block_n = p.block_n;
  v.block_k = p.block_k;
  v.weight = p.weight.data();
  v.scale_inv = p.scale_inv.data();
  return v;
}

}  // namespace mixq::formats
