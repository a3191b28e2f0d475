// Tensor-parallel shards (mixq/shard.hpp): every canonical scheme at awkward splits (groups and
// FP8 128-blocks cut in two, act-order), checked element by element against the global weight,
// through float64 products (column shards concatenate bit for bit, row shards sum to 1e-12), the
// CPU and reference backends, load_shard, the big layer shapes' ranges, and the errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/kernel_k_layout.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/awq.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/fp8_block.hpp"
#include "mixq/formats/gptq.hpp"
#include "mixq/formats/safetensors.hpp"
#include "mixq/formats/ggml_blocks.hpp"
#include "mixq/formats/gguf.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/shard.hpp"
#include "model_layer_shapes.hpp"

using namespace mixq;

namespace {

struct Scheme {
  const char* name;
  DType code;
  int64_t block_k;  // 0: per-channel
  int64_t block_n;
  DType scale;
  ZeroKind zero;
  bool act_order;
};

// The canonical forms the importers produce: mixq's own w4/w8 (symmetric, offset), GPTQ / AWQ
// (unsigned codes with zero points, with and without act-order), per-channel W8, FP8 128x128,
// dense f16. GGUF-derived forms come from ggml_to_canonical (gguf_weight below).
const Scheme kSchemes[] = {
    {"w4g128", DType::I4, 128, 1, DType::F16, ZeroKind::None, false},
    {"w4g128-offset", DType::I4, 128, 1, DType::F32, ZeroKind::Offset, false},
    {"gptq4g128", DType::U4, 128, 1, DType::F16, ZeroKind::ZeroPoint, false},
    {"gptq4g128-actorder", DType::U4, 128, 1, DType::F16, ZeroKind::ZeroPoint, true},
    {"gptq8g64-actorder", DType::U8, 64, 1, DType::F16, ZeroKind::ZeroPoint, true},
    {"awq4g128", DType::U4, 128, 1, DType::BF16, ZeroKind::ZeroPoint, false},
    {"w8g128-offset", DType::I8, 128, 1, DType::F32, ZeroKind::Offset, false},
    {"w8-per-channel", DType::I8, 0, 1, DType::F32, ZeroKind::None, false},
    {"fp8b128x128", DType::F8E4M3, 128, 128, DType::F32, ZeroKind::None, false},
    {"dense-f16", DType::F16, 0, 1, DType::F32, ZeroKind::None, false},
};

void store_scale(std::vector<uint8_t>& buf, DType t, int64_t i, float v) {
  if (t == DType::F32) {
    std::memcpy(&buf[size_t(i) * 4], &v, 4);
  } else {
    const uint16_t h = t == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
    std::memcpy(&buf[size_t(i) * 2], &h, 2);
  }
}

QuantizedWeight random_weight(const Scheme& sc, int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  QuantizedWeight w;
  w.N = N;
  w.K = K;
  w.code_type = sc.code;
  const bool dense = sc.code == DType::F16;
  w.has_scales = !dense;
  w.block_k = sc.block_k ? std::min(sc.block_k, K) : K;
  w.block_n = sc.block_n;
  w.scale_type = sc.scale;
  w.zero_kind = sc.zero;
  w.allocate();
  std::uniform_real_distribution<float> u(-1.f, 1.f), us(0.01f, 0.1f);
  if (dense) {
    for (int64_t i = 0; i < N * K; ++i) {
      const uint16_t h = f32_to_f16(u(rng));
      std::memcpy(&w.codes[size_t(i) * 2], &h, 2);
    }
  } else {
    for (auto& b : w.codes) b = static_cast<uint8_t>(rng());
    if (sc.code == DType::F8E4M3)
      for (auto& b : w.codes)
        if ((b & 0x7F) == 0x7F) b = 0x7E;  // no NaN codes
    if (is_subbyte(sc.code) && (K & 1))
      for (int64_t n = 0; n < N; ++n) w.codes[size_t(n * w.row_bytes() + K / 2)] &= 0x0F;
    for (int64_t i = 0; i < w.n_scale_entries(); ++i) {
      store_scale(w.scales, sc.scale, i, us(rng));
      if (sc.zero == ZeroKind::Offset) store_scale(w.zeros, sc.scale, i, u(rng) * 0.1f);
      if (sc.zero == ZeroKind::ZeroPoint) {
        const int32_t z = code_min(sc.code) + int32_t(rng() % uint32_t(code_max(sc.code) - code_min(sc.code) + 1));
        std::memcpy(&w.zeros[size_t(i) * 4], &z, 4);
      }
    }
  }
  if (sc.act_order) {
    w.k_perm.resize(size_t(K));
    for (int64_t k = 0; k < K; ++k) w.k_perm[size_t(k)] = int32_t(k);
    std::shuffle(w.k_perm.begin(), w.k_perm.end(), rng);
  }
  w.origin = sc.name;
  w.validate();
  return w;
}

// A GGUF tensor of `type` through ggml_to_canonical (carries its native blocks).
QuantizedWeight gguf_weight(formats::GgmlType type, int64_t N, int64_t K, uint32_t seed,
                            std::vector<uint8_t>* raw = nullptr) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const formats::GgmlTypeInfo* t = formats::ggml_type_info(uint32_t(type));
  const int64_t rb = K / t->block_elems * t->block_bytes;
  std::vector<uint8_t> bytes(size_t(N * rb));
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    for (auto& v : row) v = u(rng);
    formats::ggml_quantize_row(type, row.data(), bytes.data() + n * rb, K);
  }
  if (raw) *raw = bytes;
  return formats::ggml_to_canonical(type, bytes.data(), N, K, "test");
}

