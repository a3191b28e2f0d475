// FP8 block checkpoints: e4m3 examples, N and K not multiples of 128, file loading, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/fp8_block.hpp"
#include "mixq/formats/safetensors.hpp"
#include "mixq/numeric.hpp"
#include "test_safetensors_util.hpp"

using namespace mixq;
using namespace mixq::formats;
using mixq_test::expect_error;
using mixq_test::ScratchDir;

namespace {

// e4m3fn decoded from the spec text (§5.2), independent of mixq::e4m3_to_f32.
double spec_e4m3(uint8_t b) {
  const int sign = b >> 7, e = (b >> 3) & 0xF, m = b & 7;
  if (e == 0xF && m == 7) return NAN;
  const double mag =
      e == 0 ? (m / 8.0) * std::ldexp(1.0, -6) : (1 + m / 8.0) * std::ldexp(1.0, e - 7);
  return sign ? -mag : mag;
}

Fp8BlockPacked random_fp8(int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  Fp8BlockPacked p;
  p.N = N;
  p.K = K;
  p.weight.resize(N * K);
  for (auto& b : p.weight) {
    do b = static_cast<uint8_t>(rng());
    while ((b & 0x7F) == 0x7F);  // no NaN codes
  }
  p.scale_inv.resize(((N + 127) / 128) * ((K + 127) / 128));
  std::uniform_real_distribution<float> u(1e-4f, 1e-2f);
  for (auto& s : p.scale_inv) s = u(rng);
  return p;
}

TEST(Fp8Block, SpecExamples) {
  EXPECT_EQ(spec_e4m3(0x38), 1.0);
  EXPECT_EQ(spec_e4m3(0xB4), -0.75);
  EXPECT_EQ(spec_e4m3(0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(spec_e4m3(0x7E), 448.0);
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7F) != 0x7F) {
      ASSERT_EQ(double(e4m3_to_f32(static_cast<uint8_t>(b))), spec_e4m3(b)) << b;
    }
}

TEST(Fp8Block, ConvertsOddShapesExactly) {
  for (auto [N, K] : {std::pair<int64_t, int64_t>{300, 200}, {129, 257}, {5, 7}, {128, 128}}) {
    SCOPED_TRACE(::testing::Message() << N << "x" << K);
    const Fp8BlockPacked p = random_fp8(N, K, static_cast<uint32_t>(N * 1000 + K));
    const QuantizedWeight q = fp8_block_to_quantized(fp8_block_view(p), "t");
    EXPECT_EQ(q.code_type, DType::F8E4M3);
    EXPECT_EQ(q.block_n, 128);
    EXPECT_EQ(q.block_k, std::min<int64_t>(128, K));
    const int64_t nbk = (K + 127) / 128;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const float ref = static_cast<float>(spec_e4m3(p.weight[n * K + k])) *
                          p.scale_inv[(n / 128) * nbk + k / 128];
        ASSERT_EQ(q.dequant(n, k), ref) << n << "," << k;
      }
    const Fp8BlockPacked back = fp8_block_pack(q);
    EXPECT_EQ(back.weight, p.weight);
    EXPECT_EQ(back.scale_inv, p.scale_inv);
  }
}

TEST(Fp8BlockFile, LoadsDeepSeekLayout) {
  ScratchDir dir;
  const std::string path = dir.file("model-00001-of-00002.safetensors");
  const Fp8BlockPacked p = random_fp8(300, 200, 4);
  std::vector<uint16_t> norm(200, 0x3F80);  // bf16 1.0
  SafetensorsWriter sw;
  sw.add("layers.0.mlp.up_proj.weight", "F8_E4M3", {300, 200}, p.weight.data(), p.weight.size());
  sw.add("layers.0.mlp.up_proj.weight_scale_inv", "F32", {3, 2}, p.scale_inv.data(), 24);
  sw.add("layers.0.norm.weight", "BF16", {200}, norm.data(), 400);
  sw.write(path);
  const CheckpointInfo info = inspect_checkpoint(path);
  EXPECT_EQ(info.format, "safetensors (fp8)");
  ASSERT_EQ(info.tensors.size(), 2u);
  EXPECT_EQ(info.tensors[0].type, "fp8 128x128");
  EXPECT_EQ(info.tensors[0].bytes, 300 * 200 + 24);
  const QuantizedWeight q = load_weight(path, "layers.0.mlp.up_proj.weight");
  const QuantizedWeight direct = fp8_block_to_quantized(fp8_block_view(p), "d");
  EXPECT_EQ(q.codes, direct.codes);
  EXPECT_EQ(q.scales, direct.scales);
  expect_error([&] { load_weight(path, "layers.0.norm.weight"); }, ErrorCode::Unsupported,
               {"layers.0.norm.weight", "not a weight matrix"});
  // Bad scale shape and non-finite scales.
  SafetensorsWriter bad;
  Fp8BlockPacked q2 = p;
  q2.scale_inv[4] = INFINITY;
  bad.add("w", "F8_E4M3", {300, 200}, q2.weight.data(), q2.weight.size());
  bad.add("w_scale_inv", "F32", {3, 2}, q2.scale_inv.data(), 24);
  bad.write(path);
  expect_error([&] { load_weight(path, "w"); }, ErrorCode::Format,
               {"\"w\" (fp8 block)", "weight_scale_inv[2][0]", "not finite"});
  // A block size from config.json that breaks the canonical limits is a Format error naming the
  // file.
  SafetensorsWriter cfgw;
  cfgw.add("w", "F8_E4M3", {300, 200}, p.weight.data(), p.weight.size());
  const float one = 1.0f;
  cfgw.add("w_scale_inv", "F32", {1, 1}, &one, 4);
  cfgw.write(path);
  mixq_test::write_bytes(
      dir.file("config.json"),
      R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [4096, 4096]}})");
  expect_error([&] { load_weight(path, "w"); }, ErrorCode::Format,
               {"\"w\" (fp8 block)", "block_n"});
  std::remove(dir.file("config.json").c_str());
  SafetensorsWriter bad2;
  bad2.add("w", "F8_E4M3", {300, 200}, q2.weight.data(), q2.weight.size());
  bad2.add("w_scale_inv", "F32", {2, 3}, q2.scale_inv.data(), 24);
  bad2.write(path);
  expect_error([&] { load_weight(path, "w"); }, ErrorCode::Format,
               {"weight_scale_inv [2, 3] does not match"});
}

}  // namespace
