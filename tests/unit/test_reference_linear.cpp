// Reference linear kernels against naive float64 loops written here, which decode the weight
// from its packed bytes (test_util.hpp) rather than through QuantizedWeight::dequant.
// Shapes come from tensor-parallel splits of real layers (K = 7392, N = 10944) sliced down so
// the whole file runs in well under a second or two.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "mixq/act_quant.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"
#include "unit/test_util.hpp"

using namespace mixq;
using namespace mixq::testing;

namespace {

QuantizedWeight make_weight(const std::string& scheme, int64_t N, int64_t K, uint32_t seed) {
  const HostTensor w = random_tensor(DType::F32, {N, K}, seed, -0.8, 1.0);
  return quantize_weight(w.view(), parse_scheme(scheme));
}

PreparedWeight prepare_ref(const QuantizedWeight& w, ActQuant act = ActQuant::None) {
  PrepareOptions o;
  o.backend = BackendKind::Reference;
  o.act = act;
  return prepare(w, o);
}

struct BiasSpec {
  DType dtype = DType::F32;
  bool present = false;
};

// The weight decoded from bytes once (original column order), and the per-weight error scale:
// the reference dequantizes in f32 (q*s rounded, then + o rounded), so each weight may differ
// from the float64 decoding by 2^-23 (|w| + |o|).
struct Decoded {
  std::vector<double> w, mag;
};
Decoded decode(const QuantizedWeight& q) {
  Decoded d;
  d.w = raw_dequant_original(q);
  d.mag.resize(d.w.size());
  for (int64_t n = 0; n < q.N; ++n)
    for (int64_t j = 0; j < q.K; ++j) {
      const int64_t k = q.k_perm.empty() ? j : q.k_perm[j];
      const double o = q.zero_kind == ZeroKind::Offset ? std::fabs(raw_offset(q, n, j)) : 0.0;
      d.mag[n * q.K + k] = std::fabs(d.w[n * q.K + k]) + o;
    }
  return d;
}

// Runs the reference weight-only linear through the public API on a poisoned y and compares it
// with the naive float64 product of the decoded weights.
void check_weight_only(const QuantizedWeight& w, const Decoded& dec, int64_t M, DType xt, DType yt,
                       BiasSpec bs, float lo, float hi, uint32_t seed) {
  const int64_t N = w.N, K = w.K;
  const HostTensor x = random_tensor(xt, {M, K}, seed, -1.0, 1.0);
  const HostTensor bias = random_tensor(bs.dtype, {N}, seed + 1, -0.5, 0.5);
  HostTensor y(yt, {M, N});
  y.poison();
  Epilogue ep;
  if (bs.present) ep.bias = bias.view();
  ep.clamp_lo = lo;
  ep.clamp_hi = hi;
  linear(x.view(), prepare_ref(w), y.view(), ep);
  const std::string what = w.describe() + " M=" + std::to_string(M) + " x " + dtype_name(xt) +
                           " y " + dtype_name(yt);
  expect_all_written(y, what.c_str());

  const std::vector<double> xd = x.values(), bd = bias.values();
  const std::vector<double> want = naive_linear(xd, dec.w, M, N, K, bs.present ? &bd : nullptr, lo, hi);
  const std::vector<double> absacc = naive_abs_linear(xd, dec.mag, M, N, K);
  int64_t bad = 0;
  for (int64_t i = 0; i < M * N; ++i) {
    const double tol = std::ldexp(absacc[i], -22) + 2 * half_ulp(yt, want[i]) + 1e-30;
    if (!(std::fabs(y.get(i) - want[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << " [" << i / N << ", " << i % N << "]: got " << y.get(i) << " want "
                    << want[i] << " tol " << tol;
  }
  EXPECT_EQ(bad, 0) << what;
}

std::vector<int32_t> random_perm(int64_t K, uint32_t seed) {
  std::vector<int32_t> p(static_cast<size_t>(K));
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), std::mt19937(seed));
  return p;
}

}  // namespace

TEST(RefWeightOnly, EverySchemeAtK7392N24) {
  for (const char* scheme : {"w4g128", "w4g32asym", "w4g128zp", "w4g256zp-bf16", "w8g64",
                             "w8pcasym-bf16", "w8g128zp-f32", "w4pc-f32", "fp8b128"}) {
    const QuantizedWeight w = make_weight(scheme, 24, 7392, 100);
    const Decoded dec = decode(w);
    for (int64_t M : {1, 3, 17}) check_weight_only(w, dec, M, DType::F32, DType::F32, {}, -INFINITY, INFINITY, 7);
  }
}

TEST(RefWeightOnly, WideNSliceN10944K300) {
  const QuantizedWeight w = make_weight("w4g64asym", 10944, 300, 101);
  const Decoded dec = decode(w);
  for (int64_t M : {1, 17})  // M = 3 is covered at K = 7392; this slice is the expensive one
    check_weight_only(w, dec, M, DType::BF16, DType::F32, {DType::F16, true}, -INFINITY, INFINITY, 8);
}

TEST(RefWeightOnly, ActivationOutputAndBiasDtypes) {
  const QuantizedWeight w = make_weight("w4g32zp", 37, 300, 102);
  const Decoded dec = decode(w);
  for (DType xt : {DType::F32, DType::F16, DType::BF16})
    for (DType yt : {DType::F32, DType::F16, DType::BF16})
      for (DType bt : {DType::F32, DType::F16, DType::BF16})
        check_weight_only(w, dec, 3, xt, yt, {bt, true}, -INFINITY, INFINITY, 9);
}

TEST(RefWeightOnly, ClampReluRelu6AndRange) {
  const QuantizedWeight w = make_weight("w8g32asym", 29, 130, 103);
  const Decoded dec = decode(w);
  const float lims[][2] = {{0.f, INFINITY}, {0.f, 6.f}, {-0.25f, 0.3f}, {0.1f, 0.1f}};
  for (const auto& l : lims)
    for (DType yt : {DType::F32, DType::BF16})
      check_weight_only(w, dec, 17, DType::F16, yt, {DType::F32, true}, l[0], l[1], 10);
  // The named helpers are the documented bounds.
  EXPECT_EQ(Epilogue::relu().clamp_lo, 0.f);
  EXPECT_EQ(Epilogue::relu6().clamp_hi, 6.f);
}

TEST(RefWeightOnly, ActOrderPermutation) {
  for (const char* scheme : {"w4g128zp", "w8g32"}) {
    QuantizedWeight w = make_weight(scheme, 24, 7392, 104);
    w.k_perm = random_perm(7392, 5);
    check_weight_only(w, decode(w), 3, DType::F32, DType::F32, {DType::BF16, true}, -INFINITY, INFINITY, 11);
  }
  // Permuting the activation columns the same way gives the unpermuted product exactly.
  QuantizedWeight w = make_weight("w4g32", 5, 96, 105);
  QuantizedWeight wp = w;
  wp.k_perm = random_perm(96, 6);
  const HostTensor x = random_tensor(DType::F32, {3, 96}, 12);
  HostTensor xp(DType::F32, {3, 96}), y(DType::F32, {3, 5}), yp(DType::F32, {3, 5});
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t j = 0; j < 96; ++j) xp.set(m * 96 + wp.k_perm[j], x.get(m * 96 + j));
  y.poison();
  yp.poison();
  ref::linear_weight_only(x.view(), w, y.view(), {});
  ref::linear_weight_only(xp.view(), wp, yp.view(), {});
  EXPECT_SAME_ARRAY(y.values(), yp.values());
}

TEST(RefWeightOnly, DenseFloatWeights) {
  const HostTensor d = random_tensor(DType::F16, {13, 70}, 106);
  QuantizedWeight w;
  w.N = 13;
  w.K = 70;
  w.code_type = DType::F16;
  w.has_scales = false;
  w.block_k = 70;
  w.allocate();
  w.codes = d.bytes;
  check_weight_only(w, decode(w), 3, DType::F32, DType::F16, {}, -INFINITY, INFINITY, 13);
}

TEST(RefWeightOnly, StridedRowsAndMZero) {
  const QuantizedWeight w = make_weight("w4g32", 6, 64, 107);
  HostTensor x = random_tensor(DType::F32, {3, 80}, 14);  // ld 80 > K
  HostTensor y(DType::F32, {3, 10});                        // ld 10 > N
  y.poison();
  const TensorView xv = TensorView::strided(x.bytes.data(), DType::F32, {3, 64}, {80, 1});
  const TensorView yv = TensorView::strided(y.bytes.data(), DType::F32, {3, 6}, {10, 1});
  linear(xv, prepare_ref(w), yv, {});
  std::vector<double> xd;
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t k = 0; k < 64; ++k) xd.push_back(x.get(m * 80 + k));
  const std::vector<double> want = naive_linear(xd, raw_dequant_original(w), 3, 6, 64);
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t n = 0; n < 10; ++n) {
      if (n < 6) EXPECT_NEAR(y.get(m * 10 + n), want[m * 6 + n], 1e-5);
      else EXPECT_TRUE(std::isnan(y.get(m * 10 + n))) << "wrote past the row end";
    }
  // M = 0 is a no-op.
  HostTensor y0(DType::F32, {0, 6});
  linear(TensorView(x.bytes.data(), DType::F32, {0, 64}), prepare_ref(w),
         TensorView(y.bytes.data(), DType::F32, {0, 6}), {});
}