std::vector<float> random_x(int64_t M, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(size_t(M * K));
  for (auto& v : x) v = u(rng);
  return x;
}

// Y = X . W^T in float64 from the dequantized f32 values (canonical order, X gathered through
// k_perm), summed in canonical order. x is [M][ldx] starting at column x0.
std::vector<double> ref64(const QuantizedWeight& w, const float* x, int64_t M, int64_t ldx) {
  std::vector<double> y(size_t(M * w.N), 0.0);
  std::vector<float> row(size_t(w.K));
  for (int64_t n = 0; n < w.N; ++n) {
    dequantize_rows(w, n, n + 1, row.data(), false);
    for (int64_t m = 0; m < M; ++m) {
      double acc = 0.0;
      for (int64_t j = 0; j < w.K; ++j)
        acc += double(x[m * ldx + (w.k_perm.empty() ? j : w.k_perm[size_t(j)])]) * double(row[size_t(j)]);
      y[size_t(m * w.N + n)] = acc;
    }
  }
  return y;
}

std::vector<float> run_backend(const QuantizedWeight& w, const std::vector<float>& x, int64_t M,
                               BackendKind b) {
  PrepareOptions o;
  o.backend = b;
  o.tuning.cpu_activations = Tuning::CpuActivations::Exact;
  const PreparedWeight pw = prepare(w, o);
  std::vector<float> y(size_t(M * w.N));
  linear(TensorView(const_cast<float*>(x.data()), DType::F32, {M, w.K}), pw,
         TensorView(y.data(), DType::F32, {M, w.N}));
  return y;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double d : v) m = std::max(m, std::fabs(d));
  return m;
}

