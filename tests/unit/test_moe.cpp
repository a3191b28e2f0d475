// Mixture-of-experts on the host backends: the grouped linear against a float64 loop over experts
// on the dequantized weights (every scheme, odd row counts per expert including 0, both layouts,
// odd N / K), E = 1 against plain linear bit for bit, routing (permutation, gather, scatter-add)
// against a naive version, moe_mlp against a float64 MLP, and bad input -> a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/moe.hpp"
#include "moe_test_data.hpp"
#include "mixq/numeric.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"

namespace mixq {
namespace {

using moe_test::randn;

std::vector<QuantizedWeight> make_experts(const std::string& scheme, int64_t E, int64_t N,
                                          int64_t K, uint32_t seed) {
  return moe_test::make_experts(scheme, E, N, K, seed, 7919u);
}

// The dequantized weight in original K order, as double.
std::vector<double> dequant64(const QuantizedWeight& w) {
  std::vector<float> f(size_t(w.N * w.K));
  dequantize_rows(w, 0, w.N, f.data(), true);
  return std::vector<double>(f.begin(), f.end());
}

PrepareOptions cpu_options() {
  PrepareOptions o;
  o.backend = BackendKind::CPU;
  return o;
}

// The CPU backend's f32 path at every M (by default it quantizes the activations of calls with
// M <= 8 to int8 for weight-only integer codes): exact f32 arithmetic for float64 comparisons.
PrepareOptions cpu_f32_options() {
  PrepareOptions o = cpu_options();
  o.force_kernel = "cpu_f32";
  return o;
}

PrepareOptions options_for(const std::string& scheme, BackendKind b) {
  PrepareOptions o;
  o.backend = b;
  // -act: the scheme's W8A8 activations; -fp8: W4A8 (4-bit weights, FP8 block activations)
  const bool w4a8 = scheme.size() > 4 && scheme.compare(scheme.size() - 4, 4, "-fp8") == 0;
  if (scheme == "fp8b128-act" || w4a8)
    o.act = ActQuant::Fp8Block;
  if (scheme == "w8g128-act") o.act = ActQuant::Int8Block;
  return o;
}

std::string weight_scheme(const std::string& s) {
  const size_t dash = s.find("-act") != std::string::npos ? s.find("-act") : s.find("-fp8");
  return dash == std::string::npos ? s : s.substr(0, dash);
}

// Rows per expert -> offsets [E + 1].
std::vector<int32_t> offsets_of(const std::vector<int32_t>& counts) {
  std::vector<int32_t> o(counts.size() + 1, 0);
  for (size_t e = 0; e < counts.size(); ++e) o[e + 1] = o[e] + counts[e];
  return o;
}

struct GroupedCase {
  std::string scheme;
  int64_t N, K;
  std::vector<int32_t> counts;
};

class GroupedLinear : public ::testing::TestWithParam<std::string> {};

// Every scheme, rows per expert 0, 1, 7, 300 and more, odd N and K; contiguous layout; against
// float64 on the dequantized weights (tolerance by scheme: weight-only is f32 arithmetic, the
// W8A8 schemes quantize X) and bit for bit against linear() on each expert alone.
TEST_P(GroupedLinear, MatchesFloat64LoopOverExperts) {
  const std::string scheme = GetParam();
  const bool fp8 = weight_scheme(scheme) == "fp8b128";
  const int64_t N = fp8 ? 136 : 37, K = fp8 ? 200 : (scheme.find("g128") != std::string::npos ? 256 : 160);
  const std::vector<int32_t> counts = {0, 1, 7, 0, 300, 2, 0};
  const int64_t E = int64_t(counts.size());
  const auto experts = make_experts(weight_scheme(scheme), E, N, K, 11);
  for (BackendKind b : {BackendKind::CPU, BackendKind::Reference}) {
    const PreparedExperts pe = prepare_experts(experts, options_for(scheme, b));
    std::vector<int32_t> off = offsets_of(counts);
    const int64_t R = off.back();
    std::vector<float> x = randn(size_t(R * K), 5), y(size_t(R * N), NAN);
    grouped_linear(TensorView(x.data(), DType::F32, {R, K}), pe,
                   TensorView(y.data(), DType::F32, {R, N}),
                   MoeRows::contiguous(TensorView(off.data(), DType::I32, {E + 1})));
    // Calls the CPU runs on int8-quantized activations (cpu_activations = auto picks them by
    // kernel set, code width and M: docs/cpu-backend.md) are held to 3e-2 of the output's scale.
    for (int64_t e = 0; e < E; ++e) {
      const bool int8_act = counts[e] > 0 &&
          pe.expert(e).kernel_name(counts[e]).find("i8dot") != std::string::npos;
      const double tol = pe.act() == ActQuant::Int8Block ? 2e-2
                         : pe.act() == ActQuant::Fp8Block ? 8e-2
                         : int8_act ? 3e-2
                                    : 1e-5;
      const std::vector<double> w = dequant64(experts[size_t(e)]);
      std::vector<float> ye(size_t(counts[e] * N));
      if (counts[e] > 0)
        linear(TensorView(x.data() + off[e] * K, DType::F32, {counts[e], K}), pe.expert(e),
               TensorView(ye.data(), DType::F32, {counts[e], N}));
      for (int64_t r = off[e]; r < off[e + 1]; ++r)
        for (int64_t n = 0; n < N; ++n) {
          double ref = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            ref += double(x[r * K + k]) * w[n * K + k];
            mag += std::fabs(double(x[r * K + k]) * w[n * K + k]);
          }
          const float got = y[r * N + n];
          ASSERT_LE(std::fabs(got - ref), tol * mag + 1e-6)
              << scheme << " " << backend_name(b) << " expert " << e << " row " << r << " n " << n;
          ASSERT_EQ(got, ye[(r - off[e]) * N + n]) << "grouped != linear on expert " << e;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, GroupedLinear,
                         ::testing::Values("w4g32", "w4g128", "w4g32asym", "w4g128zp", "w8g64asym",
                                           "w8g128", "w4pc", "w8pc", "w4g64-bf16", "fp8b128",
                                           "fp8b128-act", "w8g128-act", "w4g128-fp8", "w4g128zp-fp8"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) if (c == '-') c = '_';
                           return s;
                         });

TEST(GroupedLinear, OneExpertEqualsLinearBitForBit) {
  for (const char* scheme : {"w4g128", "w8g64asym", "fp8b128"}) {
    const int64_t N = 45, K = 256, R = 33;
    const auto experts = make_experts(scheme, 1, N, K, 3);
    const PreparedExperts pe = prepare_experts(experts, cpu_options());
    const PreparedWeight pw = prepare(experts[0], cpu_options());
    for (DType t : {DType::F32, DType::BF16}) {
      std::vector<float> xf = randn(size_t(R * K), 9);
      std::vector<uint16_t> xb(xf.size());
      for (size_t i = 0; i < xf.size(); ++i) xb[i] = f32_to_bf16(xf[i]);
      void* xp = t == DType::F32 ? static_cast<void*>(xf.data()) : static_cast<void*>(xb.data());
      std::vector<float> a(size_t(R * N), NAN), b(size_t(R * N), NAN);
      std::vector<float> bias = randn(size_t(N), 4);
      Epilogue ep = Epilogue::relu();
      ep.bias = TensorView(bias.data(), DType::F32, {N});
      int32_t off[2] = {0, int32_t(R)};
      grouped_linear(TensorView(xp, t, {R, K}), pe, TensorView(a.data(), DType::F32, {R, N}),
                     MoeRows::contiguous(TensorView(off, DType::I32, {2})), ep);
      linear(TensorView(xp, t, {R, K}), pw, TensorView(b.data(), DType::F32, {R, N}), ep);
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << scheme << " element " << i;
    }
  }
}

// The masked layout: rows past counts[e] are neither read (NaN there) nor written (sentinel
// kept); rank-3 views; bias per expert; threads over experts (more active experts than threads).
TEST(GroupedLinear, MaskedLayoutWithPerExpertBias) {
  const int64_t E = 9, max = 5, N = 19, K = 96;
  const std::vector<int32_t> counts = {5, 0, 1, 3, 0, 2, 5, 4, 1};
  const auto experts = make_experts("w4g32asym", E, N, K, 21);
  const PreparedExperts pe = prepare_experts(experts, cpu_f32_options());
  std::vector<float> x = randn(size_t(E * max * K), 8), y(size_t(E * max * N), -7.f);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = counts[e]; r < max; ++r)
      for (int64_t k = 0; k < K; ++k) x[(e * max + r) * K + k] = NAN;
  std::vector<float> bias = randn(size_t(E * N), 2);
  Epilogue ep;
  ep.bias = TensorView(bias.data(), DType::F32, {E, N});
  ExecContext ctx;
  ctx.num_threads = 2;
  grouped_linear(TensorView(x.data(), DType::F32, {E, max, K}), pe,
                 TensorView(y.data(), DType::F32, {E, max, N}),
                 MoeRows::masked(TensorView(const_cast<int32_t*>(counts.data()), DType::I32, {E}), max),
                 ep, ctx);
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<double> w = dequant64(experts[size_t(e)]);
    for (int64_t r = 0; r < max; ++r)
      for (int64_t n = 0; n < N; ++n) {
        const float got = y[(e * max + r) * N + n];
        if (r >= counts[e]) {
          ASSERT_EQ(got, -7.f) << "masked row written: expert " << e << " row " << r;
          continue;
        }
        double ref = bias[e * N + n];
        for (int64_t k = 0; k < K; ++k) ref += double(x[(e * max + r) * K + k]) * w[n * K + k];
        ASSERT_NEAR(got, ref, 1e-4) << "expert " << e << " row " << r << " n " << n;
      }
  }
}

TEST(GroupedLinear, BadInputIsAClearError) {
  const int64_t E = 3, N = 16, K = 64;
  const auto experts = make_experts("w4g32", E, N, K, 1);
  const PreparedExperts pe = prepare_experts(experts, cpu_options());
  std::vector<float> x(size_t(10 * K), 0.5f), y(size_t(10 * N));
  const TensorView xv(x.data(), DType::F32, {10, K}), yv(y.data(), DType::F32, {10, N});
  auto expect_error = [&](std::vector<int32_t> off, const char* needle) {
    try {
      grouped_linear(xv, pe, yv, MoeRows::contiguous(TensorView(off.data(), DType::I32, {int64_t(off.size())})));
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({0, 4, 2, 10}, "not non-decreasing: offsets[1] = 4 > offsets[2] = 2");
  expect_error({0, 4, 6, 9}, "offsets[E = 3] (9) must equal the rows of x (10)");
  expect_error({1, 4, 6, 10}, "offsets[0] (1) must be 0");
  expect_error({0, 4, 10}, "offsets must be a contiguous [E + 1 = 4] i32");
  std::vector<int32_t> counts = {1, 6, 0};
  try {
    grouped_linear(TensorView(x.data(), DType::F32, {9, K}), pe, TensorView(y.data(), DType::F32, {9, N}),
                   MoeRows::masked(TensorView(counts.data(), DType::I32, {3}), 3));
    ADD_FAILURE() << "no error for a count over max_tokens";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("counts[1] (6) must be in [0, max_tokens = 3]"),
              std::string::npos) << e.what();
  }
  // y overlapping x: refused before anything is written
  try {
    std::vector<int32_t> off = {0, 4, 6, 10};
    grouped_linear(xv, pe, TensorView(x.data() + K, DType::F32, {10, N}),
                   MoeRows::contiguous(TensorView(off.data(), DType::I32, {4})));
    ADD_FAILURE() << "no error for y overlapping x";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grouped_linear: y"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("overlaps x"), std::string::npos) << e.what();
  }
  // mismatched expert shapes / schemes
  auto mixed = make_experts("w4g32", 2, N, K, 1);
  mixed.push_back(make_experts("w4g32", 1, N + 1, K, 2)[0]);
  EXPECT_THROW(prepare_experts(mixed, cpu_options()), Error);
  auto schemes = make_experts("w4g32", 1, N, K, 1);
  schemes.push_back(make_experts("w8g32", 1, N, K, 2)[0]);
  try {
    prepare_experts(schemes, cpu_options());
    ADD_FAILURE() << "no error for mixed schemes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expert 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(prepare_experts({}, cpu_options()), Error);
}

// ------------------------------------------------------------------------------ routing

TEST(MoeRouting, PermutationGatherScatterAddMatchNaive) {
  const int64_t T = 37, k = 3, E = 11, H = 10;
  std::mt19937 g(4);
  std::vector<int32_t> ids(size_t(T * k));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> all(static_cast<size_t>(E));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), g);
    for (int64_t j = 0; j < k; ++j) ids[t * k + j] = all[j] % 6;  // experts 6..10 get no tokens
  }
  const int64_t R = T * k;
  std::vector<int32_t> off(size_t(E + 1)), sorted(static_cast<size_t>(R)), pos(static_cast<size_t>(R));
  moe_route(TensorView(ids.data(), DType::I32, {T, k}), E, TensorView(off.data(), DType::I32, {E + 1}),
            TensorView(sorted.data(), DType::I32, {R}), TensorView(pos.data(), DType::I32, {R}));
  // naive stable sort by expert
  std::vector<int32_t> order(static_cast<size_t>(R));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return ids[a] < ids[b]; });
  EXPECT_EQ(sorted, order);
  for (int64_t e = 0; e <= E; ++e) {
    const int64_t want = std::count_if(ids.begin(), ids.end(), [&](int32_t v) { return v < e; });
    EXPECT_EQ(off[e], want) << "offsets[" << e << "]";
  }
  for (int64_t i = 0; i < R; ++i) EXPECT_EQ(sorted[pos[i]], i);

  std::vector<float> x = randn(size_t(T * H), 1), xs(size_t(R * H));
  moe_gather(TensorView(x.data(), DType::F32, {T, H}), TensorView(sorted.data(), DType::I32, {R}), k,
             TensorView(xs.data(), DType::F32, {R, H}));
  for (int64_t p = 0; p < R; ++p)
    for (int64_t h = 0; h < H; ++h) ASSERT_EQ(xs[p * H + h], x[(sorted[p] / k) * H + h]);

  std::vector<float> ys = randn(size_t(R * H), 2), w = randn(size_t(T * k), 3), y(size_t(T * H), 1.f);
  moe_scatter_add(TensorView(ys.data(), DType::F32, {R, H}), TensorView(pos.data(), DType::I32, {R}),
                  TensorView(w.data(), DType::F32, {T, k}), TensorView(y.data(), DType::F32, {T, H}), true);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      double ref = 1.0;
      for (int64_t j = 0; j < k; ++j) ref += double(w[t * k + j]) * ys[pos[t * k + j] * H + h];
      ASSERT_NEAR(y[t * H + h], ref, 1e-5);
    }
}

