// Weight quantizers: the documented error bound for every scheme, exact code round trips, ragged
// and odd shapes, constant / zero blocks, rejection of non-finite input, scheme-name parsing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "mixq/act_quant.hpp"
#include "mixq/quantize.hpp"
#include "unit/test_util.hpp"

using namespace mixq;
using namespace mixq::testing;

namespace {

std::vector<std::string> all_integer_scheme_names() {
  std::vector<std::string> names;
  for (const char* bits : {"w4", "w8"})
    for (const char* blk : {"g32", "g64", "g128", "g256", "pc"})
      for (const char* form : {"", "asym", "zp"})
        for (const char* st : {"", "-bf16", "-f32"})
          names.push_back(std::string(bits) + blk + form + st);
  return names;
}

// A matrix whose rows have different centres and spreads, so that offset and zero-point forms
// see blocks that are not symmetric around zero, and scales span several orders of magnitude.
std::vector<float> test_matrix(int64_t N, int64_t K, uint32_t seed) {
  std::vector<float> w = random_floats(static_cast<size_t>(N * K), seed);
  std::mt19937 rng(seed + 1);
  std::uniform_real_distribution<float> centre(-0.6f, 0.6f), spread(0.02f, 2.0f);
  for (int64_t n = 0; n < N; ++n) {
    const float c = centre(rng), a = spread(rng) * (n % 3 == 0 ? 1e-2f : (n % 3 == 1 ? 1.f : 30.f));
    for (int64_t k = 0; k < K; ++k) w[n * K + k] = c * a + a * w[n * K + k];
  }
  return w;
}

TensorView f32_view(const std::vector<float>& w, int64_t N, int64_t K) {
  return TensorView(const_cast<float*>(w.data()), DType::F32, {N, K});
}

// Checks |dequant(n,k) - w[n][k]| against the bound of quantize.hpp for every element:
//   s/2 + |o - o_exact| + levels*|s - s_exact|   (integer schemes; the last two terms are the
//   scale_type rounding of the stored offset and scale, which codes cannot compensate for when
//   they clamp), or s * half_ulp_e4m3(w/s) for FP8, plus a few f32 roundings of the arithmetic.
void check_rtn_bound(const std::vector<float>& w, const QuantizedWeight& q, const std::string& what) {
  const int64_t N = q.N, K = q.K;
  int64_t failures = 0;
  for (int64_t n0 = 0; n0 < N; n0 += q.block_n)
    for (int64_t k0 = 0; k0 < K; k0 += q.block_k) {
      const int64_t n1 = std::min(N, n0 + q.block_n), k1 = std::min(K, k0 + q.block_k);
      double lo = INFINITY, hi = -INFINITY, amax = 0;
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t k = k0; k < k1; ++k) {
          lo = std::min<double>(lo, w[n * K + k]);
          hi = std::max<double>(hi, w[n * K + k]);
          amax = std::max<double>(amax, std::fabs(w[n * K + k]));
        }
      const double s = raw_scale(q, n0, k0);
      EXPECT_GE(s, 0.0) << what;
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t k = k0; k < k1; ++k) {
          const double x = w[n * K + k], d = q.dequant(n, k);
          double tol;
          if (q.code_type == DType::F8E4M3) {
            const double v = s > 0 ? std::fabs(x) / s : 0.0;
            tol = s * half_ulp(DType::F8E4M3, std::min(v, 448.0)) + std::max(0.0, v - 448.0) * s;
          } else {
            const int32_t qmin = code_min(q.code_type), qmax = code_max(q.code_type);
            const double levels = qmax - qmin;
            double s_exact, do_ = 0.0;
            if (q.zero_kind == ZeroKind::None) {
              s_exact = amax / qmax;
            } else if (q.zero_kind == ZeroKind::Offset) {
              s_exact = (hi - lo) / levels;
              const double o_exact = s > 0 ? lo - qmin * s : lo;
              do_ = std::fabs(raw_offset(q, n0, k0) - o_exact);
            } else {
              s_exact = (std::max(hi, 0.0) - std::min(lo, 0.0)) / levels;
            }
            tol = s / 2 + do_ + levels * std::fabs(s - s_exact);
          }
          tol += 8 * std::ldexp(std::max(std::fabs(x), amax), -24);  // f32 arithmetic
          if (!(std::fabs(d - x) <= tol) && failures++ < 5)
            ADD_FAILURE() << what << " [" << n << ", " << k << "]: w " << x << " dequant " << d
                          << " error " << std::fabs(d - x) << " > bound " << tol << " (s " << s
                          << ")";
        }
    }
  EXPECT_EQ(failures, 0) << what;
}

}  // namespace

