// The canonical weight: accessors against a by-hand decoding of the packed bytes, the f32
// dequantization formula bit for bit, permutations, geometry helpers and validate()'s errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "mixq/quantize.hpp"
#include "unit/test_util.hpp"

using namespace mixq;
using namespace mixq::testing;

namespace {

// A weight with every byte random (any code is valid), then scales/zeros made valid.
QuantizedWeight random_weight(DType code, ZeroKind zk, DType st, int64_t N, int64_t K,
                              int64_t block_k, int64_t block_n, uint32_t seed) {
  QuantizedWeight w;
  w.N = N;
  w.K = K;
  w.code_type = code;
  w.zero_kind = zk;
  w.scale_type = st;
  w.block_k = block_k;
  w.block_n = block_n;
  w.allocate();
  std::mt19937 rng(seed);
  for (auto& b : w.codes) b = static_cast<uint8_t>(rng());
  if (code == DType::F8E4M3)  // no NaN codes
    for (auto& b : w.codes)
      if ((b & 0x7F) == 0x7F) b = 0x3C;
  HostTensor sc(st, {w.n_scale_entries()});
  std::uniform_real_distribution<double> u(0.01, 0.5), uo(-2, 2);
  for (int64_t i = 0; i < w.n_scale_entries(); ++i) sc.set(i, u(rng));
  w.scales = sc.bytes;
  if (zk == ZeroKind::Offset) {
    HostTensor o(st, {w.n_scale_entries()});
    for (int64_t i = 0; i < w.n_scale_entries(); ++i) o.set(i, uo(rng));
    w.zeros = o.bytes;
  } else if (zk == ZeroKind::ZeroPoint) {
    for (int64_t i = 0; i < w.n_scale_entries(); ++i) {
      const int32_t z = code_min(code) + int32_t(rng() % (code_max(code) - code_min(code) + 2));
      std::memcpy(w.zeros.data() + 4 * i, &z, 4);
    }
  }
  w.validate();
  return w;
}

struct Combo {
  DType code;
  ZeroKind zk;
};
const Combo kCombos[] = {
    {DType::I4, ZeroKind::None},      {DType::I4, ZeroKind::Offset},
    {DType::U4, ZeroKind::ZeroPoint}, {DType::I8, ZeroKind::None},
    {DType::I8, ZeroKind::Offset},    {DType::U8, ZeroKind::ZeroPoint},
    {DType::F8E4M3, ZeroKind::None},  {DType::I4, ZeroKind::ZeroPoint},
};

}  // namespace

TEST(QuantizedWeight, AccessorsMatchHandDecodingAndTheF32Formula) {
  for (const Combo& c : kCombos)
    for (DType st : {DType::F32, DType::F16, DType::BF16})
      for (int64_t K : {int64_t(1), int64_t(37), int64_t(300)}) {
        const int64_t N = 5, bk = std::min<int64_t>(K, 32);
        const QuantizedWeight w = random_weight(c.code, c.zk, st, N, K, bk, 1, uint32_t(K) * 7 + 1);
        const std::string what = w.describe();
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < K; ++k) {
            if (c.code != DType::F8E4M3) {
              ASSERT_EQ(w.code_int(n, k), raw_code(w, n, k)) << what;
            }
            ASSERT_EQ(double(w.code_value(n, k)), raw_code_value(w, n, k)) << what;
            ASSERT_EQ(double(w.scale(n, k / bk)), raw_scale(w, n, k)) << what;
            // The f32 formula of quantized_weight.hpp, evaluated here operation by operation.
            const float q = float(raw_code_value(w, n, k)), s = float(raw_scale(w, n, k));
            float expect;
            if (c.zk == ZeroKind::None) {
              expect = q * s;
            } else if (c.zk == ZeroKind::Offset) {
              const float prod = q * s;  // separate statement: no contraction into an FMA
              expect = prod + float(raw_offset(w, n, k));
            } else {
              expect = s * float(raw_code(w, n, k) - raw_zero_point(w, n, k));
            }
            ASSERT_EQ(w.dequant(n, k), expect) << what << " [" << n << ", " << k << "]";
            // ... and it is the float64 value up to f32 rounding.
            ASSERT_NEAR(w.dequant(n, k), raw_dequant(w, n, k),
                        4 * half_ulp(DType::F32, std::fabs(raw_dequant(w, n, k)) + 4 * s));
          }
      }
}