// store_from_double rounds the double once, to nearest even in the target type: a value just
// above an f16/bf16 tie must round up even though its f32 rounding lands exactly on the tie.
TEST(RefHelpers, StoreFromDoubleRoundsOnce) {
  HostTensor h(DType::F16, {1, 4}), b(DType::BF16, {1, 4}), f(DType::F32, {1, 1});
  const double above_tie_f16 = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  const double below_tie_f16 = 1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40);
  ref::store_from_double(h.view(), 0, 0, above_tie_f16);
  ref::store_from_double(h.view(), 0, 1, below_tie_f16);
  ref::store_from_double(h.view(), 0, 2, -above_tie_f16);
  ref::store_from_double(h.view(), 0, 3, 1.0 + 3 * std::ldexp(1.0, -11));  // exact tie -> even
  EXPECT_EQ(h.get(1), 1.0);
  EXPECT_EQ(h.get(0), 1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(h.get(2), -(1.0 + std::ldexp(1.0, -10)));
  EXPECT_EQ(h.get(3), 1.0 + std::ldexp(1.0, -9));
  ref::store_from_double(b.view(), 0, 0, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40));
  ref::store_from_double(b.view(), 0, 1, 1.0 + std::ldexp(1.0, -8));
  ref::store_from_double(b.view(), 0, 2, 1e300);
  // bf16 subnormals are multiples of 2^-133: just above half of one rounds up to it (the f32
  // rounding of this value is exactly the tie, which would round to even zero)
  ref::store_from_double(b.view(), 0, 3, std::ldexp(1.0, -134) + std::ldexp(1.0, -160));
  EXPECT_EQ(b.get(0), 1.0 + std::ldexp(1.0, -7));
  EXPECT_EQ(b.get(1), 1.0);
  EXPECT_TRUE(std::isinf(b.get(2)));
  EXPECT_EQ(b.get(3), std::ldexp(1.0, -133));
  ref::store_from_double(f.view(), 0, 0, 1.0 / 3.0);
  EXPECT_EQ(f.get(0), double(1.0f / 3.0f));
  ref::store_from_double(h.view(), 0, 0, 70000.0);
  EXPECT_TRUE(std::isinf(h.get(0)));
  ref::store_from_double(h.view(), 0, 0, std::ldexp(1.0, -25) * 1.0000001);  // above half subnormal
  EXPECT_EQ(h.get(0), std::ldexp(1.0, -24));
}

