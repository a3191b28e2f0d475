// AWQ GEMM: worked examples of formats.md §4.1, round trips, independent decoder, file loading.
#include <gtest/gtest.h>

#include <random>

#include "mixq/formats/awq.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/safetensors.hpp"
#include "mixq/numeric.hpp"
#include "test_safetensors_util.hpp"

using namespace mixq;
using namespace mixq::formats;
using mixq_test::expect_error;
using mixq_test::ScratchDir;

namespace {

GroupedIntWeight random_awq(int64_t K, int64_t N, int64_t g, uint32_t seed) {
  std::mt19937 rng(seed);
  GroupedIntWeight w;
  w.bits = 4;
  w.K = K;
  w.N = N;
  w.group_size = g;
  w.groups = (K + g - 1) / g;
  w.q.resize(K * N);
  for (auto& q : w.q) q = static_cast<uint8_t>(rng() % 16);
  w.zeros.resize(w.groups * N);
  for (auto& z : w.zeros) z = static_cast<int32_t>(rng() % 16);
  w.scales.resize(w.groups * N);
  std::uniform_real_distribution<float> u(0.001f, 0.1f);
  for (auto& s : w.scales) s = f16_to_f32(f32_to_f16(u(rng)));
  return w;
}

// From the spec text: nibble i of word c holds column 8c + ORDER[i].
uint32_t spec_nibble(const std::vector<int32_t>& words, int64_t cols, int64_t row, int64_t n) {
  static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const uint32_t word = static_cast<uint32_t>(words[row * cols + n / 8]);
  for (int i = 0; i < 8; ++i)
    if (order[i] == n % 8) return (word >> (4 * i)) & 0xF;
  return 99;
}

TEST(Awq, WorkedExamples) {
  AwqPacked p;
  p.K = 1;
  p.N = 8;
  p.G = 1;
  p.qweight = {0x76543210};
  p.qzeros = {0};
  p.scale_type = DType::F16;
  p.scales.assign(16, 0);
  for (int i = 0; i < 8; ++i) p.scales[2 * i + 1] = 0x3C;  // 1.0
  GroupedIntWeight w = awq_unpack(awq_view(p), 1, "ex");
  const int cols_a[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int n = 0; n < 8; ++n) EXPECT_EQ(w.q[n], cols_a[n]);
  p.qweight = {static_cast<int32_t>(0x8F3A61C7u)};
  w = awq_unpack(awq_view(p), 1, "ex");
  const int cols_b[8] = {7, 10, 12, 3, 1, 15, 6, 8};
  for (int n = 0; n < 8; ++n) EXPECT_EQ(w.q[n], cols_b[n]);
  const int pc[8] = {3, 14, 0, 9, 15, 1, 7, 8};
  for (int n = 0; n < 8; ++n) w.q[n] = static_cast<uint8_t>(pc[n]);
  EXPECT_EQ(static_cast<uint32_t>(awq_pack(w).qweight[0]), 0x819E7F03u);
}

TEST(Awq, RoundTripOddShapesAndSpecDecoder) {
  struct C {
    int64_t K, N, g;
  };
  uint32_t seed = 1;
  for (const C c : {C{128, 64, 32}, C{100, 20, 25}, C{64, 13, 64}, C{7, 3, 7}}) {
    SCOPED_TRACE(::testing::Message() << "K=" << c.K << " N=" << c.N << " g=" << c.g);
    const GroupedIntWeight w = random_awq(c.K, c.N, c.g, ++seed);
    const AwqPacked p = awq_pack(w);
    const int64_t cols = (c.N + 7) / 8;
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t n = 0; n < c.N; ++n)
        ASSERT_EQ(spec_nibble(p.qweight, cols, k, n), w.q[k * c.N + n]);
    for (int64_t g = 0; g < w.groups; ++g)
      for (int64_t n = 0; n < c.N; ++n)
        ASSERT_EQ(int32_t(spec_nibble(p.qzeros, cols, g, n)), w.zeros[g * c.N + n]);
    const GroupedIntWeight u = awq_unpack(awq_view(p), c.g, "rt");
    EXPECT_EQ(u.q, w.q);
    EXPECT_EQ(u.zeros, w.zeros);
    const QuantizedWeight q = grouped_int_to_quantized(u, "awq", "rt");
    EXPECT_EQ(q.code_type, DType::U4);
    EXPECT_EQ(q.zero_kind, ZeroKind::ZeroPoint);
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t k = 0; k < c.K; ++k) {
        const int64_t g = k / c.g;
        const double ref =
            (double(w.q[k * c.N + n]) - w.zeros[g * c.N + n]) * w.scales[g * c.N + n];
        ASSERT_EQ(double(q.dequant(n, k)), ref);
      }
  }
}

TEST(AwqFile, LoadsByShapeAndConfig) {
  ScratchDir dir;
  const std::string path = dir.file("model.safetensors");
  const GroupedIntWeight w = random_awq(256, 40, 64, 9);
  const AwqPacked p = awq_pack(w);
  SafetensorsWriter sw;
  sw.add("q_proj.qweight", "I32", {256, 5}, p.qweight.data(), p.qweight.size() * 4);
  sw.add("q_proj.qzeros", "I32", {4, 5}, p.qzeros.data(), p.qzeros.size() * 4);
  sw.add("q_proj.scales", "F16", {4, 40}, p.scales.data(), p.scales.size());
  sw.write(path);
  auto check = [&] {
    const QuantizedWeight q = load_weight(path, "q_proj");
    for (int64_t n = 0; n < 40; ++n)
      for (int64_t k = 0; k < 256; ++k) ASSERT_EQ(q.dequant(n, k), w.dequant(n, k));
    EXPECT_EQ(inspect_checkpoint(path).format, "safetensors (awq)");
  };
  check();
  mixq_test::write_bytes(dir.file("config.json"),
                         R"({"architectures": ["X"], "rms_norm_eps": 1e-06, "quantization_config":
                         {"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": true,
                          "version": "gemm", "modules_to_not_convert": null}})");
  check();
  mixq_test::write_bytes(dir.file("config.json"),
                         R"({"quantization_config": {"quant_method": "awq", "version": "gemv"}})");
  expect_error([&] { load_weight(path, "q_proj"); }, ErrorCode::Unsupported, {"gemv"});
  mixq_test::write_bytes(dir.file("config.json"),
                         R"({"quantization_config": {"quant_method": "gptq", "bits": 4}})");
  expect_error([&] { load_weight(path, "q_proj"); }, ErrorCode::Format,
               {"\"q_proj\"", "GPTQ-shaped"});
  std::remove(dir.file("config.json").c_str());
  mixq_test::write_bytes(
      dir.file("quant_config.json"),
      R"({"zero_point": true, "q_group_size": 32, "w_bit": 4, "version": "GEMM"})");
  expect_error([&] { load_weight(path, "q_proj"); }, ErrorCode::Format, {"group size 32"});
}

}  // namespace