TEST(ParseScheme, EveryDocumentedNameParsesAndRoundTrips) {
  for (const auto& name : all_integer_scheme_names()) {
    const QuantScheme s = parse_scheme(name);
    const bool four = name[1] == '4';
    const bool zp = name.find("zp") != std::string::npos;
    const bool asym = name.find("asym") != std::string::npos;
    EXPECT_EQ(s.code_type, four ? (zp ? DType::U4 : DType::I4) : (zp ? DType::U8 : DType::I8)) << name;
    EXPECT_EQ(s.zero_kind, zp ? ZeroKind::ZeroPoint : asym ? ZeroKind::Offset : ZeroKind::None) << name;
    const DType st = name.find("-bf16") != std::string::npos ? DType::BF16
                     : name.find("-f32") != std::string::npos ? DType::F32 : DType::F16;
    EXPECT_EQ(s.scale_type, st) << name;
    EXPECT_EQ(s.block_n, 1) << name;
    const int64_t expect_block = name.find("pc") != std::string::npos ? 0 : std::stoll(name.substr(3));
    EXPECT_EQ(s.block_k, expect_block) << name;
    EXPECT_EQ(scheme_name(s), name);
  }
  const QuantScheme f = parse_scheme("fp8b128");
  EXPECT_EQ(f.code_type, DType::F8E4M3);
  EXPECT_EQ(f.block_k, 128);
  EXPECT_EQ(f.block_n, 128);
  EXPECT_EQ(f.scale_type, DType::F32);
  EXPECT_EQ(f.zero_kind, ZeroKind::None);
  EXPECT_EQ(scheme_name(f), "fp8b128");
  EXPECT_EQ(parse_scheme("w4g128-f16").scale_type, DType::F16);
}

TEST(ParseScheme, BadNamesListTheValidOnes) {
  for (const char* bad : {"", "w4", "w5g128", "w4g", "w4g12x", "w4gpc", "w4g128asymzp", "fp8b64",
                          "W4G128", "w4g128-f64", "w4g99999999999", "int4"}) {
    EXPECT_MIXQ_ERROR(parse_scheme(bad), std::string("'") + bad + "'", "valid schemes", "w4g",
                      "fp8b128");
  }
  EXPECT_MIXQ_ERROR(parse_scheme("w4g0"), "w4g0", ">= 1");
}

TEST(QuantizeWeight, ErrorBoundEveryScheme) {
  const int64_t N = 7, K = 1000;  // 1000 is ragged for every block size 32..256
  const std::vector<float> w = test_matrix(N, K, 11);
  for (const auto& name : all_integer_scheme_names()) {
    const QuantScheme sc = parse_scheme(name);
    const QuantizedWeight q = quantize_weight(f32_view(w, N, K), sc);
    EXPECT_EQ(q.block_k, sc.block_k == 0 ? K : sc.block_k) << name;
    EXPECT_EQ(q.n_blocks_k(), sc.block_k == 0 ? 1 : (K + sc.block_k - 1) / sc.block_k) << name;
    check_rtn_bound(w, q, name);
  }
}

TEST(QuantizeWeight, Fp8BlockErrorBoundAndScale) {
  const int64_t N = 300, K = 270;  // 3 x 3 blocks, both last ones partial
  const std::vector<float> w = test_matrix(N, K, 12);
  const QuantizedWeight q = quantize_weight(f32_view(w, N, K), parse_scheme("fp8b128"));
  ASSERT_EQ(q.n_blocks_n(), 3);
  ASSERT_EQ(q.n_blocks_k(), 3);
  ASSERT_EQ(q.codes.size(), size_t(N * K));
  for (int64_t bn = 0; bn < 3; ++bn)
    for (int64_t bk = 0; bk < 3; ++bk) {
      float amax = 0;
      for (int64_t n = bn * 128; n < std::min<int64_t>(N, bn * 128 + 128); ++n)
        for (int64_t k = bk * 128; k < std::min<int64_t>(K, bk * 128 + 128); ++k)
          amax = std::max(amax, std::fabs(w[n * K + k]));
      EXPECT_EQ(q.scale(bn, bk), amax / 448.0f) << bn << "," << bk;
    }
  check_rtn_bound(w, q, "fp8b128");
}

