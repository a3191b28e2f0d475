// End-to-end tests of the mixq command-line tool (the binary at MIXQ_CLI_PATH): quantize ->
// inspect -> dequantize -> matmul on a safetensors file written here, checked against the
// library's own quantizer and a float64 reference; bench --quick; and bad input, which must give
// a non-zero exit, exactly one line on stderr naming the problem, and never a signal.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "formats/safetensors/st_json.hpp"
#include "mixq/formats/gguf.hpp"
#include "mixq/formats/npy.hpp"
#include "mixq/numeric.hpp"
#include "mixq/quantize.hpp"

namespace {

using mixq::DType;

struct RunResult {
  int code = -1;
  bool signaled = false;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = ::testing::TempDir() + "mixq_cli_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(mkdtemp(buf.data()), nullptr);
    dir_ = std::string(buf.data()) + "/";
  }
  static void TearDownTestSuite() {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir_.c_str());
  }

  static std::string path(const std::string& name) { return dir_ + name; }

  // Runs `mixq <args>` with a time limit, capturing stdout and stderr.
  static RunResult run(const std::string& args, int timeout_s = 120) {
    const std::string out = path("stdout.txt"), err = path("stderr.txt");
    const std::string cmd = "timeout -s KILL " + std::to_string(timeout_s) + " '" MIXQ_CLI_PATH
                            "' " + args + " >'" + out + "' 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    RunResult r;
    if (WIFEXITED(status)) {
      r.code = WEXITSTATUS(status);
      // timeout(1) reports a killed child as 128 + 9.
      r.signaled = r.code >= 128;
    } else {
      r.signaled = true;
    }
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  // A failure: non-zero exit (`code` when > 0), no signal, exactly one stderr line holding every
  // needle.
  static void expect_clean_failure(const std::string& args, int code,
                                   const std::vector<std::string>& needles) {
    SCOPED_TRACE("mixq " + args);
    const RunResult r = run(args);
    EXPECT_FALSE(r.signaled) << r.err;
    EXPECT_NE(r.code, 0);
    if (code > 0) {
      EXPECT_EQ(r.code, code) << r.err;
    }
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.back(), '\n') << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line:\n" << r.err;
    for (const std::string& n : needles)
      EXPECT_NE(r.err.find(n), std::string::npos) << "'" << n << "' not in: " << r.err;
  }

  static std::string dir_;
};
std::string CliTest::dir_;

// A minimal independent safetensors writer (not the library's), so that the CLI's reader is
// tested against bytes produced by other code.
struct StTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void write_safetensors(const std::string& file, const std::vector<StTensor>& ts) {
  std::string h = "{\"__metadata__\":{\"format\":\"pt\"}";
  size_t off = 0;
  for (const StTensor& t : ts) {
    h += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) h += (i ? "," : "") + std::to_string(t.shape[i]);
    h += "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + t.bytes.size()) + "]}";
    off += t.bytes.size();
  }
  h += "}";
  while (h.size() % 8) h += ' ';
  std::ofstream f(file, std::ios::binary);
  const uint64_t n = h.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h;
  for (const StTensor& t : ts) f.write(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
}