// ------------------------------------------------------------------ W8A8 per block

namespace {
std::vector<double> run_f64(const TensorView& x, const QuantizedWeight& w, int64_t block,
                            const Epilogue& ep, bool four_term) {
  HostTensor y(DType::F64, {x.shape[0], w.N});
  std::fill(y.bytes.begin(), y.bytes.end(), 0xFF);  // NaN in f64 too
  if (four_term) ref::linear_w8a8_block(x, w, block, y.view(), ep);
  else ref::linear_w8a8_block_dequant(x, w, block, y.view(), ep);
  std::vector<double> v(static_cast<size_t>(x.shape[0] * w.N));
  std::memcpy(v.data(), y.bytes.data(), 8 * v.size());
  for (double d : v) EXPECT_FALSE(std::isnan(d)) << "unwritten output";
  return v;
}
}  // namespace

// Outputs are taken in f64 so that the comparison sees the kernels' own arithmetic, not the
// rounding to f32 (which can flip between two values 1e-9 apart).
TEST(RefW8A8, FourTermFormulaEqualsDequantizeThenMultiply) {
  for (const char* scheme : {"w8g64", "w8g128", "w8g64asym", "w8g128asym-f32", "w8g64-bf16"})
    for (int64_t K : {300, 7392}) {
      const int64_t N = 24, block = std::stoll(std::string(scheme).substr(3, 3));
      const QuantizedWeight w = make_weight(scheme, N, K, 200 + uint32_t(K));
      const std::vector<double> wd = raw_dequant_original(w);
      const HostTensor bias = random_tensor(DType::F32, {N}, 21);
      const std::vector<double> bd = bias.values();
      Epilogue ep;
      ep.bias = bias.view();
      for (int64_t M : {1, 3, 17}) {
        const HostTensor x = random_tensor(DType::BF16, {M, K}, 20 + uint32_t(M), -2.0, 1.5);
        const std::vector<double> v4 = run_f64(x.view(), w, block, ep, true);
        const std::vector<double> vd = run_f64(x.view(), w, block, ep, false);
        EXPECT_LE(max_rel_err(v4, vd), 1e-9) << scheme << " K " << K << " M " << M;
        // The dequantized product against a float64 triple loop over the dequantized
        // activations and the weights decoded from bytes.
        const QuantizedActivationsBuffer a = quantize_activations_int8_block(x.view(), block);
        std::vector<double> xd(static_cast<size_t>(M * K));
        for (int64_t m = 0; m < M; ++m)
          for (int64_t k = 0; k < K; ++k)
            xd[m * K + k] = double(a.int8_code(m, k)) * a.scale_of(m, k / block) +
                            a.offset_of(m, k / block);
        const std::vector<double> want = naive_linear(xd, wd, M, N, K, &bd);
        EXPECT_LE(max_rel_err(vd, want), 1e-12) << scheme << " K " << K << " M " << M;
      }
      // f32 output through the same path, poisoned first.
      const HostTensor x = random_tensor(DType::F32, {3, K}, 25);
      HostTensor y(DType::F32, {3, N});
      y.poison();
      ref::linear_w8a8_block(x.view(), w, block, y.view(), ep);
      expect_all_written(y, scheme);
    }
}