TEST(QuantizeWeight, F16AndBf16InputsMatchTheirF32Values) {
  const int64_t N = 4, K = 200;
  for (DType t : {DType::F16, DType::BF16}) {
    const HostTensor h = random_tensor(t, {N, K}, 13, -3, 2);
    std::vector<float> wf(static_cast<size_t>(N * K));
    for (int64_t i = 0; i < N * K; ++i) wf[i] = static_cast<float>(h.get(i));
    for (const char* name : {"w4g64", "w8g32asym", "w4g128zp", "fp8b128"}) {
      const QuantizedWeight a = quantize_weight(h.view(), parse_scheme(name));
      const QuantizedWeight b = quantize_weight(f32_view(wf, N, K), parse_scheme(name));
      EXPECT_SAME_ARRAY(a.codes, b.codes) << name << " " << dtype_name(t);
      EXPECT_SAME_ARRAY(a.scales, b.scales) << name;
      EXPECT_SAME_ARRAY(a.zeros, b.zeros) << name;
    }
  }
}

// quantize(dequantize(q)) must give back q: the dequantized grid points are fixed points.
// Exact (codes, scales, offsets, zero points) for every scheme with f16/bf16 scales and for
// symmetric f32; for f32 range-derived scales see the comment below.
TEST(QuantizeWeight, CodesRoundTripExactly) {
  const int64_t N = 6, K = 777;
  const std::vector<float> w = test_matrix(N, K, 14);
  std::vector<std::string> names = all_integer_scheme_names();
  names.push_back("fp8b128");
  for (const auto& name : names) {
    const QuantScheme sc = parse_scheme(name);
    const QuantizedWeight q1 = quantize_weight(f32_view(w, N, K), sc);
    const std::vector<float> d = dequantize_to_f32(q1);
    const QuantizedWeight q2 = quantize_weight(f32_view(d, N, K), sc);
    EXPECT_SAME_ARRAY(q1.codes, q2.codes) << name << " codes";
    if (q1.scale_type != DType::F32 || q1.zero_kind == ZeroKind::None) {
      EXPECT_SAME_ARRAY(q1.scales, q2.scales) << name << " scales";
      EXPECT_SAME_ARRAY(q1.zeros, q2.zeros) << name << " zeros";
      EXPECT_SAME_ARRAY(dequantize_to_f32(q2), d) << name << " values";
      continue;
    }
    // f32 scales with a range-derived scale: the grid values s*q (+ o) are themselves rounded
    // to f32, so the range max - min seen the second time is off by an f32 rounding and the
    // recomputed scale can move by an ulp. The codes must still be identical (checked above),
    // the scales within 2 ulps, and the values within a few ulps of the block magnitude.
    if (q1.zero_kind == ZeroKind::ZeroPoint) {  // integer zero points: exact
      EXPECT_SAME_ARRAY(q1.zeros, q2.zeros) << name << " zero points";
    }
    for (int64_t i = 0; i < q1.n_scale_entries(); ++i) {
      const double s1 = decode_float(q1.scales.data(), DType::F32, i);
      const double s2 = decode_float(q2.scales.data(), DType::F32, i);
      ASSERT_LE(std::fabs(s1 - s2), 4 * half_ulp(DType::F32, s1)) << name << " scale " << i;
    }
    const std::vector<float> d2 = dequantize_to_f32(q2);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const double mag = std::fabs(d[n * K + k]) + 256 * raw_scale(q1, n, k);
        ASSERT_LE(std::fabs(d2[n * K + k] - d[n * K + k]), 8 * half_ulp(DType::F32, mag))
            << name << " [" << n << ", " << k << "]";
      }
  }
}

TEST(QuantizeWeight, RaggedLastBlockOfK7392) {
  const int64_t N = 3, K = 7392;
  std::vector<float> w = test_matrix(N, K, 15);
  // Make the last (96-wide) block's range distinct so a misplaced boundary changes its scale.
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 57 * 128; k < K; ++k) w[n * K + k] *= 5.0f;
  const QuantizedWeight q = quantize_weight(f32_view(w, N, K), parse_scheme("w4g128-f32"));
  ASSERT_EQ(q.n_blocks_k(), 58);
  ASSERT_EQ(q.scales.size(), size_t(N * 58 * 4));
  for (int64_t n = 0; n < N; ++n) {
    float amax = 0;
    for (int64_t k = 57 * 128; k < K; ++k) amax = std::max(amax, std::fabs(w[n * K + k]));
    EXPECT_EQ(q.scale(n, 57), amax / 7.0f) << "row " << n;
  }
  check_rtn_bound(w, q, "w4g128-f32 K=7392");
}