std::vector<float> normal(size_t n, uint32_t seed, float sigma) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> g(0.f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = g(gen);
  return v;
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> read_f32(const std::string& file, std::vector<int64_t>* shape) {
  const mixq::formats::NpyArray a = mixq::formats::read_npy(file);
  EXPECT_EQ(a.dtype, DType::F32);
  *shape = a.shape;
  return std::vector<float>(a.data.as<float>(), a.data.as<float>() + a.numel());
}

// Fixture file: two matrices (f32 [N=37][K=200] with partial blocks, f16 [24][96]), a 1-D bias
// and an integer tensor that quantize must leave out.
constexpr int64_t kN = 37, kK = 200;
struct Fixture {
  std::vector<float> w;        // [kN][kK]
  std::vector<uint16_t> h;     // [24][96] f16
};
Fixture write_fixture(const std::string& file) {
  Fixture fx;
  fx.w = normal(kN * kK, 1, 0.05f);
  for (float v : normal(24 * 96, 2, 0.1f)) fx.h.push_back(mixq::f32_to_f16(v));
  std::vector<float> bias = normal(kN, 3, 1.f);
  std::vector<int32_t> ints = {1, 2, 3, 4};
  write_safetensors(file, {{"layer.w", "F32", {kN, kK}, as_bytes(fx.w)},
                           {"layer.bias", "F32", {kN}, as_bytes(bias)},
                           {"layer.h", "F16", {24, 96}, as_bytes(fx.h)},
                           {"ids", "I32", {2, 2}, as_bytes(ints)}});
  return fx;
}

TEST_F(CliTest, QuantizeInspectDequantizeMatmulEndToEnd) {
  const std::string in = path("model.safetensors");
  const Fixture fx = write_fixture(in);
  const int64_t M = 5;
  std::vector<float> x = normal(M * kK, 4, 1.f);
  mixq::formats::write_npy(path("x.npy"), DType::F32, {M, kK}, x.data());
  std::vector<uint16_t> x16(x.size());
  for (size_t i = 0; i < x.size(); ++i) x16[i] = mixq::f32_to_f16(x[i]);
  mixq::formats::write_npy(path("x16.npy"), DType::F16, {M, kK}, x16.data());
  std::vector<float> bias = normal(kN, 5, 1.f);
  mixq::formats::write_npy(path("bias.npy"), DType::F32, {kN}, bias.data());

  for (const std::string scheme : {"w4g128", "w4g32asym", "w4g128zp", "w8g128", "fp8b128"}) {
    SCOPED_TRACE(scheme);
    const std::string q = path("q_" + scheme + ".safetensors");
    RunResult r = run("quantize '" + in + "' -o '" + q + "' --scheme " + scheme);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("layer.bias"), std::string::npos) << "left-out tensors are listed";

    r = run("inspect '" + q + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* needle : {"layer.w", "layer.h", "37", "200"})
      EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " not in\n" << r.out;
    EXPECT_NE(r.out.find(scheme), std::string::npos) << "scheme in metadata:\n" << r.out;

    // Dequantized values: exactly what the library's own quantizer + dequantizer produce.
    r = run("dequantize '" + q + "' layer.w -o '" + path("deq.npy") + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<int64_t> shape;
    const std::vector<float> deq = read_f32(path("deq.npy"), &shape);
    ASSERT_EQ(shape, (std::vector<int64_t>{kN, kK}));
    const mixq::QuantizedWeight expect_w = mixq::quantize_weight(
        mixq::TensorView(const_cast<float*>(fx.w.data()), DType::F32, {kN, kK}),
        mixq::parse_scheme(scheme));
    const std::vector<float> expect = mixq::dequantize_to_f32(expect_w);
    ASSERT_EQ(deq.size(), expect.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < deq.size(); ++i) mismatches += std::memcmp(&deq[i], &expect[i], 4) != 0;
    EXPECT_EQ(mismatches, 0u);
    double wdiff = 0;  // and close to the original (quantization actually happened, not a copy)
    for (size_t i = 0; i < deq.size(); ++i) wdiff = std::max(wdiff, double(std::fabs(deq[i] - fx.w[i])));
    EXPECT_GT(wdiff, 0.0);
    EXPECT_LT(wdiff, 0.05);

    // matmul vs float64 on the dequantized weights, with and without bias, f32 and f16 inputs.
    for (const std::string backend : {"ref", "cpu"}) {
      for (const bool use_bias : {false, true}) {
        for (const bool f16 : {false, true}) {
          SCOPED_TRACE(backend + (use_bias ? " bias" : "") + (f16 ? " f16" : ""));
          std::string args = "matmul --weights '" + q + ":layer.w' --input '" +
                             path(f16 ? "x16.npy" : "x.npy") + "' -o '" + path("y.npy") +
                             "' --backend " + backend;
          if (use_bias) args += " --bias '" + path("bias.npy") + "'";
          r = run(args);
          ASSERT_EQ(r.code, 0) << r.err;
          const std::vector<float> y = read_f32(path("y.npy"), &shape);
          ASSERT_EQ(shape, (std::vector<int64_t>{M, kN}));
          double num = 0, den = 0;
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < kN; ++n) {
              double ref = use_bias ? bias[n] : 0.0;
              for (int64_t k = 0; k < kK; ++k) {
                const double xv = f16 ? mixq::f16_to_f32(x16[m * kK + k]) : x[m * kK + k];
                ref += xv * double(deq[n * kK + k]);
              }
              num += (y[m * kN + n] - ref) * (y[m * kN + n] - ref);
              den += ref * ref;
            }
          EXPECT_LE(std::sqrt(num / den), 1e-5);
        }
      }
    }
  }

  // A 2-D float tensor excluded with --skip is kept losslessly (dense) and still usable.
  const std::string q = path("q_skip.safetensors");
  RunResult r = run("quantize '" + in + "' -o '" + q + "' --scheme w4g128 --skip 'layer\\.h'");
  ASSERT_EQ(r.code, 0) << r.err;
  r = run("dequantize '" + q + "' layer.h -o '" + path("h.npy") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<int64_t> shape;
  const std::vector<float> h = read_f32(path("h.npy"), &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{24, 96}));
  for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h[i], mixq::f16_to_f32(fx.h[i])) << i;
}

