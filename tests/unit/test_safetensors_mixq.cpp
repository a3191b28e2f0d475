// mixq's own safetensors layout and dense matrices: save / inspect / load round trips.
#include <gtest/gtest.h>

#include <random>

#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/safetensors.hpp"
#include "mixq/numeric.hpp"
#include "test_safetensors_util.hpp"

using namespace mixq;
using namespace mixq::formats;
using mixq_test::expect_error;
using mixq_test::ScratchDir;

namespace {

QuantizedWeight random_weight(DType code, DType scale, ZeroKind zk, int64_t N, int64_t K,
                              int64_t bk, bool perm, uint32_t seed) {
  std::mt19937 rng(seed);
  QuantizedWeight w;
  w.N = N;
  w.K = K;
  w.code_type = code;
  w.scale_type = scale;
  w.zero_kind = zk;
  w.block_k = bk;
  w.allocate();
  for (auto& b : w.codes) b = static_cast<uint8_t>(rng() & (code == DType::F8E4M3 ? 0x77 : 0xFF));
  std::uniform_real_distribution<float> u(0.01f, 1.f);
  for (int64_t i = 0; i < w.n_scale_entries(); ++i) {
    const float s = u(rng);
    if (scale == DType::F32)
      std::memcpy(&w.scales[4 * i], &s, 4);
    else {
      const uint16_t h = scale == DType::F16 ? f32_to_f16(s) : f32_to_bf16(s);
      std::memcpy(&w.scales[2 * i], &h, 2);
    }
    if (zk == ZeroKind::ZeroPoint) {
      const int32_t z = static_cast<int32_t>(rng() % 16);
      std::memcpy(&w.zeros[4 * i], &z, 4);
    }
    if (zk == ZeroKind::Offset) {
      const float o = -u(rng);
      if (scale == DType::F32)
        std::memcpy(&w.zeros[4 * i], &o, 4);
      else {
        const uint16_t h = scale == DType::F16 ? f32_to_f16(o) : f32_to_bf16(o);
        std::memcpy(&w.zeros[2 * i], &h, 2);
      }
    }
  }
  if (perm) {
    w.k_perm.resize(K);
    for (int64_t k = 0; k < K; ++k) w.k_perm[k] = static_cast<int32_t>(k);
    std::shuffle(w.k_perm.begin(), w.k_perm.end(), rng);
  }
  w.origin = "test; with=odd;chars";
  return w;
}

TEST(SafetensorsMixq, SaveInspectLoadRoundTrip) {
  ScratchDir dir;
  const std::string path = dir.file("w.safetensors");
  std::vector<std::pair<std::string, QuantizedWeight>> ws = {
      {"a.i4", random_weight(DType::I4, DType::F16, ZeroKind::Offset, 33, 77, 32, false, 1)},
      {"b.u4", random_weight(DType::U4, DType::BF16, ZeroKind::ZeroPoint, 16, 128, 128, true, 2)},
      {"c.i8", random_weight(DType::I8, DType::F32, ZeroKind::None, 7, 65, 64, false, 3)},
  };
  QuantizedWeight fp8 =
      random_weight(DType::F8E4M3, DType::F32, ZeroKind::None, 130, 300, 128, false, 4);
  fp8.block_n = 128;
  fp8.allocate();
  for (size_t i = 0; i < fp8.codes.size(); ++i)
    fp8.codes[i] = static_cast<uint8_t>((i * 37) & 0x77);
  for (int64_t i = 0; i < fp8.n_scale_entries(); ++i) {
    const float s = 0.5f + i;
    std::memcpy(&fp8.scales[4 * i], &s, 4);
  }
  ws.push_back({"d.fp8", fp8});
  QuantizedWeight dense;
  dense.N = 3;
  dense.K = 5;
  dense.code_type = DType::BF16;
  dense.has_scales = false;
  dense.block_k = 5;
  dense.allocate();
  for (size_t i = 0; i < dense.codes.size(); ++i) dense.codes[i] = static_cast<uint8_t>(i * 11 + 1);
  ws.push_back({"e.dense", dense});
  save_mixq_safetensors(path, ws, {{"producer", "unit test"}});
  const CheckpointInfo info = inspect_checkpoint(path);
  EXPECT_EQ(info.format, "safetensors (mixq)");
  ASSERT_EQ(info.tensors.size(), ws.size());
  for (const auto& nw : ws) {
    SCOPED_TRACE(nw.first);
    const QuantizedWeight q = load_weight(path, nw.first);
    EXPECT_EQ(q.N, nw.second.N);
    EXPECT_EQ(q.K, nw.second.K);
    EXPECT_EQ(q.code_type, nw.second.code_type);
    EXPECT_EQ(q.scale_type, nw.second.scale_type);
    EXPECT_EQ(q.zero_kind, nw.second.zero_kind);
    EXPECT_EQ(q.block_k, nw.second.block_k);
    EXPECT_EQ(q.block_n, nw.second.block_n);
    EXPECT_EQ(q.has_scales, nw.second.has_scales);
    EXPECT_EQ(q.codes, nw.second.codes);
    EXPECT_EQ(q.scales, nw.second.scales);
    EXPECT_EQ(q.zeros, nw.second.zeros);
    EXPECT_EQ(q.k_perm, nw.second.k_perm);
    EXPECT_EQ(q.origin, nw.second.origin);
  }
  // The file is a plain safetensors file too, with the metadata kept.
  auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f->metadata().at("producer"), "unit test");
  EXPECT_EQ(f->metadata().at("mixq.format"), "1");
  EXPECT_THROW(save_mixq_safetensors(path, ws, {{"mixq.format", "2"}}), Error);
}