TEST(QuantizeWeight, OddKPacksInt4RowsOnByteBoundaries) {
  for (int64_t K : {1, 7, 33, 255}) {
    const int64_t N = 3;
    const std::vector<float> w = test_matrix(N, K, 16 + uint32_t(K));
    for (const char* name : {"w4g32", "w4g32zp", "w4pcasym"}) {
      const QuantizedWeight q = quantize_weight(f32_view(w, N, K), parse_scheme(name));
      EXPECT_EQ(q.row_bytes(), (K + 1) / 2) << name << " K=" << K;
      ASSERT_EQ(q.codes.size(), size_t(N * ((K + 1) / 2))) << name;
      // Codes decoded by hand from the bytes agree with the accessor, per row.
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) ASSERT_EQ(raw_code(q, n, k), q.code_int(n, k));
      // The pad nibble of odd rows stays zero (rows are independent).
      if (K % 2) {
        for (int64_t n = 0; n < N; ++n) EXPECT_EQ(q.codes[n * q.row_bytes() + K / 2] >> 4, 0);
      }
      check_rtn_bound(w, q, std::string(name) + " K=" + std::to_string(K));
    }
  }
}

TEST(QuantizeWeight, ConstantAndAllZeroBlocks) {
  const int64_t N = 4, K = 96;  // blocks of 32: [0,32) [32,64) [64,96)
  std::vector<float> w = test_matrix(N, K, 17);
  for (int64_t k = 0; k < 32; ++k) w[0 * K + k] = 0.f;       // all zero
  for (int64_t k = 32; k < 64; ++k) w[1 * K + k] = 0.3f;     // constant positive
  for (int64_t k = 64; k < 96; ++k) w[2 * K + k] = -2.5f;    // constant negative
  for (int64_t k = 0; k < K; ++k) w[3 * K + k] = 1e-3f;      // constant row (per-channel too)
  std::vector<std::string> names = all_integer_scheme_names();
  names.push_back("fp8b128");
  for (const auto& name : names) {
    const QuantizedWeight q = quantize_weight(f32_view(w, N, K), parse_scheme(name));
    check_rtn_bound(w, q, name + " constant blocks");
    if (q.block_k == 32) {
      for (int64_t k = 0; k < 32; ++k) EXPECT_EQ(q.dequant(0, k), 0.0f) << name;
      EXPECT_EQ(q.scale(0, 0), 0.0f) << name;
    }
    for (int64_t k = 1; k < K; ++k)
      ASSERT_EQ(q.dequant(3, k), q.dequant(3, 0)) << name << ": a constant row, k " << k;
  }
}

TEST(QuantizeWeight, RejectsNonFiniteInputNamingTheElement) {
  const int64_t N = 3, K = 40;
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> w = test_matrix(N, K, 18);
    w[1 * K + 37] = bad;
    for (const char* name : {"w4g32", "w8pcasym", "w4g128zp", "fp8b128"})
      EXPECT_MIXQ_ERROR(quantize_weight(f32_view(w, N, K), parse_scheme(name)), "quantize_weight",
                        "[1, 37]", "not finite");
  }
  HostTensor h = random_tensor(DType::F16, {2, 8}, 19);
  h.bytes[2 * 5] = 0x00;
  h.bytes[2 * 5 + 1] = 0x7C;  // f16 +inf at [0, 5]
  EXPECT_MIXQ_ERROR(quantize_weight(h.view(), parse_scheme("w8g32")), "[0, 5]", "not finite");
}

TEST(QuantizeWeight, ScaleOverflowingItsTypeIsAClearError) {
  const int64_t N = 2, K = 64;
  std::vector<float> w = test_matrix(N, K, 20);
  w[1 * K + 3] = 1e6f;  // 1e6 / 7 does not fit in f16 (max 65504)
  EXPECT_MIXQ_ERROR(quantize_weight(f32_view(w, N, K), parse_scheme("w4g32")), "quantize_weight",
                    "f16", "block");
  // The same data with f32 scales is fine.
  const QuantizedWeight q = quantize_weight(f32_view(w, N, K), parse_scheme("w4g32-f32"));
  check_rtn_bound(w, q, "w4g32-f32 large");
}

