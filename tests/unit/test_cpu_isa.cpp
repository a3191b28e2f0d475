// Every CPU kernel set this machine runs (scalar, avx2, avx2vnni, avx512), each selected through
// PrepareOptions::cpu_isa, on every path at odd shapes against the float64 reference:
//   weight-only exact (cpu_f32: f32gemv M <= 8, f32gemm above) ... 1e-5 of max |ref|
//   weight-only int8 activations (cpu_i8dot) ..................... 1e-5 vs float64 on the same
//                                                                  int8-quantized activations
//                                                                  (1e-2 vs the f32 ones)
//   W8A8 int8-block, FP8 block ..................................... 1e-5
//   INT8 per tensor, i8 output ...................................... exact
// and, where the arithmetic is exact (integer dots, the same f32 epilogue in the same order), the
// SIMD sets bit for bit equal to each other. Extreme codes (-128 / 127 / 255 weights against
// -128 / 127 activations) would saturate a plain vpmaddubsw; the AVX2 set must not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/kernel_policy.hpp"
#include "cpu/kernels.hpp"
#include "mixq/act_quant.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"
#include "mixq/tuning.hpp"

using namespace mixq;

namespace {

const char* const kAllSets[] = {"scalar", "avx2", "avx2vnni", "avx512"};

std::vector<std::string> sets_here() {
  std::vector<std::string> s;
  for (const char* isa : kAllSets)
    if (cpu::cpu_runs(isa)) s.push_back(isa);
  return s;
}
bool is_simd(const std::string& isa) { return isa != "scalar"; }

struct Mat {
  DType t;
  int64_t r, c;
  std::vector<uint8_t> bytes;
  Mat(DType dt, int64_t rows, int64_t cols)
      : t(dt), r(rows), c(cols), bytes(dtype_bytes(dt, rows * cols)) {}
  TensorView view() { return TensorView(bytes.data(), t, {r, c}); }
  double at(int64_t i, int64_t j) { return ref::load_as_double(view(), i, j); }
  void poison() {
    if (t == DType::I8) std::memset(bytes.data(), 0x5A, bytes.size());
    else
      for (int64_t i = 0; i < r * c; ++i) ref::store_from_double(view(), i / c, i % c, NAN);
  }
};

Mat random_mat(DType t, int64_t rows, int64_t cols, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Mat m(t, rows, cols);
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) ref::store_from_double(m.view(), i, j, d(g));
  return m;
}

// max |a - b| / max |b|; infinite when a has a non-finite value.
double rel_err(Mat& a, Mat& b) {
  double md = 0, mb = 0;
  for (int64_t i = 0; i < a.r; ++i)
    for (int64_t j = 0; j < a.c; ++j) {
      const double va = a.at(i, j), vb = b.at(i, j);
      if (!std::isfinite(va)) return INFINITY;
      md = std::max(md, std::fabs(va - vb));
      mb = std::max(mb, std::fabs(vb));
    }
  return mb > 0 ? md / mb : md;
}

PrepareOptions opts(const std::string& isa, ActQuant act = ActQuant::None,
                    const std::string& force = "") {
  PrepareOptions o;
  o.backend = BackendKind::CPU;
  o.cpu_isa = isa;
  o.act = act;
  o.force_kernel = force;
  return o;
}

Mat run(const QuantizedWeight& w, const PrepareOptions& o, Mat& x, int threads = 2) {
  Mat y(DType::F32, x.r, w.N);
  y.poison();
  ExecContext ctx;
  ctx.num_threads = threads;
  const PreparedWeight p = prepare(w, o);
  EXPECT_EQ(p.kernel_name(x.r).rfind("cpu_" + o.cpu_isa + "_", 0), 0u)
      << p.kernel_name(x.r) << " for cpu_isa " << o.cpu_isa;
  linear(x.view(), p, y.view(), {}, ctx);
  return y;
}

// X quantized per `unit` columns by the library quantizer and dequantized (what i8dot computes
// with, for weights whose segments are those units).
Mat int8_emulated(Mat& x, int64_t unit) {
  const QuantizedActivationsBuffer q = quantize_activations_int8_block(x.view(), unit);
  Mat xq(DType::F32, x.r, x.c);
  for (int64_t m = 0; m < x.r; ++m)
    for (int64_t k = 0; k < x.c; ++k)
      ref::store_from_double(xq.view(), m, k,
                             double(q.int8_code(m, k)) * q.scale_of(m, k / unit) + q.offset_of(m, k / unit));
  return xq;
}

