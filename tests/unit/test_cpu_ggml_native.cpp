// GGUF block weights at their native width on the CPU (src/cpu/ggml/): every ggml type mixq
// reads, every ISA level, both paths, against ggml's exact decode (ggml_dequantize_row) times
// float64, at odd N (partial panels), K with ragged chunk tails, and M across the tile sizes.
//
// Tolerances (max abs error / max abs reference):
//   exact f32 path ("cpu_f32")      1e-5 vs float64 (f32 accumulation only)
//   integer path ("cpu_i8dot")      1e-5 vs float64 of the same q8-quantized activations
//                                   (per 32: d = amax / 127, q = round(x / d); mins times the
//                                   unquantized x), and 2e-2 vs the float64 product itself.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/ggml/native_prepared.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/ggml_blocks.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "ggml_test_data.hpp"

namespace {

using mixq::DType;
using mixq::TensorView;
using mixq::formats::GgmlType;
using namespace mixq::test::ggml;

const char* kIsas[] = {"avx512", "avx2vnni", "avx2", "scalar"};

std::vector<float> run(const mixq::PreparedWeight& pw, const std::vector<float>& x, int64_t M,
                       int threads = 2) {
  const int64_t N = pw.N(), K = pw.K();
  std::vector<float> y(static_cast<size_t>(M * N), std::numeric_limits<float>::quiet_NaN());
  mixq::ExecContext ctx;
  ctx.num_threads = threads;
  mixq::linear(TensorView(const_cast<float*>(x.data()), DType::F32, {M, K}), pw,
               TensorView(y.data(), DType::F32, {M, N}), mixq::Epilogue::none(), ctx);
  return y;
}

bool cpu_has(const std::string& isa) {
  __builtin_cpu_init();
  if (isa == "scalar") return true;
  if (isa == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (isa == "avx2vnni")
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("avxvnni");
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni");
}

mixq::PrepareOptions cpu_opts(const std::string& isa, const std::string& force) {
  mixq::PrepareOptions o;
  o.backend = mixq::BackendKind::CPU;
  o.cpu_isa = isa;
  o.force_kernel = force;
  return o;
}

// Checks one (type, N, K) weight at every ISA, both paths, for each M.
void check_type(const TypeCase& tc, int64_t N, int64_t K, const std::vector<int64_t>& Ms,
                uint32_t seed) {
  const std::vector<uint8_t> blocks = random_blocks(tc, N, K, seed);
  const mixq::QuantizedWeight w =
      mixq::formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
  ASSERT_TRUE(w.ggml != nullptr);
  const std::string tname = mixq::formats::ggml_type_name(uint32_t(tc.type));
  for (int64_t M : Ms) {
    const std::vector<float> x = random_x(M, K, seed + static_cast<uint32_t>(M));
    const Refs ref = reference(w, blocks, tc.type, x, M);
    for (const char* isa : kIsas) {
      // a kernel set this CPU cannot run is refused at prepare (a clear error, tested with the
      // ISA option itself); its kernels are checked on the machines that have it
      if (!cpu_has(isa)) continue;
      SCOPED_TRACE(tname + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                   " M=" + std::to_string(M) + " isa=" + isa);
      const mixq::PreparedWeight f32 = mixq::prepare(w, cpu_opts(isa, "cpu_f32"));
      const auto* impl = dynamic_cast<const mixq::cpu::ggml::NativePrepared*>(&f32.impl());
      ASSERT_NE(impl, nullptr) << "not prepared natively: " << f32.kernel_name(M);
      // The repacked form streams the file's bytes plus at most 3 % (spread sub-block scales),
      // with the last panel padded to 16 rows.
      const double padded_rows = double((N + 15) / 16 * 16);
      EXPECT_LE(double(impl->weight().bytes()),
                1.03 * double(w.ggml->data.size()) * padded_rows / double(N));
      EXPECT_NE(f32.kernel_name(M).find("<" + tname + ">"), std::string::npos);
      EXPECT_EQ(f32.kernel_name(M).rfind(std::string("cpu_") + isa + "_", 0), 0u) << f32.kernel_name(M);
      const double ef = max_err(run(f32, x, M), ref.exact) / ref.max_exact;
      EXPECT_LE(ef, 1e-5) << f32.kernel_name(M);

      const mixq::PreparedWeight i8 = mixq::prepare(w, cpu_opts(isa, "cpu_i8dot"));
      const std::vector<float> yi = run(i8, x, M);
      const double eq = max_err(yi, ref.q8) / ref.max_q8;
      EXPECT_LE(eq, 1e-5) << i8.kernel_name(M) << " vs the q8 emulation";
      const double ee = max_err(yi, ref.exact) / ref.max_exact;
      EXPECT_LE(ee, 2e-2) << i8.kernel_name(M) << " vs float64";
    }
  }
}

class GgmlNativeAllTypes : public ::testing::TestWithParam<size_t> {};

TEST_P(GgmlNativeAllTypes, MatchesExactDecodeAtEveryIsaAndM) {
  const TypeCase& tc = all_types()[GetParam()];
  const int64_t qk = mixq::formats::ggml_type_info(uint32_t(tc.type))->block_elems;
  // K with a chunk tail that is not a multiple of 64 for the 32-blocks (13 * 32 = 416) and a
  // chunk and a half for the super-blocks (768); N = 37: two full panels and a partial one.
  const int64_t K = qk == 32 ? 416 : 768;
  check_type(tc, 37, K, {1, 3, 4, 8, 9, 17, 64, 513}, 1000 + uint32_t(GetParam()));
}

TEST_P(GgmlNativeAllTypes, LongRows) {
  const TypeCase& tc = all_types()[GetParam()];
  // M = 100 at K = 14336: the prefill path splits the rows into L2-sized tasks (56 + 44 rows),
  // so a task starts inside the packed activations and ends on a partial row group.
  check_type(tc, 19, 14336, {1, 17, 100}, 2000 + uint32_t(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Types, GgmlNativeAllTypes,
                         ::testing::Range<size_t>(0, all_types().size()),
                         [](const ::testing::TestParamInfo<size_t>& i) {
                           return std::string(mixq::formats::ggml_type_name(
                               uint32_t(all_types()[i.param].type)));
                         });

TEST(GgmlNative, DefaultPathsAndOptOut) {
  const TypeCase& tc = all_types()[8];  // Q4_K
  const std::vector<uint8_t> blocks = random_blocks(tc, 40, 512, 7);
  const mixq::QuantizedWeight w =
      mixq::formats::ggml_to_canonical(tc.type, blocks.data(), 40, 512, "test");
  const mixq::PreparedWeight pw = mixq::prepare(w, cpu_opts("", ""));
  const auto* impl = dynamic_cast<const mixq::cpu::ggml::NativePrepared*>(&pw.impl());
  ASSERT_NE(impl, nullptr) << pw.kernel_name(1);
  // cpu_activations = auto: the integer path up to the kernel set's measured row count.
  const std::string name = pw.kernel_name(1);
  const std::string isa = name.substr(4, name.find("_i8dot") - 4);
  const int64_t max_rows = mixq::cpu::ggml::native_i8_max_rows(isa, tc.type);
  EXPECT_NE(name.find("i8dot<Q4_K>"), std::string::npos) << name;
  for (int64_t M : {1, 4, 16, 17, 64, 512}) {
    const bool i8 = M <= max_rows;
    EXPECT_NE(pw.kernel_name(M).find(i8 ? "i8dot<Q4_K>" : "f32gemm<Q4_K>"), std::string::npos)
        << pw.kernel_name(M);
  }
  // cpu_activations = exact / int8 pick one path for every M.
  mixq::PrepareOptions ex = cpu_opts("", "");
  ex.tuning = mixq::Tuning::parse("cpu_activations=exact");
  EXPECT_NE(mixq::prepare(w, ex).kernel_name(1).find("f32gemv<Q4_K>"), std::string::npos);
  EXPECT_NE(mixq::prepare(w, ex).kernel_name(17).find("f32gemm<Q4_K>"), std::string::npos);
  ex.tuning = mixq::Tuning::parse("cpu_activations=int8");
  EXPECT_NE(mixq::prepare(w, ex).kernel_name(4096).find("i8dot<Q4_K>"), std::string::npos);
  // Tuning::cpu_ggml_native = Off prepares the canonical form (same results within its paths).
  mixq::PrepareOptions off = cpu_opts("", "cpu_f32");
  off.tuning = mixq::Tuning::parse("cpu_ggml_native=off");
  const mixq::PreparedWeight canon = mixq::prepare(w, off);
  EXPECT_EQ(canon.kernel_name(1).find('<'), std::string::npos) << canon.kernel_name(1);
  const std::vector<float> x = random_x(5, 512, 3);
  const Refs ref = reference(w, blocks, tc.type, x, 5);
  EXPECT_LE(max_err(run(canon, x, 5), ref.exact) / ref.max_exact, 1e-5);
  EXPECT_LE(max_err(run(mixq::prepare(w, cpu_opts("", "cpu_f32")), x, 5), ref.exact) /
                ref.max_exact, 1e-5);
  // The reference backend takes the same weight (through its canonical fields).
  mixq::PrepareOptions ro;
  ro.backend = mixq::BackendKind::Reference;
  EXPECT_LE(max_err(run(mixq::prepare(w, ro), x, 5), ref.exact) / ref.max_exact, 1e-6);
  // Threads do not change the exact path's bits.
  const mixq::PreparedWeight f32 = mixq::prepare(w, cpu_opts("", "cpu_f32"));
  EXPECT_EQ(run(f32, x, 5, 1), run(f32, x, 5, 2));
}

// Tuning::cpu_avx2_single_row: on the avx512 set, On runs one activation row through the avx2
// set's tile (the same bits as the avx2 set itself), Off keeps the avx512 tile; two rows always
// stay on avx512.
TEST(GgmlNative, Avx2SingleRowOnTheAvx512Set) {
  if (!cpu_has("avx512") || !cpu_has("avx2")) GTEST_SKIP() << "needs the avx512 and avx2 sets";
  for (const TypeCase& tc : all_types()) {
    const std::string tname = mixq::formats::ggml_type_name(uint32_t(tc.type));
    SCOPED_TRACE(tname);
    const int64_t qk = mixq::formats::ggml_type_info(uint32_t(tc.type))->block_elems;
    const int64_t N = 37, K = qk == 32 ? 416 : 768;
    const std::vector<uint8_t> blocks = random_blocks(tc, N, K, 91);
    const mixq::QuantizedWeight w = mixq::formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
    mixq::PrepareOptions on = cpu_opts("avx512", "cpu_i8dot"), off = on;
    on.tuning = mixq::Tuning::parse("cpu_avx2_single_row=on");
    off.tuning = mixq::Tuning::parse("cpu_avx2_single_row=off");
    const mixq::PreparedWeight p_on = mixq::prepare(w, on), p_off = mixq::prepare(w, off),
                               p_avx2 = mixq::prepare(w, cpu_opts("avx2", "cpu_i8dot"));
    EXPECT_EQ(p_on.kernel_name(1), "cpu_avx2_i8dot<" + tname + ">");
    EXPECT_EQ(p_on.kernel_name(2), "cpu_avx512_i8dot<" + tname + ">");
    EXPECT_EQ(p_off.kernel_name(1), "cpu_avx512_i8dot<" + tname + ">");
    const std::vector<float> x = random_x(1, K, 92);
    EXPECT_EQ(run(p_on, x, 1), run(p_avx2, x, 1)) << "not the avx2 set's bits";
    const Refs ref = reference(w, blocks, tc.type, x, 1);
    EXPECT_LE(max_err(run(p_off, x, 1), ref.q8) / ref.max_q8, 1e-5);
  }
}

// The avx2vnni set (vpdpbusd: biased unsigned codes plus the correction, one instruction a quad)
// and the avx2 set (vpmaddubsw pairs; the sign trick for the bias-128 types) form the same exact
// int32 sums and share the f32 epilogue: the same bits at every M, in each form of the integer
// path (register tiles, decoded prefill chunks; the two sets' default switch rows differ, so each
// form is fixed on both sides), K past one chunk.
TEST(GgmlNative, Avx2VnniMatchesAvx2Bits) {
  if (!cpu_has("avx2vnni")) GTEST_SKIP() << "needs AVX-VNNI";
  for (const TypeCase& tc : all_types()) {
    const std::string tname = mixq::formats::ggml_type_name(uint32_t(tc.type));
    SCOPED_TRACE(tname);
    const int64_t qk = mixq::formats::ggml_type_info(uint32_t(tc.type))->block_elems;
    const int64_t N = 37, K = qk == 32 ? 1088 : 1280;
    const std::vector<uint8_t> blocks = random_blocks(tc, N, K, 95);
    const mixq::QuantizedWeight w = mixq::formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
    for (const char* form : {"cpu_ggml_decode_min_rows=2", "cpu_ggml_decode_min_rows=1000"}) {
      mixq::PrepareOptions ov = cpu_opts("avx2vnni", "cpu_i8dot"), o2 = cpu_opts("avx2", "cpu_i8dot");
      ov.tuning = o2.tuning = mixq::Tuning::parse(form);
      const mixq::PreparedWeight pv = mixq::prepare(w, ov), p2 = mixq::prepare(w, o2);
      EXPECT_EQ(pv.kernel_name(1), "cpu_avx2vnni_i8dot<" + tname + ">");
      for (int64_t M : {1, 2, 3, 4, 5, 8, 16, 17, 40, 100}) {
        const std::vector<float> x = random_x(M, K, 96 + uint32_t(M));
        EXPECT_EQ(run(pv, x, M), run(p2, x, M)) << form << ", M " << M;
      }
    }
  }
}

// Both forms of the integer path (Tuning::cpu_ggml_decode_min_rows) of one weight on one kernel
// set, checked against the q8 reference at each M: K chunks decoded once per task from
// `decoded_from` rows (prefill), and register tiles unpacking their own codes at every M.
void expect_integer_forms_match_q8(const mixq::QuantizedWeight& w, const std::vector<uint8_t>& blocks,
                                   GgmlType type, const std::string& isa, int decoded_from,
                                   const std::vector<int64_t>& Ms,
                                   const std::function<std::vector<float>(int64_t M)>& make_x) {
  mixq::PrepareOptions decoded = cpu_opts(isa, "cpu_i8dot"), tiles = decoded;
  decoded.tuning = mixq::Tuning::parse("cpu_ggml_decode_min_rows=" + std::to_string(decoded_from));
  tiles.tuning = mixq::Tuning::parse("cpu_ggml_decode_min_rows=1000");
  const mixq::PreparedWeight pd = mixq::prepare(w, decoded), pt = mixq::prepare(w, tiles);
  for (int64_t M : Ms) {
    const std::vector<float> x = make_x(M);
    const Refs ref = reference(w, blocks, type, x, M);
    ASSERT_GT(ref.max_q8, 0.0);
    EXPECT_LE(max_err(run(pd, x, M), ref.q8) / ref.max_q8, 1e-5) << "decoded, M " << M;
    EXPECT_LE(max_err(run(pt, x, M), ref.q8) / ref.max_q8, 1e-5) << "register tiles, M " << M;
  }
}

// Tuning::cpu_ggml_decode_min_rows: the integer path's two forms for more than one register tile,
// K chunks decoded once per task (prefill) and register tiles unpacking their own codes, on every
// kernel set and type, at 9 and 33 rows (partial tiles and groups), both against the q8 reference.
TEST(GgmlNative, DecodedAndRegisterTileFormsAgree) {
  for (const std::string& isa : {std::string("avx512"), std::string("avx2vnni"), std::string("avx2"), std::string("scalar")}) {
    if (!cpu_has(isa)) continue;
    for (const TypeCase& tc : all_types()) {
      const std::string tname = mixq::formats::ggml_type_name(uint32_t(tc.type));
      SCOPED_TRACE(isa + " " + tname);
      const int64_t qk = mixq::formats::ggml_type_info(uint32_t(tc.type))->block_elems;
      const int64_t N = 37, K = qk == 32 ? 1088 : 1280;  // K past one 1024-chunk
      const std::vector<uint8_t> blocks = random_blocks(tc, N, K, 93);
      const mixq::QuantizedWeight w = mixq::formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
      expect_integer_forms_match_q8(w, blocks, tc.type, isa, 5, {9, 33},
                                    [&](int64_t M) { return random_x(M, K, 94); });
    }
  }
}

// The integer kernels' 16-bit intermediate sums at their limit: every code at its largest
// magnitude (unsigned codes all ones, Q8_0 -128, the IQ4 codebook's -127) against activations
// quantized to +127 (row 0) and -127 (row 1) everywhere, so each pair of products and each sum of
// pairs an AVX2 kernel adds before widening (vpmaddubsw, vpaddw) is as large as it can be; a
// saturated or wrapped lane would miss the q8 reference by far more than 1e-5. Both integer forms
// (register tiles, decoded prefill chunks), every ISA.
TEST(GgmlNative, IntegerSumsAtTheCodeLimits) {
  for (const std::string& isa : {std::string("avx512"), std::string("avx2vnni"), std::string("avx2"), std::string("scalar")}) {
    if (!cpu_has(isa)) continue;
    for (const TypeCase& tc : all_types()) {
      const std::string tname = mixq::formats::ggml_type_name(uint32_t(tc.type));
      SCOPED_TRACE(isa + " " + tname);
      const mixq::formats::GgmlTypeInfo* ti = mixq::formats::ggml_type_info(uint32_t(tc.type));
      const int64_t N = 16, K = 1024, nb = N * (K / ti->block_elems);
      const uint8_t fill = tc.type == GgmlType::Q8_0 ? 0x80 : (tc.type == GgmlType::IQ4_NL || tc.type == GgmlType::IQ4_XS) ? 0x00 : 0xFF;
      std::vector<uint8_t> blocks(static_cast<size_t>(nb * ti->block_bytes), fill);
      for (int64_t i = 0; i < nb; ++i)
        for (int off : tc.f16_fields) {  // 2^-6: finite, positive
          blocks[static_cast<size_t>(i * ti->block_bytes + off)] = 0x00;
          blocks[static_cast<size_t>(i * ti->block_bytes + off + 1)] = 0x24;
        }
      const mixq::QuantizedWeight w = mixq::formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
      expect_integer_forms_match_q8(w, blocks, tc.type, isa, 2, {2, 16}, [&](int64_t M) {
        std::vector<float> x(static_cast<size_t>(M * K));
        for (int64_t m = 0; m < M; ++m)
          for (int64_t k = 0; k < K; ++k) x[static_cast<size_t>(m * K + k)] = m % 2 ? -1.f : 1.f;
        return x;
      });
    }
  }
}

TEST(GgmlNative, HalfPrecisionIoBiasClampAndWorkspace) {
  const TypeCase& tc = all_types()[4];  // Q8_0
  const int64_t N = 21, K = 96, M = 4;
  const std::vector<uint8_t> blocks = random_blocks(tc, N, K, 11);
  const mixq::QuantizedWeight w = mixq::formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "t");
  const std::vector<float> x = random_x(M, K, 12);
  std::vector<uint16_t> xh(x.size());
  std::vector<float> xr(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    xh[i] = mixq::f32_to_f16(x[i]);
    xr[i] = mixq::f16_to_f32(xh[i]);
  }
  std::vector<float> bias(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) bias[n] = 0.25f * float(n % 5) - 0.5f;
  const Refs ref = reference(w, blocks, tc.type, xr, M);
  const mixq::PreparedWeight pw = mixq::prepare(w, cpu_opts("", "cpu_f32"));
  std::vector<uint16_t> y(static_cast<size_t>(M * N), 0x7E00);
  std::vector<unsigned char> ws(mixq::linear_workspace_size(pw, M));
  mixq::ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws.size();
  mixq::Epilogue ep = mixq::Epilogue::relu();
  ep.bias = TensorView(bias.data(), DType::F32, {N});
  mixq::linear(TensorView(xh.data(), DType::F16, {M, K}), pw, TensorView(y.data(), DType::F16, {M, N}),
               ep, ctx);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const double want = std::max(0.0, ref.exact[m * N + n] + bias[n]);
      const double got = mixq::f16_to_f32(y[m * N + n]);
      EXPECT_NEAR(got, want, 1e-3 * (1 + std::fabs(want))) << m << "," << n;
    }
}

TEST(GgmlNative, ValidateRejectsMismatchedBlocks) {
  const TypeCase& tc = all_types()[0];  // Q4_0
  const std::vector<uint8_t> blocks = random_blocks(tc, 8, 64, 5);
  mixq::QuantizedWeight w = mixq::formats::ggml_to_canonical(tc.type, blocks.data(), 8, 64, "t");
  w.validate();
  auto g = std::make_shared<mixq::GgmlBlocks>(*w.ggml);
  g->data.pop_back();
  w.ggml = g;
  try {
    w.validate();
    FAIL() << "no error";
  } catch (const mixq::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected N (8)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mixq::prepare(w, cpu_opts("", "")), mixq::Error);
  g = std::make_shared<mixq::GgmlBlocks>();
  g->type = 99;
  w.ggml = g;
  EXPECT_THROW(w.validate(), mixq::Error);
  // An unknown force_kernel is named.
  w.ggml = mixq::formats::ggml_to_canonical(tc.type, blocks.data(), 8, 64, "t").ggml;
  EXPECT_THROW(mixq::prepare(w, cpu_opts("", "cpu_nonsense")), mixq::Error);
}

}  // namespace
