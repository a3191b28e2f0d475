// AWQ GEMM pack / unpack (formats.md §4.1).
#include "formats/safetensors/st_common.hpp"
#include "mixq/formats/awq.hpp"

namespace mixq::formats {

namespace {
// Nibble i of a word holds column 8c + ORDER[i], ORDER = {0, 2, 4, 6, 1, 3, 5, 7}; so column
// 8c + j lives in nibble kReverse[j].
constexpr int kReverse[8] = {0, 4, 1, 5, 2, 6, 3, 7};
}  // namespace

int awq_nibble_of_column(int j) {
  return kReverse[j & 7];
}

AwqPacked awq_pack(const GroupedIntWeight& w) {
  w.validate("awq_pack");
  MIXQ_CHECK_ARG(w.bits == 4, "awq_pack: AWQ GEMM is 4-bit only, got ", w.bits);
  MIXQ_CHECK_ARG(w.g_idx.empty(), "awq_pack: AWQ has no g_idx / act-order");
  const int64_t cols = (w.N + 7) / 8;
  AwqPacked p;
  p.K = w.K;
  p.N = w.N;
  p.G = w.groups;
  p.qweight.assign(static_cast<size_t>(w.K * cols), 0);
  p.qzeros.assign(static_cast<size_t>(w.groups * cols), 0);
  auto put = [](int32_t& word, int64_t n, uint32_t v) {
    const int shift = 4 * kReverse[n % 8];
    word = static_cast<int32_t>((static_cast<uint32_t>(word) & ~(0xFu << shift)) | (v << shift));
  };
  for (int64_t k = 0; k < w.K; ++k)
    for (int64_t n = 0; n < w.N; ++n) put(p.qweight[k * cols + n / 8], n, w.q[k * w.N + n]);
  for (int64_t g = 0; g < w.groups; ++g)
    for (int64_t n = 0; n < w.N; ++n) {
      const int32_t z = w.zeros[g * w.N + n];
      MIXQ_CHECK_ARG(z >= 0 && z <= 15, "awq_pack: zero point ", z, " does not fit 4 bits");
      put(p.qzeros[g * cols + n / 8], n, static_cast<uint32_t>(z));
    }
  p.scale_type = w.scale_type;
  p.scales = st::store_scales(w.scale_type, w.scales.data(), w.groups * w.N);
  return p;
}

AwqPackedView awq_view(const AwqPacked& p) {
  AwqPackedView v;
  v.K = p.K;
  v.N = p.N;
  v.G = p.G;
  v.qweight = p.qweight.data();
  v.qzeros = p.qzeros.data();
  v.scale_type = p.scale_type;
  v.scales = p.scales.data();
  return v;
}

GroupedIntWeight awq_unpack(const AwqPackedView& v, int64_t group_size, const std::string& what) {
  return st::awq_unpack_window(v, group_size, what, {0, v.N, 0, v.K});
}

GroupedIntWeight st::awq_unpack_window(const AwqPackedView& v, int64_t group_size,
                                       const std::string& what, Window win) {
  MIXQ_CHECK(v.K >= 1 && v.N >= 1 && v.G >= 1 && v.K <= (int64_t(1) << 31) &&
                 v.N <= (int64_t(1) << 31) && v.G <= v.K,
             ErrorCode::Format, what, ": bad geometry K=", v.K, " N=", v.N, " G=", v.G);
  const int64_t n0 = win.n0, nw = win.n1 - win.n0, k0 = win.k0, kw = win.k1 - win.k0;
  const int64_t gs = group_size > 0 ? group_size : (v.K + v.G - 1) / v.G;
  // a K window is whole groups: its groups are the file's [g0, g0 + G)
  const st::WindowGroups wg = st::window_groups(win, v.N, v.K, v.G, gs, what);
  const int64_t g0 = wg.g0, G = wg.count;
  const int64_t cols = (v.N + 7) / 8;
  GroupedIntWeight w;
  w.bits = 4;
  w.K = kw;
  w.N = nw;
  w.groups = G;
  w.group_size = gs;
  w.scale_type = v.scale_type;
  auto get = [](const void* base, int64_t word, int64_t n) {
    return static_cast<uint8_t>((st::load_u32(base, word) >> (4 * kReverse[n % 8])) & 0xF);
  };
  // only the words of the window's rows and columns are read
  w.q.resize(static_cast<size_t>(kw * nw));
  for (int64_t k = 0; k < kw; ++k)
    for (int64_t j = 0; j < nw; ++j)
      w.q[k * nw + j] = get(v.qweight, (k0 + k) * cols + (n0 + j) / 8, n0 + j);
  w.zeros.resize(static_cast<size_t>(G * nw));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t j = 0; j < nw; ++j) w.zeros[g * nw + j] = get(v.qzeros, (g0 + g) * cols + (n0 + j) / 8, n0 + j);
  w.scales.resize(static_cast<size_t>(G * nw));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t j = 0; j < nw; ++j)
      w.scales[g * nw + j] = st::load_scale(v.scales, v.scale_type, (g0 + g) * v.N + n0 + j);
  w.validate(what);
  return w;
}

}  // namespace mixq::formats