TEST(MoeRouting, ExpertIdOutOfRangeIsAnError) {
  std::vector<int32_t> ids = {0, 1, 2, 5}, off(5), sorted(4), pos(4);
  try {
    moe_route(TensorView(ids.data(), DType::I32, {2, 2}), 4, TensorView(off.data(), DType::I32, {5}),
              TensorView(sorted.data(), DType::I32, {4}), TensorView(pos.data(), DType::I32, {4}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("topk_ids[1][1] (5) is not an expert in [0, 4)"),
              std::string::npos) << e.what();
  }
  ids[3] = -1;
  EXPECT_THROW(moe_route(TensorView(ids.data(), DType::I32, {2, 2}), 4,
                         TensorView(off.data(), DType::I32, {5}), TensorView(sorted.data(), DType::I32, {4}),
                         TensorView(pos.data(), DType::I32, {4})), Error);
}

// An output sharing memory with an input: refused before anything is written (on CUDA other
// blocks would read rows this one has overwritten).
TEST(MoeRouting, OutputOverlappingAnInputIsAnError) {
  const int64_t T = 4, k = 2, H = 8, R = T * k;
  std::vector<int32_t> sorted(static_cast<size_t>(R)), pos(static_cast<size_t>(R));
  std::iota(sorted.begin(), sorted.end(), 0);
  std::iota(pos.begin(), pos.end(), 0);
  std::vector<float> buf(size_t(R * H + T * H)), w(size_t(R), 0.5f);
  const auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // xs overlapping x's last row
  const std::string g = message([&] {
    moe_gather(TensorView(buf.data(), DType::F32, {T, H}), TensorView(sorted.data(), DType::I32, {R}), k,
               TensorView(buf.data() + (T - 1) * H, DType::F32, {R, H}));
  });
  EXPECT_NE(g.find("moe_gather: xs"), std::string::npos) << g;
  EXPECT_NE(g.find("overlaps x"), std::string::npos) << g;
  // y inside ys
  const std::string s = message([&] {
    moe_scatter_add(TensorView(buf.data(), DType::F32, {R, H}), TensorView(pos.data(), DType::I32, {R}),
                    TensorView(w.data(), DType::F32, {T, k}), TensorView(buf.data() + H, DType::F32, {T, H}));
  });
  EXPECT_NE(s.find("moe_scatter_add: y"), std::string::npos) << s;
  EXPECT_NE(s.find("overlaps ys"), std::string::npos) << s;
  // apart: both run
  EXPECT_EQ(message([&] {
    moe_scatter_add(TensorView(buf.data(), DType::F32, {R, H}), TensorView(pos.data(), DType::I32, {R}),
                    TensorView(w.data(), DType::F32, {T, k}), TensorView(buf.data() + R * H, DType::F32, {T, H}));
  }), "no error");
}

// ------------------------------------------------------------------------------ moe_mlp

TEST(MoeMlp, MatchesFloat64Mlp) {
  const int64_t E = 6, H = 64, I = 40, T = 13, k = 2;
  std::vector<QuantizedWeight> gu, down;
  const auto gate = make_experts("w8g32", E, I, H, 100), up = make_experts("w8g32", E, I, H, 200);
  for (int64_t e = 0; e < E; ++e) gu.push_back(fuse_gate_up(gate[size_t(e)], up[size_t(e)]));
  down = make_experts("w8g32", E, H, I, 300);
  const PreparedExperts pgu = prepare_experts(gu, cpu_f32_options());
  const PreparedExperts pdown = prepare_experts(down, cpu_f32_options());
  std::mt19937 g(7);
  std::vector<int32_t> ids(size_t(T * k));
  std::vector<float> wts(size_t(T * k));
  for (int64_t t = 0; t < T; ++t) {
    ids[t * k] = int32_t(g() % E);
    ids[t * k + 1] = int32_t((ids[t * k] + 1 + g() % (E - 1)) % E);
    wts[t * k] = 0.7f;
    wts[t * k + 1] = 0.3f;
  }
  std::vector<float> x = randn(size_t(T * H), 12), y(size_t(T * H), NAN);
  moe_mlp(TensorView(x.data(), DType::F32, {T, H}), TensorView(ids.data(), DType::I32, {T, k}),
          TensorView(wts.data(), DType::F32, {T, k}), pgu, pdown, TensorView(y.data(), DType::F32, {T, H}));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> acc(size_t(H), 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = ids[t * k + j];
      const std::vector<double> wg = dequant64(gu[size_t(e)]), wd = dequant64(down[size_t(e)]);
      std::vector<double> a(static_cast<size_t>(I));
      for (int64_t i = 0; i < I; ++i) {
        double hg = 0, hu = 0;
        for (int64_t h = 0; h < H; ++h) {
          hg += x[t * H + h] * wg[i * H + h];
          hu += x[t * H + h] * wg[(I + i) * H + h];
        }
        a[i] = hg / (1 + std::exp(-hg)) * hu;
      }
      for (int64_t h = 0; h < H; ++h) {
        double s = 0;
        for (int64_t i = 0; i < I; ++i) s += a[i] * wd[h * I + i];
        acc[h] += wts[t * k + j] * s;
      }
    }
    for (int64_t h = 0; h < H; ++h) ASSERT_NEAR(y[t * H + h], acc[h], 1e-4 * (1 + std::fabs(acc[h])));
  }
}