// Checks every shard of `w` over `world` along `axis`: element-wise equality with the global
// weight, float64 concat / sum, and (when `backends`) the CPU and reference backends.
void check_split(const QuantizedWeight& w, int64_t world, ShardAxis axis, bool backends,
                 const std::string& what) {
  SCOPED_TRACE(what + " world " + std::to_string(world) + " " + shard_axis_name(axis));
  const int64_t M = 2;
  const std::vector<float> x = random_x(M, w.K, 7);
  const std::vector<double> yg = ref64(w, x.data(), M, w.K);
  std::vector<float> global_rows(size_t(w.N * w.K));
  dequantize_rows(w, 0, w.N, global_rows.data(), true);  // original K order
  std::vector<double> ysum(size_t(M * w.N), 0.0);
  std::vector<float> ycpu_sum(size_t(M * w.N), 0.f);
  std::vector<QuantizedWeight> shards;
  std::vector<ShardSpec> specs;
  for (int64_t r = 0; r < world; ++r) {
    const ShardSpec spec{r, world, axis};
    const auto rg = shard_range(axis == ShardAxis::Column ? w.N : w.K, spec);
    const QuantizedWeight s = shard(w, spec);
    const bool col = axis == ShardAxis::Column;
    ASSERT_EQ(s.N, col ? rg.second - rg.first : w.N);
    ASSERT_EQ(s.K, col ? w.K : rg.second - rg.first);
    // Element by element, bit for bit, in original K order.
    std::vector<float> rows(size_t(s.N * s.K));
    dequantize_rows(s, 0, s.N, rows.data(), true);
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t k = 0; k < s.K; ++k) {
        const float g = col ? global_rows[size_t((rg.first + n) * w.K + k)]
                            : global_rows[size_t(n * w.K + rg.first + k)];
        const float v = rows[size_t(n * s.K + k)];
        ASSERT_EQ(std::memcmp(&g, &v, 4), 0) << "rank " << r << " n " << n << " k " << k << ": "
                                             << v << " vs global " << g << " (" << s.describe()
                                             << ")";
      }
    // float64 products.
    std::vector<double> ys;
    std::vector<float> xs;
    if (col) {
      ys = ref64(s, x.data(), M, w.K);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < s.N; ++n) {
          const double g = yg[size_t(m * w.N + rg.first + n)], v = ys[size_t(m * s.N + n)];
          ASSERT_EQ(std::memcmp(&g, &v, 8), 0) << "rank " << r << " m " << m << " n " << n;
        }
    } else {
      ys = ref64(s, x.data() + rg.first, M, w.K);
      for (size_t i = 0; i < ys.size(); ++i) ysum[i] += ys[i];
    }
    if (backends) {
      xs.resize(size_t(M * s.K));
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < s.K; ++k)
          xs[size_t(m * s.K + k)] = x[size_t(m * w.K + (col ? k : rg.first + k))];
      for (BackendKind b : {BackendKind::CPU, BackendKind::Reference}) {
        const std::vector<float> y = run_backend(s, xs, M, b);
        const double tol = (b == BackendKind::CPU ? 1e-5 : 1e-6) * max_abs(ys) + 1e-30;
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_NEAR(y[i], ys[i], tol) << backend_name(b) << " rank " << r << " i " << i;
        if (!col && b == BackendKind::CPU)
          for (size_t i = 0; i < y.size(); ++i) ycpu_sum[i] += y[i];
      }
    }
    shards.push_back(s);
    specs.push_back(spec);
  }
  check_shard_set(shards, specs);
  if (axis == ShardAxis::Row) {
    const double scale = max_abs(yg);
    for (size_t i = 0; i < ysum.size(); ++i) {
      ASSERT_NEAR(ysum[i], yg[i], 1e-12 * scale) << "sum of row shards, i " << i;
      if (backends) {
        ASSERT_NEAR(ycpu_sum[i], yg[i], 1e-4 * scale) << "cpu sum, i " << i;
      }
    }
  }
}

}  // namespace

TEST(ShardRange, BalancedContiguous) {
  // The first dim % world ranks hold one more.
  EXPECT_EQ(shard_range(10, {0, 3}), (std::pair<int64_t, int64_t>(0, 4)));
  EXPECT_EQ(shard_range(10, {1, 3}), (std::pair<int64_t, int64_t>(4, 7)));
  EXPECT_EQ(shard_range(10, {2, 3}), (std::pair<int64_t, int64_t>(7, 10)));
  EXPECT_EQ(shard_range(14784, {7, 8, ShardAxis::Row}), (std::pair<int64_t, int64_t>(12936, 14784)));
  // Granularity: whole units of 128, the last unit short (1000 = 8 units, the last of 104).
  EXPECT_EQ(shard_range(1000, {0, 3, ShardAxis::Row, 128}), (std::pair<int64_t, int64_t>(0, 384)));
  EXPECT_EQ(shard_range(1000, {2, 3, ShardAxis::Row, 128}), (std::pair<int64_t, int64_t>(768, 1000)));
}

TEST(Shard, EverySchemeAwkwardRowSplits) {
  // K = 14784 over 8 (1848 each: cuts g128 groups and FP8 blocks), over 3, and K = 29568 over 4
  // (7392 = 57.75 groups). N odd-sized so FP8 128-row blocks end partial.
  for (const Scheme& sc : kSchemes) {
    const QuantizedWeight w = random_weight(sc, 19, 14784, 11);
    check_split(w, 8, ShardAxis::Row, true, sc.name);
    check_split(w, 3, ShardAxis::Row, false, sc.name);
    const QuantizedWeight w2 = random_weight(sc, 5, 29568, 12);
    check_split(w2, 4, ShardAxis::Row, false, sc.name);
  }
}

TEST(Shard, EverySchemeAwkwardColumnSplits) {
  // N = 10944 over 3 (3648 each: 28.5 FP8 row blocks, so ranks 1 and 2 start mid-block).
  for (const Scheme& sc : kSchemes) {
    const QuantizedWeight w = random_weight(sc, 10944, 200, 13);
    check_split(w, 3, ShardAxis::Column, false, sc.name);
    const QuantizedWeight small = random_weight(sc, 300, 520, 14);
    for (int64_t world : {1, 2, 3, 4, 8}) check_split(small, world, ShardAxis::Column, true, sc.name);
  }
}