TEST(QuantizeWeight, BadArguments) {
  std::vector<float> w = test_matrix(2, 8, 21);
  QuantScheme s = parse_scheme("w4g32");
  s.zero_kind = ZeroKind::ZeroPoint;  // signed codes with a zero point
  EXPECT_MIXQ_ERROR(quantize_weight(f32_view(w, 2, 8), s), "zero", "i4");
  s = parse_scheme("w8g32");
  s.block_k = -4;
  EXPECT_MIXQ_ERROR(quantize_weight(f32_view(w, 2, 8), s), "block_k", "-4");
  s = parse_scheme("w8g32");
  s.block_n = 2;
  EXPECT_MIXQ_ERROR(quantize_weight(f32_view(w, 2, 8), s), "block_n", "2");
  std::vector<int8_t> i8(16, 1);
  EXPECT_MIXQ_ERROR(quantize_weight(TensorView(i8.data(), DType::I8, {2, 8}), parse_scheme("w8g32")),
                    "quantize_weight", "i8");
  EXPECT_MIXQ_ERROR(quantize_weight(TensorView(w.data(), DType::F32, {16}), parse_scheme("w8g32")),
                    "quantize_weight", "rank 2");
  EXPECT_MIXQ_ERROR(quantize_weight(TensorView::strided(w.data(), DType::F32, {2, 4}, {8, 2}),
                                    parse_scheme("w8g32")),
                    "quantize_weight", "contiguous");
}

TEST(QuantizeWeight, Int8PerChannelIsSymmetricWithF32Scales) {
  const int64_t N = 5, K = 123;
  const std::vector<float> w = test_matrix(N, K, 22);
  const QuantizedWeight q = quantize_weight_int8_per_channel(f32_view(w, N, K));
  EXPECT_EQ(q.code_type, DType::I8);
  EXPECT_EQ(q.block_k, K);
  EXPECT_EQ(q.scale_type, DType::F32);
  EXPECT_EQ(q.zero_kind, ZeroKind::None);
  for (int64_t n = 0; n < N; ++n) {
    float amax = 0;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(w[n * K + k]));
    EXPECT_EQ(q.scale(n, 0), amax / 127.0f);
  }
  check_rtn_bound(w, q, "int8 per channel");
}

// ------------------------------------------------------------------ activation quantizers