QuantizedWeight weight(const std::string& scheme, int64_t N, int64_t K, uint32_t seed) {
  Mat w = random_mat(DType::F32, N, K, seed, -0.7f, 1.1f);
  return quantize_weight(w.view(), parse_scheme(scheme));
}

const int64_t kRows[] = {1, 3, 8, 9, 17, 40};

}  // namespace

TEST(CpuIsa, ExactWeightOnlyEverySetEveryScheme) {
  const char* schemes[] = {"w4g32", "w4g128zp", "w4g32asym", "w8g64asym", "w8g32zp", "w8g128",
                           "w4pc", "w4g64-bf16", "fp8b128"};
  for (const std::string& isa : sets_here()) {
    int i = 0;
    for (const char* s : schemes) {
      const int64_t N = 37 + 16 * (i % 3), K = 300 + 37 * (i % 4);  // ragged panels and blocks
      const QuantizedWeight w = weight(s, N, K, 11 + i++);
      for (int64_t M : kRows) {
        Mat x = random_mat(DType::F32, M, K, 100 + M);
        Mat y = run(w, opts(isa, ActQuant::None, "cpu_f32"), x, 1 + M % 2), yr(DType::F32, M, N);
        ref::linear_weight_only(x.view(), w, yr.view(), {});
        EXPECT_LE(rel_err(y, yr), 1e-5) << isa << " " << s << " M=" << M;
      }
    }
    for (DType t : {DType::F16, DType::BF16, DType::F32}) {  // dense codes
      Mat wf = random_mat(t, 29, 157, 3);
      QuantizedWeight w;
      w.N = 29; w.K = 157; w.code_type = t; w.block_k = 157; w.has_scales = false;
      w.zero_kind = ZeroKind::None;
      w.codes = wf.bytes;
      w.validate();
      for (int64_t M : {1, 5, 13}) {
        Mat x = random_mat(DType::F32, M, w.K, 7 + M);
        Mat y = run(w, opts(isa, ActQuant::None, "cpu_f32"), x), yr(DType::F32, M, w.N);
        ref::linear_weight_only(x.view(), w, yr.view(), {});
        EXPECT_LE(rel_err(y, yr), 1e-5) << isa << " " << dtype_name(t) << " M=" << M;
      }
    }
  }
}

TEST(CpuIsa, Int8ActivationsEverySetAgainstEmulation) {
  // Segments = the weight's blocks (<= 256) or 256-column pieces (per channel).
  const struct { const char* s; int64_t unit; } cases[] = {
      {"w4g128", 128}, {"w4g32asym", 32}, {"w4g128zp", 128}, {"w8g64asym", 64},
      {"w8g128", 128}, {"w8g32zp", 32}, {"w4pc", 256}};
  for (const std::string& isa : sets_here()) {
    int i = 0;
    for (const auto& c : cases) {
      const int64_t N = 45 + 16 * (i % 2), K = 200 + 61 * (i % 3);
      const QuantizedWeight w = weight(c.s, N, K, 31 + i++);
      for (int64_t M : kRows) {
        Mat x = random_mat(DType::F32, M, K, 300 + M);
        Mat y = run(w, opts(isa, ActQuant::None, "cpu_i8dot"), x);
        Mat xq = int8_emulated(x, c.unit), yq(DType::F32, M, N), yr(DType::F32, M, N);
        ref::linear_weight_only(xq.view(), w, yq.view(), {});
        ref::linear_weight_only(x.view(), w, yr.view(), {});
        EXPECT_LE(rel_err(y, yq), 1e-5) << isa << " " << c.s << " M=" << M;
        EXPECT_LE(rel_err(y, yr), 1e-2) << isa << " " << c.s << " M=" << M;
      }
    }
  }
}