// The host gather, scatter-add and activation split rows and tokens over threads: with sizes
// that make several ranges, every thread count gives the single-threaded bits (each output is
// summed by one thread, in the same order), in f32 and bf16.
TEST(MoeMlp, ThreadedHostRoutingMatchesOneThreadBitForBit) {
  const int64_t E = 12, H = 256, I = 192, T = 150, k = 3, R = T * k;
  std::vector<QuantizedWeight> gu;
  const auto gate = make_experts("w4g32", E, I, H, 20), up = make_experts("w4g32", E, I, H, 21);
  for (int64_t e = 0; e < E; ++e) gu.push_back(fuse_gate_up(gate[size_t(e)], up[size_t(e)]));
  const PreparedExperts pgu = prepare_experts(gu, cpu_f32_options());
  const PreparedExperts pdown = prepare_experts(make_experts("w4g32", E, H, I, 22), cpu_f32_options());
  std::mt19937 g(5);
  std::vector<int32_t> ids(static_cast<size_t>(R));
  std::vector<float> wts(static_cast<size_t>(R));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j) {
      ids[size_t(t * k + j)] = int32_t((t * 7 + j * 5 + g() % 2) % E);
      wts[size_t(t * k + j)] = 0.2f + 0.1f * float(j);
    }
  for (const DType dt : {DType::F32, DType::BF16}) {
    std::vector<float> xf = randn(size_t(T * H), 30);
    std::vector<uint16_t> xb(xf.size());
    for (size_t i = 0; i < xf.size(); ++i) xb[i] = f32_to_bf16(xf[i]);
    void* xp = dt == DType::F32 ? static_cast<void*>(xf.data()) : static_cast<void*>(xb.data());
    std::vector<std::vector<uint8_t>> out;
    for (const int threads : {1, 2, 5}) {
      std::vector<uint8_t> y(size_t(T * H) * size_t(dtype_bytes(dt, 1)));
      ExecContext ctx;
      ctx.num_threads = threads;
      moe_mlp(TensorView(xp, dt, {T, H}), TensorView(ids.data(), DType::I32, {T, k}),
              TensorView(wts.data(), DType::F32, {T, k}), pgu, pdown, TensorView(y.data(), dt, {T, H}),
              MoeActivation::Silu, {}, ctx);
      out.push_back(std::move(y));
    }
    EXPECT_EQ(out[0], out[1]) << dtype_name(dt);
    EXPECT_EQ(out[0], out[2]) << dtype_name(dt);
    bool finite = true;
    for (int64_t i = 0; i < T * H; ++i) {
      const float v = dt == DType::F32 ? reinterpret_cast<const float*>(out[0].data())[i]
                                       : bf16_to_f32(reinterpret_cast<const uint16_t*>(out[0].data())[i]);
      finite = finite && std::isfinite(v);
    }
    EXPECT_TRUE(finite);
  }
}