TEST(Shard, SmallWorldsCutGroupsEverywhere) {
  // K = 1000 (odd tail, g128 and g64 cut at every world), odd nibble starts for 4-bit codes.
  for (const Scheme& sc : kSchemes)
    for (int64_t world : {1, 2, 3, 4, 8}) {
      const QuantizedWeight w = random_weight(sc, 37, 1001, 15);
      check_split(w, world, ShardAxis::Row, true, sc.name);
    }
}

TEST(Shard, ShardOfShard) {
  // A column shard of a row shard of an act-order weight (listed blocks carried along).
  const QuantizedWeight w = random_weight(kSchemes[3], 40, 1000, 16);
  const QuantizedWeight r = shard(w, {1, 3, ShardAxis::Row});
  EXPECT_FALSE(r.k_block_starts.empty());
  check_split(r, 3, ShardAxis::Column, true, "row shard of gptq act-order");
  check_split(r, 2, ShardAxis::Row, true, "row shard of gptq act-order");
  const QuantizedWeight f = shard(random_weight(kSchemes[8], 300, 1000, 17), {1, 3, ShardAxis::Row});
  EXPECT_NE(f.k_phase, 0);
  check_split(f, 3, ShardAxis::Row, true, "row shard of fp8");
  check_split(f, 2, ShardAxis::Column, true, "row shard of fp8");
}

TEST(Shard, PhaseFieldsAndPlainShards) {
  const QuantizedWeight w = random_weight(kSchemes[0], 8, 1000, 18);
  const QuantizedWeight s = shard(w, {1, 3, ShardAxis::Row});  // [334, 667)
  EXPECT_EQ(s.k_phase, 334 % 128);
  EXPECT_EQ(s.n_blocks_k(), (333 + 78 + 127) / 128);
  // Granularity 128: whole groups, a plain weight every backend takes.
  const QuantizedWeight p = shard(w, {1, 3, ShardAxis::Row, 128});
  EXPECT_TRUE(p.plain_blocks());
  EXPECT_EQ(p.K, 384);
  // Per-channel row shards stay per-channel.
  const QuantizedWeight pc = shard(random_weight(kSchemes[7], 8, 1000, 19), {2, 3, ShardAxis::Row});
  EXPECT_TRUE(pc.per_channel());
  // FP8 column shard starting mid-block.
  const QuantizedWeight f = shard(random_weight(kSchemes[8], 300, 256, 20), {1, 3, ShardAxis::Column});
  EXPECT_EQ(f.n_phase, 100);
}

TEST(Shard, GgufTypes) {
  using formats::GgmlType;
  // Q4_K (256-element super-blocks): K = 14336 over 8 is on super-block boundaries (native
  // blocks sliced along), over 3 it is not (blocks dropped, canonical phase).
  const QuantizedWeight q4k = gguf_weight(GgmlType::Q4_K, 9, 14336, 21);
  ASSERT_TRUE(q4k.ggml);
  EXPECT_TRUE(shard(q4k, {3, 8, ShardAxis::Row}).ggml);
  EXPECT_FALSE(shard(q4k, {1, 3, ShardAxis::Row}).ggml);
  EXPECT_TRUE(shard(q4k, {1, 3, ShardAxis::Column}).ggml);
  check_split(q4k, 8, ShardAxis::Row, true, "Q4_K");
  check_split(q4k, 3, ShardAxis::Row, true, "Q4_K");
  check_split(q4k, 3, ShardAxis::Column, true, "Q4_K");
  // Q8_0 and Q4_0 (32-element blocks): K = 14784 over 8 cuts blocks.
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    const QuantizedWeight g = gguf_weight(t, 7, 14784, 22);
    check_split(g, 8, ShardAxis::Row, true, formats::ggml_type_name(uint32_t(t)));
    check_split(g, 3, ShardAxis::Column, true, formats::ggml_type_name(uint32_t(t)));
  }
  // Sliced native blocks are the shard's rows' bytes: the CPU native path agrees.
  const QuantizedWeight s = shard(q4k, {3, 8, ShardAxis::Row});
  QuantizedWeight canon = s;
  canon.ggml.reset();
  const std::vector<float> x = random_x(2, s.K, 23);
  const std::vector<float> a = run_backend(s, x, 2, BackendKind::CPU);
  const std::vector<float> b = run_backend(canon, x, 2, BackendKind::CPU);
  const std::vector<double> r = ref64(canon, x.data(), 2, s.K);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], r[i], 1e-5 * max_abs(r));
    EXPECT_NEAR(b[i], r[i], 1e-5 * max_abs(r));
  }
}