TEST(RefW8A8, PublicApiRunsTheFourTermReference) {
  const QuantizedWeight w = make_weight("w8g128asym", 24, 7392, 210);
  const HostTensor x = random_tensor(DType::F16, {3, 7392}, 22);
  HostTensor ya(DType::F32, {3, 24}), yr(DType::F32, {3, 24});
  ya.poison();
  yr.poison();
  linear(x.view(), prepare_ref(w, ActQuant::Int8Block), ya.view(), Epilogue::relu());
  ref::linear_w8a8_block(x.view(), w, 128, yr.view(), Epilogue::relu());
  expect_all_written(ya, "api");
  EXPECT_SAME_ARRAY(ya.values(), yr.values());
}

// The overloads on quantized activations take the one view type: the host quantizer's buffer (or
// any strided view in the layout) gives the bits of the float-input oracle.
TEST(RefQuantized, ViewsGiveTheFloatInputBits) {
  const QuantizedWeight w = make_weight("w8g64asym", 12, 300, 213);
  const HostTensor x = random_tensor(DType::F32, {5, 300}, 24);
  HostTensor ya(DType::F32, {5, 12}), yb(DType::F32, {5, 12});
  ref::linear_w8a8_block(x.view(), w, 64, ya.view(), Epilogue::relu());
  const QuantizedActivationsBuffer a = quantize_activations_int8_block(x.view(), 64);
  ref::linear_w8a8_block(a.view(), w, yb.view(), Epilogue::relu());
  EXPECT_SAME_ARRAY(ya.values(), yb.values());
  // Wider strides than the buffer's: the same values read in place.
  const int64_t ldq = a.row_pitch + 32, ldm = a.meta_pitch + 8, nb = a.n_blocks();
  std::vector<int8_t> q(size_t(5 * ldq), 99);
  std::vector<float> sc(size_t(nb * ldm), -1.f), of(size_t(nb * ldm), -1.f);
  std::vector<int32_t> su(size_t(nb * ldm), -1);
  for (int64_t m = 0; m < 5; ++m)
    for (int64_t k = 0; k < 300; ++k) q[size_t(m * ldq + k)] = a.int8_code(m, k);
  for (int64_t kb = 0; kb < nb; ++kb)
    for (int64_t m = 0; m < 5; ++m) {
      sc[size_t(kb * ldm + m)] = a.scale_of(m, kb);
      of[size_t(kb * ldm + m)] = a.offset_of(m, kb);
      su[size_t(kb * ldm + m)] = a.sum_of(m, kb);
    }
  const auto meta = [&](void* p, DType t) { return TensorView::strided(p, t, {nb, 5}, {ldm, 1}); };
  const QuantizedActivations v = QuantizedActivations::int8_block(
      64, TensorView::strided(q.data(), DType::I8, {5, 300}, {ldq, 1}), meta(sc.data(), DType::F32),
      meta(of.data(), DType::F32), meta(su.data(), DType::I32));
  yb.poison();
  ref::linear_w8a8_block(v, w, yb.view(), Epilogue::relu());
  EXPECT_SAME_ARRAY(ya.values(), yb.values());
  // Kind, layout and weight mismatches are errors.
  EXPECT_MIXQ_ERROR(ref::linear_fp8_block(a.view(), make_weight("fp8b128", 12, 300, 214), yb.view(), {}),
                    "a.kind");
  QuantizedActivations bad = a.view();
  bad.scale.shape[0] = nb - 1;
  EXPECT_MIXQ_ERROR(ref::linear_w8a8_block(bad, w, yb.view(), {}), "a.scale");
  EXPECT_MIXQ_ERROR(ref::linear_w8a8_block(quantize_activations_int8_block(x.view(), 128).view(), w,
                                           yb.view(), {}),
                    "act_block (128)");

  const QuantizedWeight wf = make_weight("fp8b128", 12, 300, 215);
  ref::linear_fp8_block(x.view(), wf, ya.view(), {});
  ref::linear_fp8_block(quantize_activations_fp8_block(x.view()).view(), wf, yb.view(), {});
  EXPECT_SAME_ARRAY(ya.values(), yb.values());
}