TEST(SafetensorsMixq, DamagedDescriptionsFail) {
  ScratchDir dir;
  const std::string path = dir.file("w.safetensors");
  const QuantizedWeight w =
      random_weight(DType::I4, DType::F16, ZeroKind::None, 4, 64, 32, false, 5);
  std::vector<uint16_t> s(8, 0x3C00);
  SafetensorsWriter sw;
  sw.add("x.codes", "U8", {4, 32}, w.codes.data(), w.codes.size());
  sw.add("x.scales", "F16", {4, 2}, s.data(), 16);
  sw.set_metadata("mixq.format", "1");
  sw.set_metadata("mixq.weight.x",
                  "code=i4;N=4;K=64;block_k=32;block_n=1;scale=f16;zero=none;scales=1;origin=");
  sw.write(path);
  EXPECT_NO_THROW(load_weight(path, "x"));
  sw.set_metadata("mixq.weight.x",
                  "code=i4;N=5;K=64;block_k=32;block_n=1;scale=f16;zero=none;scales=1;origin=");
  sw.write(path);
  expect_error([&] { load_weight(path, "x"); }, ErrorCode::Format,
               {"mixq weight \"x\"", "x.codes"});
  sw.set_metadata("mixq.weight.x", "code=q9;N=4");
  sw.write(path);
  expect_error([&] { load_weight(path, "x"); }, ErrorCode::Format, {"code"});
  sw.set_metadata("mixq.format", "7");
  sw.write(path);
  expect_error([&] { load_weight(path, "x"); }, ErrorCode::Unsupported, {"version \"7\""});
}

TEST(SafetensorsDense, LoadsF16Bf16F32Matrices) {
  ScratchDir dir;
  const std::string path = dir.file("d.safetensors");
  std::vector<float> f32(6);
  for (int i = 0; i < 6; ++i) f32[i] = 0.25f * i - 1;
  std::vector<uint16_t> f16(6), bf16(6);
  for (int i = 0; i < 6; ++i) {
    f16[i] = f32_to_f16(f32[i]);
    bf16[i] = f32_to_bf16(f32[i] * 3);
  }
  SafetensorsWriter sw;
  sw.add("a", "F32", {2, 3}, f32.data(), 24);
  sw.add("b", "F16", {3, 2}, f16.data(), 12);
  sw.add("c", "BF16", {6, 1}, bf16.data(), 12);
  sw.add("v", "F32", {6}, f32.data(), 24);
  sw.write(path);
  const CheckpointInfo info = inspect_checkpoint(path);
  EXPECT_EQ(info.format, "safetensors (dense)");
  ASSERT_EQ(info.tensors.size(), 4u);
  EXPECT_FALSE(info.tensors[3].is_weight);
  EXPECT_EQ(info.tensors[3].type, "F32");
  const QuantizedWeight a = load_weight(path, "a"), b = load_weight(path, "b"),
                        c = load_weight(path, "c");
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(a.dequant(i / 3, i % 3), f32[i]);
    EXPECT_EQ(b.dequant(i / 2, i % 2), f32[i]);
    EXPECT_EQ(c.dequant(i, 0), bf16_to_f32(bf16[i]));
  }
  expect_error([&] { load_weight(path, "v"); }, ErrorCode::Unsupported, {"\"v\""});
}

}  // namespace