namespace {

// The buffer is QuantizedActivations' layout with the tightest pitches, zero in the padding, and
// view() describes exactly that memory.
void check_buffer_layout(const QuantizedActivationsBuffer& a) {
  const int64_t nb = a.n_blocks(), rp = act_quant_row_pitch(a.K), mp = act_quant_meta_pitch(a.M);
  const bool int8 = a.kind == ActQuant::Int8Block;
  ASSERT_EQ(a.row_pitch, rp);
  ASSERT_EQ(a.meta_pitch, mp);
  ASSERT_EQ(a.q.size(), size_t(a.M * rp));
  ASSERT_EQ(a.scale.size(), size_t(nb * mp));
  ASSERT_EQ(a.offset.size(), int8 ? size_t(nb * mp) : 0u);
  ASSERT_EQ(a.sums.size(), int8 ? size_t(nb * mp) : 0u);
  for (int64_t m = 0; m < a.M; ++m)
    for (int64_t k = a.K; k < rp; ++k) ASSERT_EQ(a.code(m, k), 0) << "code padding " << m << " " << k;
  for (int64_t kb = 0; kb < nb; ++kb)
    for (int64_t m = a.M; m < mp; ++m) {
      ASSERT_EQ(a.scale_of(m, kb), 0.f) << "meta padding " << m;
      if (int8) {
        ASSERT_EQ(a.offset_of(m, kb), 0.f) << "meta padding " << m;
        ASSERT_EQ(a.sum_of(m, kb), 0) << "meta padding " << m;
      }
    }
  const QuantizedActivations v = a.view();
  EXPECT_EQ(v.kind, a.kind);
  EXPECT_EQ(v.block, a.block);
  EXPECT_EQ(v.q.data, a.q.data());
  EXPECT_EQ(v.q.dtype, int8 ? DType::I8 : DType::F8E4M3);
  EXPECT_EQ(v.q.shape[0], a.M);
  EXPECT_EQ(v.q.shape[1], a.K);
  EXPECT_EQ(v.q.stride[0], rp);
  EXPECT_EQ(v.scale.data, a.scale.data());
  EXPECT_EQ(v.scale.dtype, DType::F32);
  EXPECT_EQ(v.scale.shape[0], nb);
  EXPECT_EQ(v.scale.shape[1], a.M);
  EXPECT_EQ(v.scale.stride[0], mp);
  if (int8) {
    EXPECT_EQ(v.offset.data, a.offset.data());
    EXPECT_EQ(v.offset.stride[0], mp);
    EXPECT_EQ(v.sums.data, a.sums.data());
    EXPECT_EQ(v.sums.dtype, DType::I32);
    EXPECT_EQ(v.sums.stride[0], mp);
  } else {
    EXPECT_TRUE(v.offset.empty());
    EXPECT_TRUE(v.sums.empty());
  }
}

void check_int8_block_activations(const HostTensor& x, int64_t M, int64_t K, int64_t block) {
  const QuantizedActivationsBuffer a = quantize_activations_int8_block(x.view(), block);
  ASSERT_EQ(a.kind, ActQuant::Int8Block);
  ASSERT_EQ(a.M, M);
  ASSERT_EQ(a.K, K);
  const int64_t nb = (K + block - 1) / block;
  ASSERT_EQ(a.n_blocks(), nb);
  check_buffer_layout(a);
  const std::string what = std::string(dtype_name(x.dtype)) + " K=" + std::to_string(K) +
                           " block=" + std::to_string(block);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t k0 = b * block, k1 = std::min(K, k0 + block);
      float lo = INFINITY, hi = -INFINITY;
      for (int64_t k = k0; k < k1; ++k) {
        lo = std::min(lo, float(x.get(m * K + k)));
        hi = std::max(hi, float(x.get(m * K + k)));
      }
      const double s = a.scale_of(m, b), o = a.offset_of(m, b);
      EXPECT_EQ(a.scale_of(m, b), (hi - lo) / 255.0f) << what;
      int32_t sum = 0, qmin = 127, qmax = -128;
      for (int64_t k = k0; k < k1; ++k) {
        const int32_t q = a.int8_code(m, k);
        sum += q;
        qmin = std::min(qmin, q);
        qmax = std::max(qmax, q);
        const double xv = x.get(m * K + k);
        // s/2, plus the f32 rounding of the offset lo + 128 s (which the codes cannot absorb),
        // plus the f32 quotient's error near a half-integer (int8_act_code: t within 3 ulps of
        // (x - o) / s, |t| <= 128.5).
        const double tol = s / 2 + 2 * half_ulp(DType::F32, o) + 4 * half_ulp(DType::F32, xv) +
                           3 * half_ulp(DType::F32, 128.5) * s;
        ASSERT_LE(std::fabs(q * s + o - xv), tol) << what << " m " << m << " k " << k;
      }
      EXPECT_EQ(a.sum_of(m, b), sum) << what << " m " << m << " block " << b;
      if (hi > lo) {  // the range ends map to the code range ends
        EXPECT_EQ(qmin, -128) << what;
        EXPECT_EQ(qmax, 127) << what;
      }
    }
}

}  // namespace

TEST(ActivationQuant, Int8BlockConsistentForBlocks64And128AndRagged) {
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int64_t K : {64, 128, 300, 7392})
      for (int64_t block : {64, 128}) {
        const int64_t M = 3;
        const HostTensor x = random_tensor(t, {M, K}, 30 + uint32_t(K + block), -2.0, 3.0);
        check_int8_block_activations(x, M, K, block);
      }
  // A block far from zero: the offset is large relative to the step.
  const HostTensor far = random_tensor(DType::F32, {2, 200}, 31, 100.0, 100.5);
  check_int8_block_activations(far, 2, 200, 64);
}