// Random GPTQ / AWQ codes of `bits` bits, K x N in groups of g (act-order: a shuffled g_idx of
// equal groups), zero points from 1 (GPTQ v1 stores z - 1), f16 scales.
formats::GroupedIntWeight random_grouped_int(int bits, int64_t K, int64_t N, int64_t g, bool act_order,
                                             uint32_t seed) {
  std::mt19937 rng(seed);
  formats::GroupedIntWeight w;
  w.bits = bits;
  w.K = K;
  w.N = N;
  w.groups = (K + g - 1) / g;
  w.group_size = g;
  w.scale_type = DType::F16;
  w.q.resize(size_t(K * N));
  const uint32_t levels = 1u << bits;
  for (auto& q : w.q) q = uint8_t(rng() % levels);
  w.zeros.resize(size_t(w.groups * N));
  for (auto& z : w.zeros) z = int32_t(1 + rng() % (levels - 1));
  std::uniform_real_distribution<float> us(0.01f, 0.1f);
  w.scales.resize(size_t(w.groups * N));
  for (auto& v : w.scales) v = f16_to_f32(f32_to_f16(us(rng)));
  if (act_order) {
    std::vector<int32_t> perm(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) perm[size_t(k)] = int32_t(k);
    std::shuffle(perm.begin(), perm.end(), rng);
    w.g_idx.resize(size_t(K));
    for (int64_t k = 0; k < K; ++k) w.g_idx[size_t(k)] = int32_t(perm[size_t(k)] / g);
  }
  return w;
}

// One safetensors file holding an act-order 4-bit GPTQ module "q", a 3-bit GPTQ module "p"
// (codes straddling words), an AWQ module "a", an FP8-block weight "f" (a partial last block)
// and a dense f16 matrix "d" (no quantize config: each is recognised by its shapes).
void write_imported_formats(const std::string& path) {
  const formats::GptqPacked q =
      formats::gptq_pack(random_grouped_int(4, 512, 300, 128, true, 40), formats::GptqVersion::V1);
  const formats::GptqPacked p =
      formats::gptq_pack(random_grouped_int(3, 512, 300, 128, false, 43), formats::GptqVersion::V1);
  const formats::AwqPacked a = formats::awq_pack(random_grouped_int(4, 512, 300, 128, false, 41));
  const formats::Fp8BlockPacked f = formats::fp8_block_pack(random_weight(kSchemes[8], 300, 1000, 42));
  std::vector<uint16_t> d(size_t(30 * 64));
  for (size_t i = 0; i < d.size(); ++i) d[i] = f32_to_f16(float(i % 97) / 97.f - 0.5f);
  formats::SafetensorsWriter w;
  w.add("q.qweight", "I32", {formats::gptq_qweight_rows(q.K, 4), q.N}, q.qweight.data(), q.qweight.size() * 4);
  w.add("q.qzeros", "I32", {q.G, formats::gptq_qzeros_cols(q.N, 4)}, q.qzeros.data(), q.qzeros.size() * 4);
  w.add("q.scales", "F16", {q.G, q.N}, q.scales.data(), q.scales.size());
  w.add("q.g_idx", "I32", {q.K}, q.g_idx.data(), q.g_idx.size() * 4);
  w.add("p.qweight", "I32", {formats::gptq_qweight_rows(p.K, 3), p.N}, p.qweight.data(), p.qweight.size() * 4);
  w.add("p.qzeros", "I32", {p.G, formats::gptq_qzeros_cols(p.N, 3)}, p.qzeros.data(), p.qzeros.size() * 4);
  w.add("p.scales", "F16", {p.G, p.N}, p.scales.data(), p.scales.size());
  w.add("a.qweight", "I32", {a.K, (a.N + 7) / 8}, a.qweight.data(), a.qweight.size() * 4);
  w.add("a.qzeros", "I32", {a.G, (a.N + 7) / 8}, a.qzeros.data(), a.qzeros.size() * 4);
  w.add("a.scales", "F16", {a.G, a.N}, a.scales.data(), a.scales.size());
  w.add("f", "F8_E4M3", {f.N, f.K}, f.weight.data(), f.weight.size());
  w.add("f_scale_inv", "F32", {(f.N + 127) / 128, (f.K + 127) / 128}, f.scale_inv.data(), f.scale_inv.size() * 4);
  w.add("d", "F16", {30, 64}, d.data(), d.size() * 2);
  w.write(path);
}