// A caller's workspace overlapping the output (or an input): refused, naming both.
TEST(MoeMlp, WorkspaceOverlappingAnArgumentIsAnError) {
  const int64_t E = 4, H = 64, I = 32, T = 3, k = 2;
  std::vector<QuantizedWeight> gu;
  const auto gate = make_experts("w4g32", E, I, H, 1), up = make_experts("w4g32", E, I, H, 2);
  for (int64_t e = 0; e < E; ++e) gu.push_back(fuse_gate_up(gate[size_t(e)], up[size_t(e)]));
  const PreparedExperts pgu = prepare_experts(gu, cpu_options());
  const PreparedExperts pdown = prepare_experts(make_experts("w4g32", E, H, I, 3), cpu_options());
  std::vector<int32_t> ids = {0, 1, 2, 3, 1, 2};
  std::vector<float> w(size_t(T * k), 0.5f), x = randn(size_t(T * H), 4);
  const size_t bytes = moe_mlp_workspace_size(pgu, pdown, T, k, DType::F32);
  std::vector<float> ws(bytes / 4 + 1 + size_t(T * H));
  ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = bytes;
  auto run = [&](float* y) {
    moe_mlp(TensorView(x.data(), DType::F32, {T, H}), TensorView(ids.data(), DType::I32, {T, k}),
            TensorView(w.data(), DType::F32, {T, k}), pgu, pdown, TensorView(y, DType::F32, {T, H}),
            MoeActivation::Silu, {}, ctx);
  };
  try {
    run(ws.data() + 16);
    ADD_FAILURE() << "no error for y inside the workspace";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("moe_mlp: y"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ExecContext::workspace"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(run(ws.data() + bytes / 4 + 1));  // just past the workspace: apart
  // in place (y = x): x is read before y is written, so the result is the out-of-place one
  const std::vector<float> out_of_place(ws.begin() + bytes / 4 + 1, ws.begin() + bytes / 4 + 1 + T * H);
  std::vector<float> x0 = x;
  run(x.data());
  EXPECT_EQ(x, out_of_place);
  x = x0;
}

TEST(MoeMlp, FuseGateUpStacksRowsAndRefusesMismatch) {
  const auto gate = make_experts("w4g32asym", 1, 8, 64, 1)[0];
  const auto up = make_experts("w4g32asym", 1, 5, 64, 2)[0];
  const QuantizedWeight f = fuse_gate_up(gate, up);
  ASSERT_EQ(f.N, 13);
  for (int64_t n = 0; n < 13; ++n)
    for (int64_t k = 0; k < 64; ++k)
      ASSERT_EQ(f.dequant(n, k), n < 8 ? gate.dequant(n, k) : up.dequant(n - 8, k));
  EXPECT_THROW(fuse_gate_up(gate, make_experts("w4g32", 1, 5, 64, 2)[0]), Error);
  EXPECT_THROW(fuse_gate_up(gate, make_experts("w4g32asym", 1, 5, 96, 2)[0]), Error);
  // FP8 128-row blocks: gate's N must end on a block
  EXPECT_THROW(fuse_gate_up(make_experts("fp8b128", 1, 100, 128, 1)[0],
                            make_experts("fp8b128", 1, 100, 128, 2)[0]), Error);
}

}  // namespace
}  // namespace mixq