TEST(QuantizedWeight, SetCodeIntPacksNibblesAndRangeChecks) {
  QuantizedWeight w;
  w.N = 2;
  w.K = 5;
  w.code_type = DType::I4;
  w.block_k = 5;
  w.scale_type = DType::F32;
  w.allocate();
  ASSERT_EQ(w.codes.size(), 6u);
  const int32_t vals[2][5] = {{-8, 7, 0, -1, 3}, {1, -2, 5, -8, 7}};
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 5; ++k) w.set_code_int(n, k, vals[n][k]);
  // element 2i in the low nibble of byte i
  EXPECT_EQ(w.codes[0], 0x78);  // k0 = -8 (0x8) low, k1 = 7 high
  EXPECT_EQ(w.codes[1], 0xF0);  // k2 = 0, k3 = -1 (0xF)
  EXPECT_EQ(w.codes[2], 0x03);  // k4 = 3, pad nibble 0
  EXPECT_EQ(w.codes[3], 0xE1);
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 5; ++k) EXPECT_EQ(raw_code(w, n, k), vals[n][k]);
  EXPECT_MIXQ_ERROR(w.set_code_int(0, 0, 8), "8", "[-8, 7]", "i4");
  EXPECT_MIXQ_ERROR(w.set_code_int(0, 0, -9), "-9");
}

TEST(QuantizedWeight, BlockNScalesAreSharedByRowBlocks) {
  const QuantizedWeight w = random_weight(DType::F8E4M3, ZeroKind::None, DType::F32, 300, 200, 128, 128, 3);
  EXPECT_EQ(w.n_blocks_n(), 3);
  EXPECT_EQ(w.n_blocks_k(), 2);
  for (int64_t n : {0, 127, 128, 255, 256, 299})
    for (int64_t k : {0, 127, 128, 199})
      EXPECT_EQ(double(w.dequant(n, k)),
                double(float(decode_e4m3(w.codes[n * 200 + k])) *
                       float(decode_float(w.scales.data(), DType::F32, (n / 128) * 2 + k / 128))));
}

TEST(QuantizedWeight, DequantizeRowsUndoesThePermutation) {
  QuantizedWeight w = random_weight(DType::I4, ZeroKind::Offset, DType::F16, 6, 45, 16, 1, 5);
  std::vector<int32_t> perm(45);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(9));
  w.k_perm = perm;
  w.validate();
  std::vector<float> canon(45 * 4), orig(45 * 4);
  dequantize_rows(w, 1, 5, canon.data(), false);
  dequantize_rows(w, 1, 5, orig.data(), true);
  for (int64_t n = 1; n < 5; ++n)
    for (int64_t j = 0; j < 45; ++j) {
      EXPECT_EQ(canon[(n - 1) * 45 + j], w.dequant(n, j));
      EXPECT_EQ(orig[(n - 1) * 45 + perm[j]], w.dequant(n, j));
    }
  const std::vector<float> all = dequantize_to_f32(w);
  for (int64_t j = 0; j < 45; ++j) EXPECT_EQ(all[2 * 45 + j], w.dequant(2, j));
  EXPECT_MIXQ_ERROR(dequantize_rows(w, 4, 7, orig.data(), true), "dequantize_rows", "7", "N=6");
  EXPECT_MIXQ_ERROR(dequantize_rows(w, 3, 2, orig.data(), true), "dequantize_rows");
}