TEST(RefW8A8, RejectsMisalignedOrUnsupportedWeights) {
  const QuantizedWeight w = make_weight("w8g64", 4, 128, 211);
  const HostTensor x = random_tensor(DType::F32, {1, 128}, 23);
  HostTensor y(DType::F32, {1, 4});
  EXPECT_MIXQ_ERROR(ref::linear_w8a8_block(x.view(), w, 128, y.view(), {}), "act_block (128)");
  EXPECT_MIXQ_ERROR(ref::linear_w8a8_block_dequant(x.view(), w, 128, y.view(), {}), "act_block (128)");
  const QuantizedWeight z = make_weight("w8g64zp", 4, 128, 212);
  EXPECT_MIXQ_ERROR(ref::linear_w8a8_block(x.view(), z, 64, y.view(), {}), "u8");
  EXPECT_MIXQ_ERROR(ref::linear_w8a8_block_dequant(x.view(), z, 64, y.view(), {}), "u8");
}

// ------------------------------------------------------------------ FP8 block

namespace {
// The reference's act = fp8-block product of w with M random rows, against the float64 product of
// the fp8-quantized activations (e4m3 code times its block's scale) and the dequantized weight.
// Returns the output and the activations.
std::pair<HostTensor, HostTensor> expect_fp8_activation_product(const QuantizedWeight& w, int64_t M,
                                                                 const std::string& what) {
  const int64_t N = w.N, K = w.K;
  HostTensor x = random_tensor(DType::BF16, {M, K}, 30, -3.0, 3.0);
  HostTensor y(DType::F32, {M, N});
  y.poison();
  linear(x.view(), prepare_ref(w, ActQuant::Fp8Block), y.view(), {});
  expect_all_written(y, what.c_str());
  const QuantizedActivationsBuffer a = quantize_activations_fp8_block(x.view());
  std::vector<double> xd(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) xd[m * K + k] = decode_e4m3(a.code(m, k)) * a.scale_of(m, k / 128);
  const std::vector<double> want = naive_linear(xd, raw_dequant_original(w), M, N, K);
  for (int64_t i = 0; i < M * N; ++i)
    EXPECT_NEAR(y.get(i), want[i], 1e-9 * std::fabs(want[i]) + 2 * half_ulp(DType::F32, want[i]))
        << what << " M " << M << " N " << N << " K " << K << " i " << i;
  return {std::move(y), std::move(x)};
}
}  // namespace