// --format gguf: the selected matrix becomes Q8_0 (bytes of ggml's reference encoder), the other
// float tensors are copied in their own type; inspect / dequantize / matmul read the GGUF back.
TEST_F(CliTest, QuantizeToGgufAndReadBack) {
  const std::string in = path("gguf_src.safetensors");
  const Fixture fx = write_fixture(in);
  const std::string g = path("out.gguf");
  RunResult r = run("quantize '" + in + "' -o '" + g + "' --format gguf --scheme q8_0 --only 'layer\\.h'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("ids"), std::string::npos) << "integer tensors are left out and listed";
  r = run("inspect '" + g + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle : {"gguf v3", "layer.h", "Q8_0", "[24, 96]", "8.500", "layer.w", "F32",
                             "[37, 200]", "layer.bias", "mixq.scheme"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " not in\n" << r.out;
  EXPECT_EQ(r.out.find("ids"), std::string::npos);

  // Q8_0 by hand (formats.md §1.5): d = amax/127 rounded to f16, q = round(x/d) half away.
  r = run("dequantize '" + g + "' layer.h -o '" + path("gh.npy") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<int64_t> shape;
  const std::vector<float> h = read_f32(path("gh.npy"), &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{24, 96}));
  for (int64_t b = 0; b < 24 * 96 / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(mixq::f16_to_f32(fx.h[b * 32 + i])));
    const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
    const float dh = mixq::f16_to_f32(mixq::f32_to_f16(d));
    for (int i = 0; i < 32; ++i) {
      const float q = std::round(mixq::f16_to_f32(fx.h[b * 32 + i]) * id);
      ASSERT_EQ(h[b * 32 + i], q * dh) << b << " " << i;
    }
  }
  r = run("dequantize '" + g + "' layer.w -o '" + path("gw.npy") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_f32(path("gw.npy"), &shape), fx.w) << "copied F32 tensors stay bit-exact";

  std::vector<float> x = normal(3 * 96, 6, 1.f);
  mixq::formats::write_npy(path("xg.npy"), DType::F32, {3, 96}, x.data());
  r = run("matmul --weights '" + g + ":layer.h' --input '" + path("xg.npy") + "' -o '" +
          path("yg.npy") + "' --backend cpu");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<float> y = read_f32(path("yg.npy"), &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{3, 24}));
  double num = 0, den = 0;
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t n = 0; n < 24; ++n) {
      double ref = 0;
      for (int64_t k = 0; k < 96; ++k) ref += double(x[m * 96 + k]) * h[n * 96 + k];
      num += (y[m * 24 + n] - ref) * (y[m * 24 + n] - ref);
      den += ref * ref;
    }
  EXPECT_LE(std::sqrt(num / den), 1e-5);

  // Schemes and formats must match; K = 200 is not a multiple of Q4_0's 32 (the tensor is named).
  expect_clean_failure("quantize '" + in + "' -o '" + g + "' --format gguf --scheme w4g128", 2,
                       {"w4g128", "GGUF"});
  expect_clean_failure("quantize '" + in + "' -o '" + g + "' --scheme q4_k", 2, {"q4_k", "--format gguf"});
  expect_clean_failure("quantize '" + in + "' -o '" + path("bad.gguf") + "' --format gguf --scheme q4_0", 1,
                       {"layer.w", "200", "32"});
}

TEST_F(CliTest, BenchQuickRunsAndWritesJson) {
  const std::string json = path("bench.json");
  // the CPU driver: its default scheme list is what this test checks (a GPU machine would pick cuda)
  const RunResult r = run("bench --quick --backend cpu --json '" + json + "'", 300);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string j = slurp(json);
  EXPECT_NE(j.find("\"results\""), std::string::npos);
  EXPECT_NE(j.find("\"command\": \"mixq bench --quick"), std::string::npos);
  for (const char* s : {"\"dense\"", "\"w4g128\"", "\"w4g32asym\"", "\"w4g128zp\"", "\"w8g128\"",
                        "\"fp8b128\"", "\"w8g128:int8\"", "\"fp8b128:fp8\""})
    EXPECT_NE(j.find(s), std::string::npos) << s;
  EXPECT_EQ(j.find("\"ok\": false"), std::string::npos);
  EXPECT_NE(j.find("\"ok\": true"), std::string::npos);
  EXPECT_NE(r.out.find("x dense"), std::string::npos) << r.out;
  // the settling replays are the CUDA driver's: none on the CPU, and the JSON says so
  EXPECT_NE(j.find("\"settle_ms\": 0,"), std::string::npos) << j.substr(0, 400);
}

TEST_F(CliTest, BenchSettleMsIsCheckedOnEveryBackend) {
  // refused before any case runs, naming the option, its range and the value given
  expect_clean_failure("bench --quick --backend cpu --settle-ms -5", 2, {"--settle-ms", "[0, 60000]", "-5"});
  expect_clean_failure("bench --quick --backend cpu --settle-ms 60001", 2, {"--settle-ms", "60001"});
  expect_clean_failure("bench --quick --backend cpu --settle-ms 1e3", 2, {"--settle-ms", "1e3"});
  expect_clean_failure("bench --op moe --quick --backend cpu --settle-ms -1", 2, {"--settle-ms", "-1"});
  const RunResult r = run("bench --quick --backend cpu --settle-ms 50", 300);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

TEST_F(CliTest, BenchFailsWhenAnErrorExceedsTolerance) {
  // With every tolerance scaled down to nothing, the (correct) results must be flagged.
  const RunResult r = run("bench --shapes 256x130 --m 3 --schemes w4g128,w8g128:int8 --tol-scale 1e-9");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("exceed their error tolerance"), std::string::npos) << r.err;
}

