// Loading experts from files the test writes: GGUF 3-D expert tensors (split per expert must give
// exactly the weight of each expert's 2-D slice written alone), per-expert safetensors modules
// (mixq layout, FP8 block), the fused gate+up stack, and the errors for missing / mismatched
// experts.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/gguf.hpp"
#include "mixq/formats/safetensors.hpp"
#include "mixq/moe.hpp"
#include "mixq/quantize.hpp"
#include "test_safetensors_util.hpp"

namespace mixq {
namespace {

using mixq_test::ScratchDir;

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, 0.1f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

void expect_same_weight(const QuantizedWeight& a, const QuantizedWeight& b, const std::string& what) {
  EXPECT_EQ(a.N, b.N) << what;
  EXPECT_EQ(a.K, b.K) << what;
  EXPECT_EQ(a.code_type, b.code_type) << what;
  EXPECT_EQ(a.codes, b.codes) << what;
  EXPECT_EQ(a.scales, b.scales) << what;
  EXPECT_EQ(a.zeros, b.zeros) << what;
}

TEST(MoeLoaders, GgufExpertTensorSplitsPerExpert) {
  ScratchDir dir;
  const std::string path = dir.file("moe.gguf");
  const int64_t E = 5, N = 24, K = 96;
  for (formats::GgmlType type : {formats::GgmlType::Q4_0, formats::GgmlType::Q8_0}) {
    const std::vector<float> w = randn(size_t(E * N * K), 3);
    std::vector<formats::GgufTensorToWrite> ts;
    formats::GgufTensorToWrite all;
    all.name = "blk.0.ffn_up_exps.weight";
    all.shape = {E, N, K};  // ggml ne = [K, N, E]
    all.type = type;
    all.values = w.data();
    ts.push_back(all);
    std::vector<std::string> names;
    for (int64_t e = 0; e < E; ++e) names.push_back("expert." + std::to_string(e));
    for (int64_t e = 0; e < E; ++e) {
      formats::GgufTensorToWrite one;
      one.name = names[size_t(e)];
      one.shape = {N, K};
      one.type = type;
      one.values = w.data() + e * N * K;
      ts.push_back(one);
    }
    formats::save_gguf(path, ts);
    const std::vector<QuantizedWeight> experts = load_experts(path, "blk.0.ffn_up_exps.weight");
    ASSERT_EQ(int64_t(experts.size()), E);
    for (int64_t e = 0; e < E; ++e)
      expect_same_weight(experts[size_t(e)], formats::load_weight(path, names[size_t(e)]),
                         "expert " + std::to_string(e));
    // a 2-D tensor is not an expert stack; a missing one is named
    try {
      load_experts(path, "expert.0");
      ADD_FAILURE() << "a 2-D tensor was taken as experts";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("has 2 dimensions"), std::string::npos) << err.what();
    }
    EXPECT_THROW(load_experts(path, "blk.0.ffn_down_exps.weight"), Error);
  }
}

TEST(MoeLoaders, SafetensorsPerExpertModulesAndFusedGateUp) {
  ScratchDir dir;
  const std::string path = dir.file("moe.safetensors");
  const int64_t E = 3, I = 20, H = 64;
  std::vector<std::pair<std::string, QuantizedWeight>> ws;
  std::vector<QuantizedWeight> gate, up;
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<float> g = randn(size_t(I * H), 10 + uint32_t(e)), u = randn(size_t(I * H), 20 + uint32_t(e));
    gate.push_back(quantize_weight(TensorView(const_cast<float*>(g.data()), DType::F32, {I, H}), parse_scheme("w4g32asym")));
    up.push_back(quantize_weight(TensorView(const_cast<float*>(u.data()), DType::F32, {I, H}), parse_scheme("w4g32asym")));
    const std::string p = "model.layers.1.mlp.experts." + std::to_string(e) + ".";
    ws.emplace_back(p + "gate_proj.weight", gate.back());
    ws.emplace_back(p + "up_proj.weight", up.back());
  }
  formats::save_mixq_safetensors(path, ws);
  const auto loaded = load_experts(path, "model.layers.1.mlp.experts.{e}.up_proj.weight");
  ASSERT_EQ(loaded.size(), size_t(E));
  for (int64_t e = 0; e < E; ++e) expect_same_weight(loaded[size_t(e)], up[size_t(e)], "up");
  const auto fused = load_experts_gate_up(path, "model.layers.1.mlp.experts.{e}.gate_proj.weight",
                                          "model.layers.1.mlp.experts.{e}.up_proj.weight");
  ASSERT_EQ(fused.size(), size_t(E));
  for (int64_t e = 0; e < E; ++e) {
    ASSERT_EQ(fused[size_t(e)].N, 2 * I);
    for (int64_t n = 0; n < 2 * I; ++n)
      for (int64_t k = 0; k < H; k += 7)
        ASSERT_EQ(fused[size_t(e)].dequant(n, k),
                  n < I ? gate[size_t(e)].dequant(n, k) : up[size_t(e)].dequant(n - I, k));
  }
  // no {e}, no expert 0
  EXPECT_THROW(load_experts(path, "model.layers.1.mlp.experts.0.up_proj.weight"), Error);
  try {
    load_experts(path, "model.layers.2.mlp.experts.{e}.up_proj.weight");
    ADD_FAILURE() << "no error";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::Format);
    EXPECT_NE(std::string(err.what()).find("model.layers.2.mlp.experts.0.up_proj.weight"),
              std::string::npos) << err.what();
  }
  // prepared and run: the stack is usable as experts
  const PreparedExperts pe = prepare_experts(fused, [] {
    PrepareOptions o;
    o.backend = BackendKind::Reference;
    return o;
  }());
  EXPECT_EQ(pe.num_experts(), E);
  EXPECT_EQ(pe.N(), 2 * I);
}

TEST(MoeLoaders, Fp8BlockPerExpertModules) {
  ScratchDir dir;
  const std::string path = dir.file("moe-fp8.safetensors");
  const int64_t E = 2, N = 256, K = 200;
  std::mt19937 rng(5);
  std::vector<std::vector<uint8_t>> codes(E);
  std::vector<std::vector<float>> scales(E);
  formats::SafetensorsWriter sw;
  for (int64_t e = 0; e < E; ++e) {
    codes[size_t(e)].resize(size_t(N * K));
    for (auto& c : codes[size_t(e)]) {
      c = uint8_t(rng());
      if ((c & 0x7F) == 0x7F) c = 0x10;  // no NaN codes
    }
    scales[size_t(e)] = {0.5f, 0.25f, 1.f, 2.f};
    const std::string p = "model.layers.3.mlp.experts." + std::to_string(e) + ".down_proj.";
    sw.add(p + "weight", "F8_E4M3", {N, K}, codes[size_t(e)].data(), codes[size_t(e)].size());
    sw.add(p + "weight_scale_inv", "F32", {2, 2}, scales[size_t(e)].data(), 16);
  }
  sw.write(path);
  const auto ex = load_experts(path, "model.layers.3.mlp.experts.{e}.down_proj.weight");
  ASSERT_EQ(ex.size(), size_t(E));
  for (int64_t e = 0; e < E; ++e) {
    EXPECT_EQ(ex[size_t(e)].code_type, DType::F8E4M3);
    EXPECT_EQ(ex[size_t(e)].block_n, 128);
    EXPECT_EQ(ex[size_t(e)].codes, codes[size_t(e)]);
    EXPECT_EQ(ex[size_t(e)].scale(1, 0), scales[size_t(e)][2]);
  }
}

}  // namespace
}  // namespace mixq
