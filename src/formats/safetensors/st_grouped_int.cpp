// GroupedIntWeight (the unpacked GPTQ/AWQ form) -> canonical QuantizedWeight.
#include <algorithm>
#include <cmath>

#include "formats/safetensors/st_common.hpp"
#include "mixq/formats/grouped_int.hpp"

namespace mixq::formats {

uint32_t bitstream_get(const uint8_t* words, int64_t stride, int64_t i, int bits) {
  const int64_t bit = i * bits;
  const int64_t w = bit / 32;
  const int shift = static_cast<int>(bit % 32);
  uint64_t v = st::load_u32(words, w * stride);
  if (shift + bits > 32) v |= uint64_t(st::load_u32(words, (w + 1) * stride)) << 32;
  return static_cast<uint32_t>((v >> shift) & ((uint64_t(1) << bits) - 1));
}

void bitstream_put(int32_t* words, int64_t stride, int64_t i, int bits, uint32_t value) {
  const int64_t bit = i * bits;
  const int64_t w = bit / 32;
  const int shift = static_cast<int>(bit % 32);
  const uint64_t mask = ((uint64_t(1) << bits) - 1) << shift;
  const uint64_t val = (uint64_t(value) << shift) & mask;
  uint32_t lo = static_cast<uint32_t>(words[w * stride]);
  lo = static_cast<uint32_t>((lo & ~mask) | val);
  words[w * stride] = static_cast<int32_t>(lo);
  if (shift + bits > 32) {
    uint32_t hi = static_cast<uint32_t>(words[(w + 1) * stride]);
    hi = static_cast<uint32_t>((hi & ~(mask >> 32)) | (val >> 32));
    words[(w + 1) * stride] = static_cast<int32_t>(hi);
  }
}

void GroupedIntWeight::validate(const std::string& what) const {
  MIXQ_CHECK(bits == 2 || bits == 3 || bits == 4 || bits == 8, ErrorCode::Format, what, ": ", bits,
             "-bit codes are not supported (2, 3, 4, 8)");
  MIXQ_CHECK(K >= 1 && N >= 1 && groups >= 1 && K <= (int64_t(1) << 31) &&
                 N <= (int64_t(1) << 31) && groups <= K,
             ErrorCode::Format, what, ": bad geometry K=", K, " N=", N, " groups=", groups);
  MIXQ_CHECK(q.size() == size_t(K * N) && zeros.size() == size_t(groups * N) &&
                 scales.size() == size_t(groups * N),
             ErrorCode::Format, what, ": array sizes (codes ", q.size(), ", zeros ", zeros.size(),
             ", scales ", scales.size(), ") do not match K=", K, " N=", N, " G=", groups);
  MIXQ_CHECK(g_idx.empty() || g_idx.size() == size_t(K), ErrorCode::Format, what, ": g_idx has ",
             g_idx.size(), " entries, K is ", K);
  if (g_idx.empty()) {
    MIXQ_CHECK(group_size >= 1 && (K + group_size - 1) / group_size == groups, ErrorCode::Format,
               what, ": group size ", group_size, " with K=", K, " gives ",
               group_size >= 1 ? (K + group_size - 1) / group_size : 0, " groups, scales have ",
               groups);
  }
  for (int64_t k = 0; k < static_cast<int64_t>(g_idx.size()); ++k)
    MIXQ_CHECK(g_idx[k] >= 0 && g_idx[k] < groups, ErrorCode::Format, what, ": g_idx[", k,
               "] = ", g_idx[k], " outside [0, ", groups, ")");
  const int32_t qmax = (1 << bits) - 1;
  for (size_t i = 0; i < q.size(); ++i)
    MIXQ_CHECK(q[i] <= qmax, ErrorCode::Format, what, ": code ", int(q[i]), " at k=", i / N,
               " n=", i % N, " exceeds ", qmax);
  for (size_t i = 0; i < zeros.size(); ++i)
    MIXQ_CHECK(zeros[i] >= 0 && zeros[i] <= qmax + 1, ErrorCode::Format, what, ": zero point ",
               zeros[i], " at group ", i / N, " n=", i % N, " outside [0, ", qmax + 1, "]");
  for (size_t i = 0; i < scales.size(); ++i)
    MIXQ_CHECK(std::isfinite(scales[i]), ErrorCode::Format, what, ": scale at group ", i / N,
               " n=", i % N, " is not finite (", scales[i], ")");
}

QuantizedWeight grouped_int_to_quantized(const GroupedIntWeight& w, const std::string& origin,
                                         const std::string& what) {
  w.validate(what);
  const int64_t K = w.K, N = w.N, G = w.groups;
  // Column order: trivial (g = k / group_size) needs no permutation; otherwise sort k by group.
  bool trivial = true;
  int64_t g = w.group_size;
  if (!w.g_idx.empty()) {
    std::vector<int64_t> count(static_cast<size_t>(G), 0);
    for (const int32_t gi : w.g_idx) ++count[gi];
    if (g <= 0) g = count[0];
    MIXQ_CHECK(g >= 1, ErrorCode::Format, what, ": g_idx gives group 0 no columns (", G,
               " groups over K=", K, ")");
    // every group holds columns: the scales' G groups are the ceil(K / g) the group size gives (a
    // last group without columns would leave a scale group the canonical weight has no room for)
    MIXQ_CHECK((K + g - 1) / g == G, ErrorCode::Format, what, ": group size ", g, " with K=", K,
               " gives ", (K + g - 1) / g, " groups, the scales have ", G);
    for (int64_t i = 0; i < G; ++i) {
      const int64_t want = i + 1 < G ? g : K - (G - 1) * g;
      MIXQ_CHECK(count[i] == want, ErrorCode::Format, what, ": g_idx gives group ", i, " ",
                 count[i], " columns, expected ", want, " (group size ", g, ", K=", K,
                 "); mixq needs equal groups to make act-order groups contiguous");
    }
    for (int64_t k = 0; k < K && trivial; ++k) trivial = w.g_idx[k] == k / g;
  }
  std::vector<int32_t> perm;
  if (!trivial) {
    // Counting sort, stable in k: canonical column j holds original column perm[j].
    perm.resize(static_cast<size_t>(K));
    std::vector<int64_t> next(static_cast<size_t>(G));
    for (int64_t i = 0; i < G; ++i) next[i] = i * g;
    for (int64_t k = 0; k < K; ++k) perm[next[w.g_idx[k]]++] = static_cast<int32_t>(k);
  }

  QuantizedWeight out;
  out.N = N;
  out.K = K;
  out.code_type = w.bits <= 4 ? DType::U4 : DType::U8;
  out.block_k = std::min(g, K);  // a group size beyond K (g128 with K=64) is one block: same thing
  out.block_n = 1;
  out.scale_type = w.scale_type;
  out.zero_kind = ZeroKind::ZeroPoint;
  out.has_scales = true;
  out.allocate();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < K; ++j) {
      const int64_t k = perm.empty() ? j : perm[j];
      out.set_code_int(n, j, w.q[k * N + n]);
    }
  for (int64_t gi = 0; gi < G; ++gi)
    for (int64_t n = 0; n < N; ++n) {
      st::store_scale(out.scales.data(), w.scale_type, n * G + gi, w.scales[gi * N + n]);
      std::memcpy(out.zeros.data() + 4 * (n * G + gi), &w.zeros[gi * N + n], 4);
    }
  out.k_perm = std::move(perm);
  out.origin = origin;
  try {
    out.validate();
  } catch (const Error& e) {
    MIXQ_FAIL(ErrorCode::Format, what, ": ", e.what());
  }
  return out;
}

}  // namespace mixq::formats