TEST_F(CliTest, BenchRejectsBadOptions) {
  expect_clean_failure("bench --m 1,x", 2, {"--m", "'x'"});
  expect_clean_failure("bench --schemes w4g128,w9", 2, {"w9"});
  expect_clean_failure("bench --shapes 64by64", 2, {"64by64"});
  expect_clean_failure("bench --backend tpu", 2, {"tpu"});
}

TEST_F(CliTest, BenchMoeQuickRunsAndWritesJson) {
  const std::string json = path("bench_moe.json");
  const RunResult r = run("bench --op moe --quick --backend cpu --m 1,9 --json '" + json + "'", 300);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string j = slurp(json);
  EXPECT_NE(j.find("\"command\": \"mixq bench --op moe --quick"), std::string::npos) << j;
  EXPECT_NE(j.find("\"settle_ms\": 0,"), std::string::npos) << j.substr(0, 400);
  for (const char* s : {"\"op\": \"moe\"", "\"model\": \"tiny\"", "\"model\": \"tiny-wide\"",
                        "\"routing\": \"uniform\"", "\"routing\": \"skewed\"",
                        "\"scheme\": \"w4g128\"", "\"scheme\": \"w8g128\"", "\"gate_up_us\"",
                        "\"down_us\"", "\"moe_mlp_us\"", "\"baseline_us\"",
                        "\"weight_bytes_touched\"", "\"gb_per_s\"", "\"tflop_per_s\"",
                        "\"active_experts\"", "\"rel_err\"", "\"read_ceiling_gb_s\""})
    EXPECT_NE(j.find(s), std::string::npos) << s;
  EXPECT_EQ(j.find("\"ok\": false"), std::string::npos) << j;
  // 2 models x 2 routings x 2 schemes x 2 batch sizes
  size_t rows = 0;
  for (size_t at = j.find("\"ok\": true"); at != std::string::npos; at = j.find("\"ok\": true", at + 1))
    ++rows;
  EXPECT_EQ(rows, 16u) << j;
  EXPECT_NE(r.out.find("tiny-wide"), std::string::npos) << r.out;
}

TEST_F(CliTest, BenchMoeFailsWhenAnErrorExceedsTolerance) {
  const RunResult r = run("bench --op moe --models tiny --m 12 --routing uniform --schemes w8g128 "
                          "--tol-scale 1e-9");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("exceed their error tolerance"), std::string::npos) << r.err;
}

TEST_F(CliTest, BenchConvRunsAndWritesJson) {
  const std::string json = path("bench_conv.json");
  const RunResult r = run("bench --op conv2d --backend cpu --threads 2 --reps 2 --warmup 0 "
                          "--conv '1,5,9,9,12,3,3,2,1;2,64,4,4,8,1,1,1,0' --schemes w4g32,w8g32 "
                          "--json '" + json + "'", 300);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string j = slurp(json);
  for (const char* s : {"\"op\": \"conv2d\"", "\"scheme\": \"w4g32\"", "\"scheme\": \"w8g32\"",
                        "\"block\": \"pc\"", "\"block\": \"g32\"", "\"us\"", "\"rel_err\""})
    EXPECT_NE(j.find(s), std::string::npos) << s;
  EXPECT_EQ(j.find("\"ok\": false"), std::string::npos) << j;
  size_t rows = 0;
  for (size_t at = j.find("\"ok\": true"); at != std::string::npos; at = j.find("\"ok\": true", at + 1))
    ++rows;
  EXPECT_EQ(rows, 4u) << j;  // 2 layers x 2 schemes
}

TEST_F(CliTest, BenchConvRejectsBadOptions) {
  expect_clean_failure("bench --op conv2d --conv 1,2,3", 2, {"--conv", "1,2,3"});
  expect_clean_failure("bench --op conv2d --conv 1,2,3,3,4,3,3,0,1", 2, {"--conv", "stride"});
  expect_clean_failure("bench --op conv2d --layout nhcw", 2, {"--layout", "nhcw"});
  expect_clean_failure("bench --op conv2d --act f64", 2, {"--act", "f64"});
  expect_clean_failure("bench --op conv2d --tune wo_token_tile=7x", 2, {"--tune", "wo_token_tile"});
}