TEST(Shard, LoadShardMatchesShardOfLoad) {
  const std::string dir = ::testing::TempDir();
  // GGUF: column shards read only their rows; row shards the whole blocks around their columns.
  const std::string g = dir + "mixq_shard_" + std::to_string(::getpid()) + ".gguf";
  std::vector<float> vals(size_t(30 * 512));
  std::mt19937 rng(24);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& v : vals) v = u(rng);
  formats::save_gguf(g, {{"w", {30, 512}, formats::GgmlType::Q4_K, vals.data()},
                         {"q8", {30, 512}, formats::GgmlType::Q8_0, vals.data()}});
  // mixq's own layout (act-order GPTQ-like weight; FP8 blocks, whose column shards read the
  // 128-row blocks around their rows).
  const std::string m = dir + "mixq_shard_" + std::to_string(::getpid()) + ".safetensors";
  formats::save_mixq_safetensors(m, {{"w", random_weight(kSchemes[3], 30, 1000, 25)},
                                     {"f", random_weight(kSchemes[8], 300, 1000, 32)}});
  // GPTQ, AWQ, FP8 blocks and a dense matrix: column shards read the packed words of their
  // columns, the row blocks around their rows, or their rows; row shards the run of whole groups
  // (blocks) around their columns (act-order GPTQ: its rows of qweight; dense: its columns).
  const std::string i = dir + "mixq_shard_imported_" + std::to_string(::getpid()) + ".safetensors";
  write_imported_formats(i);
  const std::pair<std::string, std::string> cases[] = {{g, "w"}, {g, "q8"}, {m, "w"}, {m, "f"}, {i, "q"},
                                                       {i, "p"}, {i, "a"}, {i, "f"}, {i, "d"}};
  for (const auto& c : cases)
    for (ShardAxis axis : {ShardAxis::Column, ShardAxis::Row})
      for (int64_t world : {3, 4})  // 4: splits on the ggml blocks (their bytes are kept)
        for (int64_t r = 0; r < world; ++r) {
          SCOPED_TRACE(c.first + " " + c.second + " rank " + std::to_string(r) + " of " +
                       std::to_string(world));
          const ShardSpec spec{r, world, axis};
          const QuantizedWeight a = formats::load_shard(c.first, c.second, spec);
          const QuantizedWeight b = shard(formats::load_weight(c.first, c.second), spec);
          EXPECT_EQ(a.N, b.N);
          EXPECT_EQ(a.K, b.K);
          EXPECT_EQ(a.codes, b.codes);
          EXPECT_EQ(a.scales, b.scales);
          EXPECT_EQ(a.zeros, b.zeros);
          EXPECT_EQ(a.k_perm, b.k_perm);
          EXPECT_EQ(a.k_phase, b.k_phase);
          EXPECT_EQ(a.n_phase, b.n_phase);
          EXPECT_EQ(a.k_block_starts, b.k_block_starts);
          EXPECT_EQ(a.origin, b.origin);
          ASSERT_EQ(bool(a.ggml), bool(b.ggml));
          if (a.ggml) {
            EXPECT_EQ(a.ggml->data, b.ggml->data);
          }
        }
  std::remove(g.c_str());
  std::remove(m.c_str());
  std::remove(i.c_str());
}

// The layer shapes (N, K) of the models named in the issue; every TP split of 1, 2, 4, 8 along
// both axes gets ranges, shard geometry and scale-table sizes computed at full size (no data).
TEST(Shard, ModelLayerShapesAllTpSplits) {
  for (const test::LayerShape& s : test::kModelLayers)
    for (int64_t tp : {1, 2, 4, 8})
      for (ShardAxis axis : {ShardAxis::Column, ShardAxis::Row})
        for (int64_t g : {int64_t(128), int64_t(64)}) {  // W4 g128, W8 g64-style / FP8 128
          const int64_t dim = axis == ShardAxis::Column ? s.N : s.K;
          int64_t covered = 0, prev_end = 0;
          for (int64_t r = 0; r < tp; ++r) {
            const auto rg = shard_range(dim, {r, tp, axis});
            EXPECT_EQ(rg.first, prev_end) << s.name;
            prev_end = rg.second;
            covered += rg.second - rg.first;
            // Scale blocks the shard holds: every block its range touches, whole.
            const int64_t first_block = rg.first / g, last_block = (rg.second - 1) / g;
            EXPECT_GE(last_block - first_block + 1, (rg.second - rg.first + g - 1) / g) << s.name;
          }
          EXPECT_EQ(covered, dim) << s.name << " tp " << tp;
        }
}