TEST(RefFp8Block, MatchesNaiveBlockScaledProduct) {
  struct Shape { int64_t M, N, K; };
  for (const Shape s : {Shape{1, 24, 7392}, Shape{17, 24, 7392}, Shape{3, 300, 300}, Shape{3, 130, 100}}) {
    const QuantizedWeight w = make_weight("fp8b128", s.N, s.K, 300 + uint32_t(s.K));
    const auto [y, x] = expect_fp8_activation_product(w, s.M, "fp8");
    // And close to the unquantized product: e4m3 keeps 3 mantissa bits on both sides.
    const std::vector<double> exact = naive_linear(x.values(), raw_dequant_original(w), s.M, s.N, s.K);
    const std::vector<double> mag = naive_abs_linear(x.values(), raw_dequant_original(w), s.M, s.N, s.K);
    for (int64_t i = 0; i < s.M * s.N; ++i) ASSERT_LE(std::fabs(y.get(i) - exact[i]), 0.07 * mag[i]);
  }
}

// W4A8: 4-bit weights in groups of 128 (symmetric or zero-point) times FP8 block activations is
// the fp8-quantized activations times the dequantized weight; narrow K (one group of K) included.
TEST(RefW4A8, MatchesFp8ActivationsTimesTheDequantizedWeight) {
  struct Shape { int64_t M, N, K; };
  for (const char* scheme : {"w4g128", "w4g128zp"})
    for (const Shape s : {Shape{1, 24, 7392}, Shape{17, 24, 1000}, Shape{3, 130, 100}})
      expect_fp8_activation_product(make_weight(scheme, s.N, s.K, 500 + uint32_t(s.K)), s.M, scheme);
}

// ------------------------------------------------------------------ INT8 per tensor, requantized