TEST(ActivationQuant, Int8BlockConstantBlock) {
  const int64_t M = 2, K = 100;
  HostTensor x = random_tensor(DType::F32, {M, K}, 32);
  for (int64_t k = 64; k < K; ++k) x.set(1 * K + k, 0.75);
  for (int64_t k = 0; k < 64; ++k) x.set(0 * K + k, 0.0);
  const QuantizedActivationsBuffer a = quantize_activations_int8_block(x.view(), 64);
  EXPECT_EQ(a.scale_of(1, 1), 0.0f);
  EXPECT_EQ(a.offset_of(1, 1), 0.75f);
  EXPECT_EQ(a.scale_of(0, 0), 0.0f);
  EXPECT_EQ(a.offset_of(0, 0), 0.0f);
  for (int64_t k = 64; k < K; ++k) EXPECT_EQ(a.int8_code(1, k), 0);
  EXPECT_EQ(a.sum_of(1, 1), 0);
  check_int8_block_activations(x, M, K, 64);
}

TEST(ActivationQuant, Int8BlockRejectsBadInput) {
  HostTensor x = random_tensor(DType::F32, {2, 70}, 33);
  EXPECT_MIXQ_ERROR(quantize_activations_int8_block(x.view(), 0), "block", "0");
  x.set(1 * 70 + 66, NAN);
  EXPECT_MIXQ_ERROR(quantize_activations_int8_block(x.view(), 64), "[1, 66]", "not finite");
  x.set(1 * 70 + 66, INFINITY);
  EXPECT_MIXQ_ERROR(quantize_activations_int8_block(x.view(), 64), "[1, 66]", "not finite");
}

TEST(ActivationQuant, Fp8PerTokenGroupsOf128) {
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int64_t K : {128, 300, 7392}) {
      const int64_t M = 3;
      HostTensor x = random_tensor(t, {M, K}, 40 + uint32_t(K), -5.0, 4.0);
      if (K == 300)
        for (int64_t k = 128; k < 256; ++k) x.set(2 * K + k, 0.0);  // an all-zero group
      const QuantizedActivationsBuffer a = quantize_activations_fp8_block(x.view());
      const int64_t ng = (K + 127) / 128;
      ASSERT_EQ(a.kind, ActQuant::Fp8Block);
      ASSERT_EQ(a.block, 128);
      ASSERT_EQ(a.n_blocks(), ng);
      check_buffer_layout(a);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t g = 0; g < ng; ++g) {
          float amax = 0;
          for (int64_t k = g * 128; k < std::min(K, g * 128 + 128); ++k)
            amax = std::max(amax, float(std::fabs(x.get(m * K + k))));
          const float s = a.scale_of(m, g);
          EXPECT_EQ(s, std::max(amax, 1e-10f) / 448.0f) << "m " << m << " g " << g;
          for (int64_t k = g * 128; k < std::min(K, g * 128 + 128); ++k) {
            const double xv = x.get(m * K + k), v = std::fabs(xv) / s;
            const double d = decode_e4m3(a.code(m, k)) * s;
            const double tol = s * (half_ulp(DType::F8E4M3, std::min(v, 448.0)) +
                                    std::max(0.0, v - 448.0)) +
                               4 * half_ulp(DType::F32, xv);
            ASSERT_LE(std::fabs(d - xv), tol) << dtype_name(t) << " K " << K << " m " << m << " k " << k;
          }
        }
    }
}

// The INT8 activation code's definition (mixq/numeric.hpp): f32 quotient, clamp, half to even.
TEST(ActivationQuant, Int8ActCodeDefinition) {
  EXPECT_EQ(int8_act_code(2.5f, 0.f, 1.f), 2);    // tie -> even
  EXPECT_EQ(int8_act_code(3.5f, 0.f, 1.f), 4);
  EXPECT_EQ(int8_act_code(-2.5f, 0.f, 1.f), -2);
  EXPECT_EQ(int8_act_code(127.5f, 0.f, 1.f), 127);  // clamped before rounding
  EXPECT_EQ(int8_act_code(-300.f, 0.f, 1.f), -128);
  EXPECT_EQ(int8_act_code(NAN, 0.f, 1.f), -128);
  EXPECT_EQ(int8_act_code(INFINITY, 0.f, 1.f), 127);
  // two roundings in f32: (1 + 2^-23) - 1 = 2^-23 exactly, times 2^22 * 3 = 1.5 -> 2
  EXPECT_EQ(int8_act_code(1.0f + 0x1p-23f, 1.0f, 0x1p22f * 3), 2);
  // 0.1f * 5 rounds to 0.5 in f32 (the real product is 0.50000000745...): a tie, half to even -> 0
  EXPECT_EQ(int8_act_code(0.1f, 0.f, 5.f), 0);
}
