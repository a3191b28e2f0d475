// GPTQ pack / unpack (formats.md §3.2, §3.3).
#include <algorithm>

#include "formats/safetensors/st_common.hpp"
#include "mixq/formats/gptq.hpp"

namespace mixq::formats {

GptqPacked gptq_pack(const GroupedIntWeight& w, GptqVersion version) {
  w.validate("gptq_pack");
  const int b = w.bits;
  GptqPacked p;
  p.bits = b;
  p.K = w.K;
  p.N = w.N;
  p.G = w.groups;
  const int64_t rows = gptq_qweight_rows(w.K, b), zcols = gptq_qzeros_cols(w.N, b);
  p.qweight.assign(static_cast<size_t>(rows * w.N), 0);
  p.qzeros.assign(static_cast<size_t>(w.groups * zcols), 0);
  // Along K within each column n: the column's words are qweight[r][n], stride N.
  for (int64_t k = 0; k < w.K; ++k)
    for (int64_t n = 0; n < w.N; ++n)
      bitstream_put(p.qweight.data() + n, w.N, k, b, w.q[k * w.N + n]);
  const int32_t qmax = (1 << b) - 1;
  for (int64_t g = 0; g < w.groups; ++g)
    for (int64_t n = 0; n < w.N; ++n) {
      int32_t z = w.zeros[g * w.N + n];
      if (version == GptqVersion::V1) {
        MIXQ_CHECK_ARG(z >= 1,
                       "gptq_pack: v1 stores z - 1 and cannot represent zero point 0 "
                       "(group ",
                       g, ", n ", n, "); use v2");
        z -= 1;
      }
      MIXQ_CHECK_ARG(z <= qmax, "gptq_pack: zero point ", z, " does not fit ", b, " bits");
      bitstream_put(p.qzeros.data() + g * zcols, 1, n, b, static_cast<uint32_t>(z));
    }
  p.scale_type = w.scale_type;
  p.scales = st::store_scales(w.scale_type, w.scales.data(), w.groups * w.N);
  p.g_idx.resize(static_cast<size_t>(w.K));
  for (int64_t k = 0; k < w.K; ++k) p.g_idx[k] = w.group_of(k);
  return p;
}

GptqPackedView gptq_view(const GptqPacked& p) {
  GptqPackedView v;
  v.bits = p.bits;
  v.K = p.K;
  v.N = p.N;
  v.G = p.G;
  v.qweight = p.qweight.data();
  v.qzeros = p.qzeros.data();
  v.scale_type = p.scale_type;
  v.scales = p.scales.data();
  v.g_idx = p.g_idx.empty() ? nullptr : p.g_idx.data();
  return v;
}

GroupedIntWeight gptq_unpack(const GptqPackedView& v, GptqVersion version, int64_t group_size,
                             const std::string& what) {
  return st::gptq_unpack_window(v, version, group_size, what, {0, v.N, 0, v.K});
}

GroupedIntWeight st::gptq_unpack_window(const GptqPackedView& v, GptqVersion version,
                                        int64_t group_size, const std::string& what, Window win) {
  const int b = v.bits;
  MIXQ_CHECK(b == 2 || b == 3 || b == 4 || b == 8, ErrorCode::Format, what, ": ", b,
             "-bit GPTQ is not supported (2, 3, 4, 8)");
  MIXQ_CHECK(v.K >= 1 && v.N >= 1 && v.G >= 1 && v.K <= (int64_t(1) << 31) &&
                 v.N <= (int64_t(1) << 31) && v.G <= v.K,
             ErrorCode::Format, what, ": bad geometry K=", v.K, " N=", v.N, " G=", v.G);
  const int64_t n0 = win.n0, nw = win.n1 - win.n0, k0 = win.k0, kw = win.k1 - win.k0;
  // a K window is whole groups: its groups are the file's [g0, g0 + G)
  const int64_t gs = group_size > 0 ? group_size : (v.K + v.G - 1) / v.G;
  const st::WindowGroups wg = st::window_groups(win, v.N, v.K, v.G, gs, what);
  const int64_t g0 = wg.g0, G = wg.count;
  GroupedIntWeight w;
  w.bits = b;
  w.K = kw;
  w.N = nw;
  w.groups = G;
  w.group_size = group_size;
  w.scale_type = v.scale_type;
  const uint8_t* qw = static_cast<const uint8_t*>(v.qweight);
  const uint8_t* qz = static_cast<const uint8_t*>(v.qzeros);
  const int64_t zcols = gptq_qzeros_cols(v.N, b);
  // only the words holding the window's codes are read (column n's words have stride N)
  w.q.resize(static_cast<size_t>(kw * nw));
  const int64_t c0 = std::max<int64_t>(0, win.codes_k0 - k0), c1 = std::min(kw, win.codes_k1 - k0);
  for (int64_t k = c0; k < c1; ++k)
    for (int64_t j = 0; j < nw; ++j)
      w.q[k * nw + j] = static_cast<uint8_t>(bitstream_get(qw + 4 * (n0 + j), v.N, k0 + k, b));
  w.zeros.resize(static_cast<size_t>(G * nw));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t j = 0; j < nw; ++j) {
      const int32_t stored = static_cast<int32_t>(bitstream_get(qz + 4 * (g0 + g) * zcols, 1, n0 + j, b));
      w.zeros[g * nw + j] = version == GptqVersion::V1 ? stored + 1 : stored;
    }
  w.scales.resize(static_cast<size_t>(G * nw));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t j = 0; j < nw; ++j)
      w.scales[g * nw + j] = st::load_scale(v.scales, v.scale_type, (g0 + g) * v.N + n0 + j);
  if (v.g_idx) {
    w.g_idx.resize(static_cast<size_t>(kw));
    for (int64_t k = 0; k < kw; ++k) w.g_idx[k] = st::load_i32(v.g_idx, k0 + k) - int32_t(g0);
  }
  if (w.group_size <= 0 && w.g_idx.empty()) {
    // No config and no g_idx: the only consistent group size is ceil(K / G) of the file's K.
    w.group_size = gs;
  }
  w.validate(what);
  return w;
}

}  // namespace mixq::formats