// mission.md's formula, evaluated the way a fused kernel would: O_q = M*(Acc32 + FusedBias),
// M = S_I*S_W/S_O, FusedBias = -Z_I*sum(W_q) + B/(S_I*S_W) + Z_O/M, then round and clamp.
TEST(RefInt8Requant, FusedBiasFormulaMatchesTheReference) {
  const int64_t M = 17, N = 40, K = 300;
  const HostTensor wf = random_tensor(DType::F32, {N, K}, 400, -0.3, 0.3);
  const QuantizedWeight w = quantize_weight_int8_per_channel(wf.view());
  const HostTensor x = random_tensor(DType::I8, {M, K}, 401, -128.0, 128.0);
  const HostTensor bias = random_tensor(DType::F32, {N}, 402, -2.0, 2.0);
  const Int8TensorQuant in{0.02f, -7}, out{0.05f, 11};
  HostTensor y(DType::I8, {M, N}), y2(DType::I8, {M, N}), yr(DType::F32, {M, N});
  y.poison(0x00);
  y2.poison(0x7F);
  yr.poison();
  Epilogue ep;
  ep.bias = bias.view();
  ref::linear_int8_requant(x.view(), w, in, out, y.view(), ep);
  ref::linear_int8_requant(x.view(), w, in, out, y2.view(), ep);
  ref::linear_int8_requant(x.view(), w, in, out, yr.view(), ep);
  EXPECT_SAME_ARRAY(y.values(), y2.values()) << "some i8 outputs were not written";
  expect_all_written(yr, "requant f32");
  int64_t exact = 0, saturated = 0;
  for (int64_t n = 0; n < N; ++n) {
    const double sw = raw_scale(w, n, 0), Mq = double(in.scale) * sw / out.scale;
    int64_t wsum = 0;
    for (int64_t k = 0; k < K; ++k) wsum += raw_code(w, n, k);
    const double fused = -double(in.zero) * wsum + bias.get(n) / (double(in.scale) * sw) + out.zero / Mq;
    for (int64_t m = 0; m < M; ++m) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += int64_t(x.get(m * K + k)) * raw_code(w, n, k);
      const double oq = std::min(127.0, std::max(-128.0, std::nearbyint(Mq * (acc + fused))));
      // The reference computes round(real / S_O) + Z_O with real = S_I*S_W*(Acc - Z_I*sum W) + B:
      // the same number, but evaluated in another order, so where M*(Acc + FusedBias) lies within
      // ~1e-12 of a .5 tie the two roundings may pick neighbouring codes. Allow +-1 for those.
      const double got = y.get(m * N + n);
      EXPECT_LE(std::fabs(got - oq), 1.0) << "m " << m << " n " << n;
      exact += got == oq;
      saturated += std::fabs(oq) >= 127;
      const double real = double(in.scale) * sw * double(acc - int64_t(in.zero) * wsum) + bias.get(n);
      EXPECT_NEAR(yr.get(m * N + n), real, 2 * half_ulp(DType::F32, real));
    }
  }
  EXPECT_GE(exact, M * N - 2) << "only ties may differ";
  EXPECT_LT(saturated, M * N / 4) << "test data should mostly stay inside the int8 range";
}

TEST(RefInt8Requant, ClampAppliesToTheRealValueAndApiMatches) {
  const int64_t M = 3, N = 16, K = 64;
  const HostTensor wf = random_tensor(DType::F32, {N, K}, 410, -0.5, 0.5);
  const QuantizedWeight w = quantize_weight_int8_per_channel(wf.view());
  const HostTensor x = random_tensor(DType::I8, {M, K}, 411, -128.0, 128.0);
  PrepareOptions o;
  o.backend = BackendKind::Reference;
  o.act = ActQuant::Int8PerTensor;
  o.input_quant = {0.03f, 3};
  o.output_quant = {0.04f, -5};
  const PreparedWeight p = prepare(w, o);
  HostTensor yq(DType::I8, {M, N}), yr(DType::F32, {M, N}), yref(DType::I8, {M, N});
  yr.poison();
  linear(x.view(), p, yq.view(), Epilogue::relu6());
  linear(x.view(), p, yr.view(), Epilogue::relu6());
  ref::linear_int8_requant(x.view(), w, o.input_quant, o.output_quant, yref.view(), Epilogue::relu6());
  EXPECT_SAME_ARRAY(yq.values(), yref.values());
  for (int64_t i = 0; i < M * N; ++i) {
    EXPECT_GE(yr.get(i), 0.0);
    EXPECT_LE(yr.get(i), 6.0);
    // ReLU6 in the real domain is [Z_O, Z_O + 6/S_O] in codes.
    EXPECT_GE(yq.get(i), -5.0);
    EXPECT_EQ(yq.get(i), std::min(127.0, std::nearbyint(yr.get(i) / 0.04f) - 5));
  }
}