TEST_F(CliTest, BenchMoeRejectsBadOptions) {
  expect_clean_failure("bench --op moe --routing zipf", 2, {"--routing", "zipf"});
  expect_clean_failure("bench --op moe --models gpt5", 2, {"--models", "gpt5"});
  expect_clean_failure("bench --op moe --m 0", 2, {"--m"});
  expect_clean_failure("bench --op moe --schemes w9", 2, {"w9"});
  expect_clean_failure("bench --op moe --backend ref", 2, {"--backend", "ref"});
  expect_clean_failure("bench --op conv", 2, {"--op", "conv"});
  expect_clean_failure("bench --op moe --shapes 64x64", 2, {"--shapes"});
  expect_clean_failure("bench --op moe --tol-scale -1", 2, {"--tol-scale"});
}

// ---- mixq bench FILE

namespace json = mixq::formats::json;

json::Value read_json(const std::string& file) {
  const std::string text = slurp(file);
  return json::parse(text.data(), text.size(), file);  // strict: the output must be valid JSON
}

const json::Value& member(const json::Value& v, const std::string& key) {
  const json::Value* m = v.get(key);
  if (!m) throw std::runtime_error("JSON member '" + key + "' is missing");
  return *m;
}

// A GGUF file holding what a model holds: two Q8_0 matrices of one shape (a group of 2), a Q4_0
// matrix of another shape, an F16 matrix, a 1-D norm, a token embedding and a 3-D tensor (the
// last three are skipped, each for its reason).
void write_bench_gguf(const std::string& file) {
  using mixq::formats::GgmlType;
  static const std::vector<float> a = normal(64 * 96, 21, 0.05f), b = normal(64 * 96, 22, 0.05f),
                                   c = normal(40 * 64, 23, 0.05f), h = normal(24 * 32, 24, 0.05f),
                                   norm = normal(96, 25, 1.f), emb = normal(50 * 96, 26, 0.05f),
                                   cube = normal(2 * 8 * 32, 27, 0.05f);
  mixq::formats::save_gguf(file, {{"blk.0.attn_q.weight", {64, 96}, GgmlType::Q8_0, a.data()},
                                  {"blk.0.attn_norm.weight", {96}, GgmlType::F32, norm.data()},
                                  {"token_embd.weight", {50, 96}, GgmlType::Q8_0, emb.data()},
                                  {"blk.1.attn_q.weight", {64, 96}, GgmlType::Q8_0, b.data()},
                                  {"blk.0.ffn_down.weight", {40, 64}, GgmlType::Q4_0, c.data()},
                                  {"blk.0.ffn_gate_exps.weight", {2, 8, 32}, GgmlType::F32, cube.data()},
                                  {"output.weight", {24, 32}, GgmlType::F16, h.data()}});
}