TEST(CpuIsa, W8A8Fp8AndPerTensorEverySet) {
  for (const std::string& isa : sets_here()) {
    for (const char* s : {"w8g32", "w8g128asym", "w8pc"}) {
      const QuantizedWeight w = weight(s, 41, 517, 6);
      for (int64_t M : kRows) {
        Mat x = random_mat(DType::F32, M, w.K, 50 + M, -0.3f, 1.2f);
        Mat y = run(w, opts(isa, ActQuant::Int8Block), x), yr(DType::F32, M, w.N);
        ref::linear_w8a8_block(x.view(), w, w.block_k, yr.view(), {});
        EXPECT_LE(rel_err(y, yr), 1e-5) << isa << " " << s << " M=" << M;
      }
    }
    const QuantizedWeight f = weight("fp8b128", 37, 300, 12);
    for (int64_t M : kRows) {
      Mat x = random_mat(DType::BF16, M, f.K, 70 + M, -2.f, 2.f);
      Mat y = run(f, opts(isa, ActQuant::Fp8Block), x), yr(DType::F32, M, f.N);
      ref::linear_fp8_block(x.view(), f, yr.view(), {});
      EXPECT_LE(rel_err(y, yr), 1e-5) << isa << " fp8 M=" << M;
    }
    Mat wf = random_mat(DType::F32, 35, 203, 13);
    const QuantizedWeight t = quantize_weight_int8_per_channel(wf.view());
    PrepareOptions o = opts(isa, ActQuant::Int8PerTensor);
    o.input_quant = {0.02f, 3};
    o.output_quant = {0.15f, -5};
    for (int64_t M : kRows) {
      Mat x(DType::I8, M, t.K);
      std::mt19937 g(90 + M);
      for (auto& b : x.bytes) b = static_cast<uint8_t>(g());
      Mat y(DType::I8, M, t.N), yr(DType::I8, M, t.N);
      y.poison();
      linear(x.view(), prepare(t, o), y.view(), {}, {});
      ref::linear_int8_requant(x.view(), t, o.input_quant, o.output_quant, yr.view(), {});
      EXPECT_EQ(y.bytes, yr.bytes) << isa << " per-tensor M=" << M;
    }
  }
}

// Weights at the code extremes (each element randomly its row's minimum or maximum: codes -128 /
// 127, or 0 / 255 for zero points, 0 / 15 for 4 bits) against activations at theirs (codes -128 /
// 127): pairs of same-sign maximal products, which a 16-bit vpmaddubsw sum cannot hold. Every integer path of every
// SIMD set gives the same bits, and matches the emulation.
TEST(CpuIsa, IntegerPathsBitIdenticalAcrossSimdSetsAtExtremeCodes) {
  std::vector<std::string> simd;
  for (const std::string& isa : sets_here())
    if (is_simd(isa)) simd.push_back(isa);
  if (simd.size() < 2) GTEST_SKIP() << "fewer than two SIMD kernel sets on this CPU";
  const int64_t N = 35, K = 333;
  std::mt19937 bits(5);
  Mat wf(DType::F32, N, K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      ref::store_from_double(wf.view(), n, k, (bits() % 2 ? 1.0 : -0.9) * (1 + 0.01 * n));
  struct Case { const char* s; ActQuant act; const char* force; int64_t unit; };
  const Case cases[] = {{"w8g64asym", ActQuant::None, "cpu_i8dot", 64},
                        {"w8g32zp", ActQuant::None, "cpu_i8dot", 32},
                        {"w8g128", ActQuant::None, "cpu_i8dot", 128},
                        {"w4g32asym", ActQuant::None, "cpu_i8dot", 32},
                        {"w8g64asym", ActQuant::Int8Block, "", 64},
                        {"w8g32", ActQuant::Int8Block, "", 32}};
  for (const Case& c : cases) {
    const QuantizedWeight w = quantize_weight(wf.view(), parse_scheme(c.s));
    for (int64_t M : {1, 2, 7, 8, 19}) {
      Mat x(DType::F32, M, K);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k)
          ref::store_from_double(x.view(), m, k, (bits() % 2 ? 3.0 : -2.5) + 0.001 * (k % 7));
      std::vector<uint8_t> first;
      for (const std::string& isa : simd) {
        Mat y = run(w, opts(isa, c.act, c.force), x);
        if (first.empty()) first = y.bytes;
        else EXPECT_EQ(y.bytes, first) << isa << " vs " << simd[0] << " " << c.s << " M=" << M;
        Mat yr(DType::F32, M, N);
        if (c.act == ActQuant::Int8Block) {
          ref::linear_w8a8_block(x.view(), w, w.block_k, yr.view(), {});
        } else {
          Mat xq = int8_emulated(x, c.unit);
          ref::linear_weight_only(xq.view(), w, yr.view(), {});
        }
        EXPECT_LE(rel_err(y, yr), 1e-5) << isa << " " << c.s << " M=" << M;
      }
    }
  }
}