TEST(QuantizedWeight, GeometryAndStorage) {
  QuantizedWeight w = random_weight(DType::I4, ZeroKind::ZeroPoint, DType::F16, 10944, 7392, 128, 1, 6);
  EXPECT_EQ(w.row_bytes(), 3696);
  EXPECT_EQ(w.n_blocks_k(), 58);
  EXPECT_EQ(w.n_scale_entries(), 10944 * 58);
  EXPECT_EQ(w.storage_bytes(), 10944 * 3696 + 10944 * 58 * 2 + 10944 * 58 * 4);
  EXPECT_NEAR(w.bits_per_weight(), 8.0 * w.storage_bytes() / (10944.0 * 7392.0), 1e-12);
  EXPECT_NE(w.describe().find("g128"), std::string::npos) << w.describe();
  EXPECT_NE(w.describe().find("10944"), std::string::npos) << w.describe();
  EXPECT_FALSE(w.per_channel());
  QuantizedWeight odd = random_weight(DType::U4, ZeroKind::ZeroPoint, DType::BF16, 3, 7, 7, 1, 7);
  EXPECT_EQ(odd.row_bytes(), 4);
  EXPECT_TRUE(odd.per_channel());
  EXPECT_NE(odd.describe().find("per-channel"), std::string::npos);
}

TEST(QuantizedWeight, DenseFloatCodesWithoutScales) {
  QuantizedWeight w;
  w.N = 3;
  w.K = 9;
  w.code_type = DType::BF16;
  w.has_scales = false;
  w.block_k = 9;
  w.allocate();
  EXPECT_TRUE(w.scales.empty());
  HostTensor v = random_tensor(DType::BF16, {3, 9}, 8);
  w.codes = v.bytes;
  w.validate();
  for (int64_t i = 0; i < 27; ++i) EXPECT_EQ(double(w.dequant(i / 9, i % 9)), v.get(i));
  EXPECT_EQ(w.storage_bytes(), 54);
}

// ------------------------------------------------------------------ validate()

TEST(QuantizedWeightValidate, RejectsEveryBrokenInvariantNamingIt) {
  const QuantizedWeight good = random_weight(DType::I4, ZeroKind::Offset, DType::F16, 4, 70, 32, 1, 10);
  good.validate();
  auto broken = [&](const std::function<void(QuantizedWeight&)>& f) {
    QuantizedWeight w = good;
    f(w);
    return w;
  };
  QuantizedWeight w;
  w = broken([](QuantizedWeight& q) { q.codes.pop_back(); });
  EXPECT_MIXQ_ERROR(w.validate(), "codes", "139", "N (4)", "row_bytes (35)");
  w = broken([](QuantizedWeight& q) { q.scales.resize(3); });
  EXPECT_MIXQ_ERROR(w.validate(), "scales", "3 bytes", "12");
  w = broken([](QuantizedWeight& q) { q.zeros.clear(); });
  EXPECT_MIXQ_ERROR(w.validate(), "offsets", "0 bytes");
  w = broken([](QuantizedWeight& q) { q.block_k = 0; });
  EXPECT_MIXQ_ERROR(w.validate(), "block_k (0)", "K=70");
  w = broken([](QuantizedWeight& q) { q.block_k = 71; });
  EXPECT_MIXQ_ERROR(w.validate(), "block_k (71)", "K=70");
  w = broken([](QuantizedWeight& q) { q.block_n = 0; });
  EXPECT_MIXQ_ERROR(w.validate(), "block_n (0)");
  w = broken([](QuantizedWeight& q) { q.N = 0; });
  EXPECT_MIXQ_ERROR(w.validate(), "N (0)");
  w = broken([](QuantizedWeight& q) { q.code_type = DType::I32; });
  EXPECT_MIXQ_ERROR(w.validate(), "code_type", "i32");
  w = broken([](QuantizedWeight& q) { q.scale_type = DType::I8; });
  EXPECT_MIXQ_ERROR(w.validate(), "scale_type", "i8");
  w = broken([](QuantizedWeight& q) {
    const uint16_t inf = 0x7C00;
    std::memcpy(q.scales.data() + 2 * 5, &inf, 2);
  });
  EXPECT_MIXQ_ERROR(w.validate(), "scale entry 5", "not finite", "inf");
  w = broken([](QuantizedWeight& q) {
    const uint16_t nan = 0x7E00;
    std::memcpy(q.zeros.data() + 2 * 2, &nan, 2);
  });
  EXPECT_MIXQ_ERROR(w.validate(), "offset entry 2", "not finite", "nan");
  w = broken([](QuantizedWeight& q) { q.k_perm = {0, 1, 2}; });
  EXPECT_MIXQ_ERROR(w.validate(), "k_perm", "3 entries", "K is 70");
  w = broken([](QuantizedWeight& q) {
    q.k_perm.resize(70);
    std::iota(q.k_perm.begin(), q.k_perm.end(), 0);
    q.k_perm[40] = 3;
  });
  EXPECT_MIXQ_ERROR(w.validate(), "k_perm is not a permutation", "entry 40 = 3", "repeated");
  w = broken([](QuantizedWeight& q) {
    q.k_perm.resize(70);
    std::iota(q.k_perm.begin(), q.k_perm.end(), 0);
    q.k_perm[7] = 70;
  });
  EXPECT_MIXQ_ERROR(w.validate(), "entry 7 = 70", "out of range");
  w = broken([](QuantizedWeight& q) { q.zero_kind = ZeroKind::None; });
  EXPECT_MIXQ_ERROR(w.validate(), "zero_kind none", "zeros hold 24 bytes");
}