TEST(Shard, RealSizeShardsRunOnCpu) {
  // Real-size shards of Llama-3-8B down_proj (4096 x 14336) at TP 8, row-parallel, W4 g128 with
  // act-order and FP8 blocks: shard, prepare, run, and compare with the float64 reference.
  for (const Scheme* sc : {&kSchemes[3], &kSchemes[8]}) {
    const QuantizedWeight w = random_weight(*sc, 4096, 14336, 26);
    const QuantizedWeight s = shard(w, {5, 8, ShardAxis::Row});
    EXPECT_EQ(s.K, 1792);
    const std::vector<float> x = random_x(1, s.K, 27);
    const std::vector<float> y = run_backend(s, x, 1, BackendKind::CPU);
    const std::vector<double> r = ref64(s, x.data(), 1, s.K);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], r[i], 1e-5 * max_abs(r)) << sc->name;
  }
}

TEST(Shard, BadInput) {
  const QuantizedWeight w = random_weight(kSchemes[0], 16, 256, 28);
  auto expect_arg = [](auto fn, const std::string& frag) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected " << frag;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos) << e.what();
    }
  };
  expect_arg([&] { shard(w, {3, 3}); }, "rank (3) must be in [0, world=3)");
  expect_arg([&] { shard(w, {0, 0}); }, "world (0) must be >= 1");
  expect_arg([&] { shard(w, {-1, 2}); }, "rank (-1)");
  expect_arg([&] { shard(w, {0, 2, ShardAxis::Row, 0}); }, "granularity (0)");
  expect_arg([&] { shard(w, {0, 17, ShardAxis::Column}); }, "fewer than world (17)");
  const QuantizedWeight a = shard(w, {0, 2, ShardAxis::Row});
  const QuantizedWeight b = shard(w, {1, 2, ShardAxis::Row});
  // Mismatched worlds, duplicate ranks, mixed axes, missing shards, different schemes.
  expect_arg([&] { check_shard_set({a, b}, {{0, 2, ShardAxis::Row}, {1, 3, ShardAxis::Row}}); },
             "has world 3, shard 0 has world 2");
  expect_arg([&] { check_shard_set({a, b}, {{0, 2, ShardAxis::Row}, {0, 2, ShardAxis::Row}}); },
             "rank 0 appears twice");
  expect_arg([&] { check_shard_set({a, b}, {{0, 2, ShardAxis::Row}, {1, 2, ShardAxis::Column}}); },
             "column-parallel, shard 0 is row-parallel");
  expect_arg([&] { check_shard_set({a}, {{0, 2, ShardAxis::Row}}); }, "1 shards for world 2");
  const QuantizedWeight c = shard(random_weight(kSchemes[2], 16, 256, 29), {1, 2, ShardAxis::Row});
  expect_arg([&] { check_shard_set({a, c}, {{0, 2, ShardAxis::Row}, {1, 2, ShardAxis::Row}}); },
             "is not the scheme of shard 0");
  const QuantizedWeight d = shard(random_weight(kSchemes[0], 16, 300, 30), {1, 2, ShardAxis::Row});
  expect_arg([&] { check_shard_set({a, d}, {{0, 2, ShardAxis::Row}, {1, 2, ShardAxis::Row}}); },
             "holds");
  // Phase fields out of range.
  QuantizedWeight bad = a;
  bad.k_phase = 128;
  expect_arg([&] { bad.validate(); }, "k_phase (128) must be < block_k (128)");
  // Cut blocks: W8A8 / FP8 activation paths refuse them (Unsupported, naming the fields).
  const QuantizedWeight f = shard(random_weight(kSchemes[8], 16, 300, 31), {1, 2, ShardAxis::Row});
  try {
    PrepareOptions o;
    o.backend = BackendKind::CPU;
    o.act = ActQuant::Fp8Block;
    prepare(f, o);
    ADD_FAILURE() << "fp8-block act on a phased shard was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("k_phase"), std::string::npos) << e.what();
  }
  // A column shard that cut FP8 128-row blocks (n_phase) runs the FP8 activation path: prepare
  // gives each row its block's scale (block_n = 1), the same values.
  const QuantizedWeight g = random_weight(kSchemes[8], 300, 256, 32);
  const QuantizedWeight gs = shard(g, {1, 3, ShardAxis::Column});
  EXPECT_EQ(gs.n_phase, 100 % 128);
  PrepareOptions o;
  o.backend = BackendKind::CPU;
  o.act = ActQuant::Fp8Block;
  const PreparedWeight pg = prepare(g, o), ps = prepare(gs, o);
  const std::vector<float> x = random_x(3, 256, 33);
  std::vector<float> yg(3 * 300), ys(3 * 100);
  linear(TensorView(const_cast<float*>(x.data()), DType::F32, {3, 256}), pg, TensorView(yg.data(), DType::F32, {3, 300}));
  linear(TensorView(const_cast<float*>(x.data()), DType::F32, {3, 256}), ps, TensorView(ys.data(), DType::F32, {3, 100}));
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t n = 0; n < 100; ++n)
      ASSERT_EQ(ys[size_t(m * 100 + n)], yg[size_t(m * 300 + 100 + n)]) << m << " " << n;
}