// The SIMD int8 activation quantizers against the scalar one (the library arithmetic): random
// values, exact ties, out-of-range values, infinities and NaN, ragged lengths.
TEST(CpuIsa, QuantizeI8EverySetMatchesScalar) {
  const float of = 0.25f, sc = 0.5f;
  std::vector<float> x;
  std::mt19937 g(3);
  std::uniform_real_distribution<float> d(-80.f, 80.f);
  for (int i = 0; i < 300; ++i) x.push_back(d(g));
  for (int j = -130; j < 130; ++j) x.push_back(of + (j + 0.5f) * sc);  // ties: half to even
  for (float v : {INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 0.f, -0.f}) x.push_back(v);
  for (const std::string& isa : sets_here()) {
    const cpu::KernelTable& t = cpu::select_kernels(isa);
    EXPECT_EQ(std::string(t.isa), isa);
    for (int64_t n : {int64_t(x.size()), int64_t(13), int64_t(8), int64_t(31)}) {
      std::vector<int8_t> a(x.size(), 7), b(x.size(), 7);
      t.quantize_i8(x.data(), n, of, sc, a.data());
      cpu::scalar_kernels().quantize_i8(x.data(), n, of, sc, b.data());
      EXPECT_EQ(a, b) << isa << " n=" << n;
    }
  }
}

TEST(CpuIsa, SelectionHonoursTheOptionAndNamesWhatIsMissing) {
  const QuantizedWeight w = weight("w4g32", 16, 64, 1);
  for (const std::string& isa : sets_here()) {
    EXPECT_EQ(std::string(cpu::select_kernels(isa).isa), isa);
    EXPECT_EQ(prepare(w, opts(isa)).kernel_name(1), "cpu_" + isa + "_i8dot");
  }
  EXPECT_EQ(std::string(cpu::select_kernels("auto").isa), cpu::best_kernels().isa);
  // A set this CPU lacks: Unsupported, naming the option, the missing and the present features.
  for (const char* isa : kAllSets) {
    if (cpu::cpu_runs(isa)) continue;
    try {
      prepare(w, opts(isa));
      ADD_FAILURE() << isa << " accepted on a CPU without it";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported);
      const std::string m = e.what();
      EXPECT_NE(m.find("PrepareOptions::cpu_isa"), std::string::npos) << m;
      EXPECT_NE(m.find("lacks"), std::string::npos) << m;
      EXPECT_NE(m.find(cpu::cpu_features().list()), std::string::npos) << m;
    }
  }
  try {
    prepare(w, opts("avx3"));
    ADD_FAILURE() << "unknown kernel set accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'avx3'"), std::string::npos) << e.what();
  }
  // The feature requirements of each set, on made-up CPUs.
  cpu::CpuFeatures zen3;
  zen3.avx2 = zen3.fma = zen3.f16c = true;
  EXPECT_EQ(cpu::missing_features("avx2", zen3), "");
  EXPECT_EQ(cpu::missing_features("avx2vnni", zen3), "avx_vnni");
  EXPECT_EQ(cpu::missing_features("avx512", zen3),
            "avx512f avx512bw avx512vl avx512dq avx512_vnni");
  EXPECT_EQ(cpu::missing_features("scalar", cpu::CpuFeatures{}), "");
  EXPECT_EQ(cpu::missing_features("avx2", cpu::CpuFeatures{}), "avx2 fma f16c");
  cpu::CpuFeatures skx = zen3;  // Skylake-X: AVX-512 without VNNI
  skx.avx512f = skx.avx512bw = skx.avx512vl = skx.avx512dq = true;
  EXPECT_EQ(cpu::missing_features("avx512", skx), "avx512_vnni");
  EXPECT_EQ(zen3.list(), "avx2 fma f16c");
}

TEST(CpuIsa, CpuActivationsTuningKey) {
  using A = Tuning::CpuActivations;
  EXPECT_EQ(Tuning::parse("cpu_activations=exact").cpu_activations, A::Exact);
  EXPECT_EQ(Tuning::parse("cpu_activations=int8").cpu_activations, A::Int8);
  EXPECT_EQ(Tuning::parse("cpu_activations=auto").cpu_activations, A::Auto);
  EXPECT_EQ(Tuning().cpu_activations, A::Auto);
  EXPECT_EQ(Tuning::parse("cpu_activations=int8").to_string(), "cpu_activations=int8");
  EXPECT_EQ(Tuning().to_string(), "");
  try {
    Tuning::parse("cpu_activations=fp16");
    ADD_FAILURE() << "bad value accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("cpu_activations=fp16"), std::string::npos) << e.what();
  }
}