TEST(QuantizedWeightValidate, ZeroPointsAndCodeCombinations) {
  QuantizedWeight w = random_weight(DType::U4, ZeroKind::ZeroPoint, DType::F16, 2, 64, 32, 1, 11);
  int32_t z = 17;  // u4 allows [0, 16] (GPTQ v1's z - 1 convention can reach 2^bits)
  std::memcpy(w.zeros.data() + 4, &z, 4);
  EXPECT_MIXQ_ERROR(w.validate(), "zero point entry 1", "(17)", "[0, 16]");
  z = -1;
  std::memcpy(w.zeros.data() + 4, &z, 4);
  EXPECT_MIXQ_ERROR(w.validate(), "zero point entry 1", "(-1)");
  z = 16;
  std::memcpy(w.zeros.data() + 4, &z, 4);
  w.validate();
  w.zeros.resize(7);
  EXPECT_MIXQ_ERROR(w.validate(), "zero points hold 7 bytes", "int32");

  QuantizedWeight f = random_weight(DType::F8E4M3, ZeroKind::None, DType::F32, 2, 64, 32, 1, 12);
  f.zero_kind = ZeroKind::ZeroPoint;
  f.zeros.assign(4 * 4, 0);
  EXPECT_MIXQ_ERROR(f.validate(), "zero-point form needs integer codes", "f8e4m3");

  QuantizedWeight d = random_weight(DType::I8, ZeroKind::None, DType::F32, 2, 64, 32, 1, 13);
  d.has_scales = false;
  EXPECT_MIXQ_ERROR(d.validate(), "only dense float codes", "i8");
  // Dense float codes without scales must not carry stale scale or zero buffers either.
  QuantizedWeight e;
  e.N = 2;
  e.K = 4;
  e.code_type = DType::F32;
  e.has_scales = false;
  e.allocate();
  e.validate();
  e.scales.assign(8, 0);
  EXPECT_MIXQ_ERROR(e.validate(), "scales", "8 bytes");
}

TEST(QuantizedWeightValidate, AllocateRejectsBadGeometry) {
  QuantizedWeight w;
  w.N = 0;
  w.K = 5;
  EXPECT_MIXQ_ERROR(w.allocate(), "N (0)");
  w.N = int64_t(1) << 40;
  w.K = int64_t(1) << 40;
  w.block_k = 32;
  EXPECT_MIXQ_ERROR(w.allocate(), "exceeds");
}