TEST_F(CliTest, BenchFileGgufGroupsSkipsAndSumsTheDecodeStep) {
  const std::string g = path("bench_model.gguf"), j = path("bench_file.json");
  write_bench_gguf(g);
  const RunResult r = run("bench '" + g + "' --backend cpu --m 1,3 --reps 2 --threads 1 --json '" + j + "'", 300);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const char* needle : {"3 group(s)", "Q8_0", "Q4_0", "F16", "96x64", "64x40", "decode step",
                             "token_embd.weight", "embedding", "1-D", "3-D", "tok/s", "x dense"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " not in\n" << r.out;

  const json::Value doc = read_json(j);
  EXPECT_EQ(member(doc, "backend").string, "cpu");
  EXPECT_EQ(member(doc, "threads").integer, 1);
  EXPECT_EQ(member(doc, "format").string, "gguf v3");
  std::map<std::string, std::string> skipped;
  for (const json::Value& s : member(doc, "skipped").array)
    skipped[member(s, "name").string] = member(s, "reason").string;
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_NE(skipped["token_embd.weight"].find("embedding"), std::string::npos);
  EXPECT_NE(skipped["blk.0.attn_norm.weight"].find("1-D"), std::string::npos);
  EXPECT_NE(skipped["blk.0.ffn_gate_exps.weight"].find("3-D"), std::string::npos);

  const auto& groups = member(doc, "groups").array;
  ASSERT_EQ(groups.size(), 3u);
  // File order of first appearance; the two Q8_0 [64, 96] matrices are one group of two.
  EXPECT_EQ(member(groups[0], "type").string, "Q8_0");
  EXPECT_EQ(member(groups[0], "K").integer, 96);
  EXPECT_EQ(member(groups[0], "N").integer, 64);
  EXPECT_EQ(member(groups[0], "count").integer, 2);
  ASSERT_EQ(member(groups[0], "tensors").array.size(), 2u);
  EXPECT_EQ(member(groups[0], "tensors").array[1].string, "blk.1.attn_q.weight");
  EXPECT_EQ(member(groups[0], "file_bytes").integer, 64 * 96 / 32 * 34);
  EXPECT_EQ(member(groups[1], "type").string, "Q4_0");
  EXPECT_EQ(member(groups[1], "count").integer, 1);
  EXPECT_EQ(member(groups[1], "file_bytes").integer, 40 * 64 / 32 * 18);
  EXPECT_EQ(member(groups[2], "type").string, "F16");

  // Every result is checked and timed; the decode step is the sum of count x time.
  const std::vector<int64_t> ms = {1, 3};
  for (size_t mi = 0; mi < ms.size(); ++mi) {
    double mixq_us = 0, dense_us = 0;
    for (const json::Value& grp : groups) {
      const json::Value& res = member(grp, "results").array.at(mi);
      EXPECT_EQ(member(res, "M").integer, ms[mi]);
      ASSERT_EQ(res.get("unsupported"), nullptr) << member(grp, "type").string;
      EXPECT_TRUE(member(res, "ok").boolean);
      EXPECT_GT(member(res, "time_us").number, 0);
      EXPECT_GT(member(res, "dense_us").number, 0);
      EXPECT_FALSE(member(res, "kernel").string.empty());
      EXPECT_LE(member(res, "rel_err").number, member(res, "tol").number);
      EXPECT_NEAR(member(res, "speedup_vs_dense").number,
                  member(res, "dense_us").number / member(res, "time_us").number, 1e-3);
      const double count = static_cast<double>(member(grp, "count").integer);
      mixq_us += count * member(res, "time_us").number;
      dense_us += count * member(res, "dense_us").number;
    }
    const json::Value& step = member(doc, "decode_step").array.at(mi);
    EXPECT_EQ(member(step, "M").integer, ms[mi]);
    EXPECT_NEAR(member(step, "mixq_ms").number, mixq_us * 1e-3, 1e-5 * mixq_us + 1e-6);
    EXPECT_NEAR(member(step, "dense_ms").number, dense_us * 1e-3, 1e-5 * dense_us + 1e-6);
    EXPECT_NEAR(member(step, "mixq_tokens_per_s").number, ms[mi] * 1e6 / mixq_us, 1e-4 * ms[mi] * 1e6 / mixq_us);
    EXPECT_EQ(member(step, "unsupported_groups").integer, 0);
  }

  // --only / --skip select by name; a selection that leaves nothing is an error naming the file.
  RunResult o = run("bench '" + g + "' --backend cpu --m 2 --reps 1 --threads 1 --only 'attn_q' --skip 'blk\\.1\\.' "
                    "--json '" + j + "'");
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  const json::Value sel = read_json(j);
  ASSERT_EQ(member(sel, "groups").array.size(), 1u);
  EXPECT_EQ(member(member(sel, "groups").array[0], "count").integer, 1);
  EXPECT_NE(o.out.find("excluded by --skip"), std::string::npos) << o.out;
  expect_clean_failure("bench '" + g + "' --backend cpu --only 'no_such_weight'", 1,
                       {"bench_model.gguf", "no 2-D weight"});

  // --force-kernel reaches the prepared weights: at M = 1 the exact f32 kernel instead of the
  // int8-dot default (and its tighter tolerance holds).
  o = run("bench '" + g + "' --backend cpu --m 1 --reps 1 --threads 1 --only 'ffn_down' --force-kernel cpu_f32 "
          "--json '" + j + "'");
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  const json::Value forced = member(member(read_json(j), "groups").array.at(0), "results").array.at(0);
  EXPECT_EQ(member(forced, "kernel").string.find("i8dot"), std::string::npos) << member(forced, "kernel").string;
  EXPECT_LE(member(forced, "tol").number, 1e-5);
  EXPECT_TRUE(member(forced, "ok").boolean);
  expect_clean_failure("bench '" + g + "' --tune no_such_knob=1", 2, {"--tune", "no_such_knob"});
}

TEST_F(CliTest, BenchFileSafetensorsShardedAndToleranceFailures) {
  // mixq's own safetensors layout, written by quantize: two quantized matrices.
  const std::string in = path("bf_src.safetensors"), q = path("bf_w4.safetensors");
  write_fixture(in);
  ASSERT_EQ(run("quantize '" + in + "' -o '" + q + "' --scheme w4g32asym").code, 0);
  RunResult r = run("bench '" + q + "' --backend cpu --m 1,5 --reps 2 --threads 2", 300);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const char* needle : {"2 group(s)", "200x37", "96x24", "g32", "decode step"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " not in\n" << r.out;
  // A sharded FP8-block checkpoint (DeepSeek layout; N and K not multiples of 128) given as the
  // directory holding its index: the two up_proj weights sit in different shards, one group.
  const std::string dir = path("fp8_sharded");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  std::mt19937 gen(41);
  std::vector<uint8_t> codes(300 * 200);
  for (uint8_t& b : codes) {
    do b = static_cast<uint8_t>(gen());
    while ((b & 0x7F) == 0x7F);  // no NaN codes
  }
  const std::vector<float> scale_inv = {2e-3f, 3e-3f, 1e-3f, 4e-3f, 2.5e-3f, 1.5e-3f};
  const std::vector<uint16_t> norm(200, 0x3F80);  // bf16 1.0
  for (int shard = 0; shard < 2; ++shard) {
    const std::string l = "model.layers." + std::to_string(shard) + ".mlp.up_proj.";
    std::vector<StTensor> ts = {{l + "weight", "F8_E4M3", {300, 200}, codes},
                                {l + "weight_scale_inv", "F32", {3, 2}, as_bytes(scale_inv)}};
    if (shard == 0) ts.push_back({"model.layers.0.norm.weight", "BF16", {200}, as_bytes(norm)});
    write_safetensors(dir + "/model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors", ts);
  }
  {
    std::ofstream idx(dir + "/model.safetensors.index.json");
    idx << R"({"metadata": {}, "weight_map": {)"
        << R"("model.layers.0.mlp.up_proj.weight": "model-00001-of-00002.safetensors",)"
        << R"("model.layers.0.mlp.up_proj.weight_scale_inv": "model-00001-of-00002.safetensors",)"
        << R"("model.layers.0.norm.weight": "model-00001-of-00002.safetensors",)"
        << R"("model.layers.1.mlp.up_proj.weight": "model-00002-of-00002.safetensors",)"
        << R"("model.layers.1.mlp.up_proj.weight_scale_inv": "model-00002-of-00002.safetensors"}})";
  }
  const std::string fj = path("bench_fp8.json");
  r = run("bench '" + dir + "' --backend cpu --m 1,2 --reps 2 --threads 1 --json '" + fj + "'", 300);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json::Value fdoc = read_json(fj);
  ASSERT_EQ(member(fdoc, "groups").array.size(), 1u) << r.out;
  const json::Value& fg = member(fdoc, "groups").array[0];
  EXPECT_EQ(member(fg, "type").string, "fp8 128x128");
  EXPECT_EQ(member(fg, "count").integer, 2);
  EXPECT_EQ(member(fg, "K").integer, 200);
  EXPECT_EQ(member(fg, "N").integer, 300);
  EXPECT_EQ(member(fg, "file_bytes").integer, 300 * 200 + 24);
  for (const json::Value& res : member(fg, "results").array) EXPECT_TRUE(member(res, "ok").boolean);
  ASSERT_EQ(member(fdoc, "skipped").array.size(), 1u);
  EXPECT_EQ(member(member(fdoc, "skipped").array[0], "name").string, "model.layers.0.norm.weight");
  // --json must not overwrite any file of the checkpoint (here a shard).
  expect_clean_failure("bench '" + dir + "' --json '" + dir + "/model-00002-of-00002.safetensors'", 2, {"--json"});

  // The checks are live: with the tolerances scaled to nothing, every row fails, exit 1.
  r = run("bench '" + q + "' --backend cpu --m 3 --reps 1 --tol-scale 1e-9");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("exceed their error tolerance"), std::string::npos) << r.err;
}

TEST_F(CliTest, BenchFileRejectsBadInput) {
  const std::string g = path("bench_bad.gguf");
  write_bench_gguf(g);
  {
    std::ofstream f(path("bench_garbage.gguf"), std::ios::binary);
    f << "GGUF but not really a GGUF file";
  }
  {  // a valid file with nothing to time
    const std::vector<float> v = normal(8, 31, 1.f);
    mixq::formats::save_gguf(path("bench_vectors.gguf"),
                             {{"norm.weight", {8}, mixq::formats::GgmlType::F32, v.data()}});
  }
  expect_clean_failure("bench '" + path("bench_missing.gguf") + "'", 1, {"bench_missing.gguf"});
  expect_clean_failure("bench '" + path("bench_garbage.gguf") + "'", 1, {"bench_garbage.gguf"});
  expect_clean_failure("bench '" + path("bench_vectors.gguf") + "'", 1,
                       {"bench_vectors.gguf", "no 2-D weight", "norm.weight"});
  expect_clean_failure("bench '" + g + "' --shapes 64x64", 2, {"--shapes", "FILE"});
  expect_clean_failure("bench '" + g + "' --schemes w4g128", 2, {"--schemes"});
  expect_clean_failure("bench '" + g + "' '" + g + "'", 2, {"FILE"});
  expect_clean_failure("bench --only attn", 2, {"--only", "FILE"});
  expect_clean_failure("bench '" + g + "' --only '(a'", 2, {"--only"});
  expect_clean_failure("bench '" + g + "' --m 0", 2, {"--m"});
  expect_clean_failure("bench '" + g + "' --backend tpu", 2, {"tpu"});
  expect_clean_failure("bench '" + g + "' --json '" + g + "'", 2, {"--json"});
  expect_clean_failure("bench '" + g + "' --json '" + path("no_dir/x.json") + "'", 1, {"no_dir"});
}

TEST_F(CliTest, EverySubcommandHasHelp) {
  for (const char* c : {"bench", "quantize", "inspect", "dequantize", "matmul"}) {
    const RunResult r = run(std::string(c) + " --help");
    EXPECT_EQ(r.code, 0) << c;
    EXPECT_EQ(r.out.rfind("usage: mixq " + std::string(c), 0), 0u) << r.out;
  }
  const RunResult r = run("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("matmul"), std::string::npos);
}

TEST_F(CliTest, BadInputFailsCleanly) {
  const std::string in = path("bad_model.safetensors");
  write_fixture(in);
  const std::string q = path("bad_q.safetensors");
  ASSERT_EQ(run("quantize '" + in + "' -o '" + q + "' --scheme w8g128").code, 0);
  std::vector<float> x = normal(3 * (kK + 1), 9, 1.f);
  mixq::formats::write_npy(path("x_wrong.npy"), DType::F32, {3, kK + 1}, x.data());
  mixq::formats::write_npy(path("x_ok.npy"), DType::F32, {3, kK}, x.data());
  std::vector<int32_t> ints(3 * kK, 1);
  mixq::formats::write_npy(path("x_int.npy"), DType::I32, {3, kK}, ints.data());

  // Garbage and truncated files.
  {
    std::ofstream g(path("garbage.bin"), std::ios::binary);
    std::mt19937 gen(11);
    for (int i = 0; i < 4096; ++i) g.put(static_cast<char>(gen()));
  }
  const std::string full = slurp(q);
  {
    std::ofstream t(path("truncated.safetensors"), std::ios::binary);
    t.write(full.data(), static_cast<std::streamsize>(full.size() / 2));
  }
  const std::string npy = slurp(path("x_ok.npy"));
  {
    std::ofstream t(path("truncated.npy"), std::ios::binary);
    t.write(npy.data(), static_cast<std::streamsize>(npy.size() - 7));
  }

  expect_clean_failure("inspect '" + path("missing.safetensors") + "'", 1, {"missing.safetensors"});
  expect_clean_failure("inspect '" + path("garbage.bin") + "'", 1, {"garbage.bin"});
  expect_clean_failure("inspect '" + path("truncated.safetensors") + "'", 1, {"truncated.safetensors"});
  expect_clean_failure("dequantize '" + path("truncated.safetensors") + "' layer.w -o '" +
                           path("o.npy") + "'", 1, {"truncated.safetensors"});
  expect_clean_failure("quantize '" + path("garbage.bin") + "' -o '" + path("o.st") +
                           "' --scheme w4g128", 1, {"garbage.bin"});
  expect_clean_failure("dequantize '" + q + "' no.such.tensor -o '" + path("o.npy") + "'", 1,
                       {"no.such.tensor"});
  // matmul: wrong K, wrong dtype, truncated input, missing input, bad weight spec, bad bias.
  const std::string wq = "matmul --weights '" + q + ":layer.w' -o '" + path("y.npy") + "' ";
  expect_clean_failure(wq + "--input '" + path("x_wrong.npy") + "'", 1, {"x_wrong.npy", "K"});
  expect_clean_failure(wq + "--input '" + path("x_int.npy") + "'", 1, {"x_int.npy", "float"});
  expect_clean_failure(wq + "--input '" + path("truncated.npy") + "'", 1, {"truncated.npy"});
  expect_clean_failure(wq + "--input '" + path("nope.npy") + "'", 1, {"nope.npy"});
  expect_clean_failure(wq + "--input '" + path("x_ok.npy") + "' --bias '" + path("x_ok.npy") + "'",
                       1, {"bias"});
  expect_clean_failure("matmul --weights '" + path("nofile") + ":w' --input '" + path("x_ok.npy") +
                           "' -o '" + path("y.npy") + "'", 1, {"nofile"});
  expect_clean_failure("matmul --weights nocolon --input x.npy -o y.npy", 2, {"FILE:TENSOR"});
  expect_clean_failure(wq + "--input '" + path("x_ok.npy") + "' --backend tpu", 2, {"tpu"});
  // Unknown scheme, unknown subcommand, unknown option, missing arguments.
  expect_clean_failure("quantize '" + in + "' -o '" + path("o.st") + "' --scheme w5g7", 2, {"w5g7"});
  expect_clean_failure("frobnicate", 2, {"frobnicate"});
  expect_clean_failure("inspect --frob x", 2, {"--frob"});
  expect_clean_failure("quantize", 2, {"quantize"});
  expect_clean_failure("quantize '" + in + "' --scheme w4g128", 2, {"-o"});
  expect_clean_failure("quantize '" + in + "' -o '" + path("o.st") + "'", 2, {"--scheme"});
  expect_clean_failure("dequantize '" + q + "'", 2, {"TENSOR"});
  expect_clean_failure("matmul --input x.npy -o y.npy", 2, {"--weights"});
  expect_clean_failure("inspect", 2, {"FILE"});
  expect_clean_failure("bench --reps", 2, {"--reps"});
  // No argument at all prints the usage and exits 2 (not a crash).
  const RunResult r = run("");
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(r.signaled);
}

}  // namespace