// The CUDA weight-only kernels' K axis for a shard (core/kernel_k_layout.hpp): every real column
// lands in a kernel group of its own canonical block, with its own code, and reads its own X
// column; holes read zero; codes rewritten over the axis agree with the weight's.
TEST(Shard, KernelKLayoutKeepsEveryColumnInItsBlock) {
  for (const Scheme* sc : {&kSchemes[0], &kSchemes[2], &kSchemes[3], &kSchemes[4], &kSchemes[6],
                           &kSchemes[8]}) {
    const QuantizedWeight w = random_weight(*sc, 24, 1000, 40);
    for (int64_t world : {1, 3, 7})
      for (int64_t r = 0; r < world; ++r) {
        const QuantizedWeight s = shard(w, {r, world, ShardAxis::Row});
        SCOPED_TRACE(std::string(sc->name) + " rank " + std::to_string(r) + "/" + std::to_string(world));
        const KernelKLayout L = kernel_k_layout(s, 16);
        ASSERT_GE(L.K, s.K);
        ASSERT_GE(L.group_shift, 4);
        if (s.plain_blocks()) {
          EXPECT_EQ(L.K, s.K);
        }
        if (s.k_block_starts.empty()) {
          EXPECT_EQ(L.K, s.K + s.k_phase);
        }
        std::vector<int> seen(size_t(s.K), 0);
        const std::vector<uint8_t> codes = L.identity() ? s.codes : codes_in_kernel_layout(s, L);
        const int64_t rb = dtype_bytes(s.code_type, L.K);
        for (int64_t j = 0; j < L.K; ++j) {
          const int64_t c = L.canonical(j);
          const int32_t xc = L.x_col.empty() ? int32_t(j - L.x_shift) : L.x_col[size_t(j)];
          if (c < 0) {
            EXPECT_LT(xc, 0) << "a hole must read zero, kernel column " << j;
            continue;
          }
          ASSERT_LT(c, s.K);
          ++seen[size_t(c)];
          EXPECT_EQ(L.block_of_group(L.group_shift >= 30 ? 0 : j >> L.group_shift), s.k_block(c)) << j;
          EXPECT_EQ(xc, s.k_perm.empty() ? int32_t(c) : s.k_perm[size_t(c)]) << j;
          for (int64_t n = 0; n < s.N; ++n) {
            uint8_t got, want;
            if (dtype_bits(s.code_type) == 4) {
              got = (codes[size_t(n * rb + j / 2)] >> ((j & 1) * 4)) & 0xF;
              want = (s.codes[size_t(n * s.row_bytes() + c / 2)] >> ((c & 1) * 4)) & 0xF;
            } else {
              got = codes[size_t(n * rb + j)];
              want = s.codes[size_t(n * s.row_bytes() + c)];
            }
            ASSERT_EQ(got, want) << n << " " << j;
          }
        }
        for (int64_t c = 0; c < s.K; ++c) ASSERT_EQ(seen[size_t(c)], 1) << "column " << c;
        // act-order row shards pick the group size with the fewest bytes: within 2x the codes
        if (!s.k_block_starts.empty()) {
          EXPECT_LE(L.K, 2 * s.K + 16 * s.n_blocks_k());
        }
      }
  }
  // A block that is not a power of two cannot be laid (Unsupported, naming block_k).
  QuantizedWeight odd = random_weight(kSchemes[0], 4, 300, 41);
  odd = shard(odd, {0, 1, ShardAxis::Row});
  odd.block_k = 100;
  odd.scales.assign(size_t(4 * 3 * 2), 0);
  odd.validate();
  try {
    kernel_k_layout(odd, 16);
    ADD_FAILURE() << "block_k 100 was laid";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("block_k 100"), std::string::npos) << e.what();
  }
}
