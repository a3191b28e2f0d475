// GPTQ: worked examples of formats.md §3, pack/unpack round trips for 2/3/4/8 bits, v1 and v2,
// act-order, and an independent bit-level decoder checked against the canonical dequant.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/gptq.hpp"
#include "mixq/formats/safetensors.hpp"
#include "mixq/numeric.hpp"
#include "test_safetensors_util.hpp"

using namespace mixq;
using namespace mixq::formats;
using mixq_test::expect_error;
using mixq_test::ScratchDir;

namespace {

// Random GPTQ-shaped weight. Scales are f16 values; zeros within [lo, hi].
GroupedIntWeight random_grouped(int bits, int64_t K, int64_t N, int64_t g, bool act_order,
                                int32_t zlo, int32_t zhi, uint32_t seed) {
  std::mt19937 rng(seed);
  GroupedIntWeight w;
  w.bits = bits;
  w.K = K;
  w.N = N;
  w.group_size = g;
  w.groups = (K + g - 1) / g;
  const int qmax = (1 << bits) - 1;
  w.q.resize(K * N);
  for (auto& q : w.q) q = static_cast<uint8_t>(rng() % (qmax + 1));
  w.zeros.resize(w.groups * N);
  for (auto& z : w.zeros) z = zlo + static_cast<int32_t>(rng() % (zhi - zlo + 1));
  w.scales.resize(w.groups * N);
  std::uniform_real_distribution<float> u(0.001f, 0.1f);
  for (auto& s : w.scales) s = f16_to_f32(f32_to_f16(u(rng)));
  if (act_order) {
    // GPTQ desc_act: groups are consecutive runs of g in a random permutation of the columns.
    std::vector<int32_t> perm(K);
    for (int64_t k = 0; k < K; ++k) perm[k] = static_cast<int32_t>(k);
    std::shuffle(perm.begin(), perm.end(), rng);
    w.g_idx.resize(K);
    for (int64_t pos = 0; pos < K; ++pos) w.g_idx[perm[pos]] = static_cast<int32_t>(pos / g);
  }
  return w;
}

// Independent decoder written from formats.md §3.2 (not the library's bitstream helper):
// 2/4/8 bits: 32/b fields per word; 3 bits: a 96-bit value over 3 consecutive words.
uint32_t spec_field(const std::vector<int32_t>& words, int64_t row_stride, int64_t col, int64_t idx,
                    int bits) {
  auto word = [&](int64_t r) { return static_cast<uint32_t>(words[r * row_stride + col]); };
  if (bits != 3) {
    const int per = 32 / bits;
    return (word(idx / per) >> (bits * (idx % per))) & ((1u << bits) - 1);
  }
  const int64_t t = idx / 32, i = idx % 32;
  const unsigned __int128 v = (unsigned __int128)word(3 * t) |
                              ((unsigned __int128)word(3 * t + 1) << 32) |
                              ((unsigned __int128)word(3 * t + 2) << 64);
  return static_cast<uint32_t>((v >> (3 * i)) & 7u);
}

TEST(Gptq, WorkedExample4BitV1Sym) {
  // formats.md §3.6: qweight word 0x8F3A61C7 -> codes 7,12,1,6,10,3,15,8; qzeros 0x77777777 -> z=8.
  GptqPacked p;
  p.bits = 4;
  p.K = 8;
  p.N = 8;
  p.G = 1;
  p.qweight.assign(8, static_cast<int32_t>(0x8F3A61C7u));
  p.qzeros = {0x77777777};
  p.scale_type = DType::F16;
  p.scales.assign(16, 0);
  for (int n = 0; n < 8; ++n) {
    const uint16_t h = f32_to_f16(0.5f);
    p.scales[2 * n] = h & 0xFF;
    p.scales[2 * n + 1] = h >> 8;
  }
  GptqPackedView v = gptq_view(p);
  v.g_idx = nullptr;
  const GroupedIntWeight w = gptq_unpack(v, GptqVersion::V1, 8, "ex");
  const int codes[8] = {7, 12, 1, 6, 10, 3, 15, 8};
  const float expect[8] = {-1, 4, -7, -2, 2, -5, 7, 0};
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(w.q[k * 8 + 3], codes[k]);
    EXPECT_EQ(w.zeros[3], 8);
    EXPECT_EQ(w.dequant(3, k), 0.5f * expect[k]);
  }
  const QuantizedWeight q = grouped_int_to_quantized(w, "ex", "ex");
  for (int k = 0; k < 8; ++k) EXPECT_EQ(q.dequant(5, k), 0.5f * expect[k]);
  // Packing check: codes [3,14,0,9,15,1,7,8] -> 0x871F90E3.
  GroupedIntWeight c = w;
  const int pc[8] = {3, 14, 0, 9, 15, 1, 7, 8};
  for (int k = 0; k < 8; ++k) c.q[k * 8 + 0] = static_cast<uint8_t>(pc[k]);
  EXPECT_EQ(static_cast<uint32_t>(gptq_pack(c, GptqVersion::V1).qweight[0]), 0x871F90E3u);
}

TEST(Gptq, WorkedExample3BitWordsAndSymZeros) {
  // formats.md §3.2: codes (5i) mod 8 for i = 0..31 -> words a878cea8 cea878ce 78cea878.
  GroupedIntWeight w;
  w.bits = 3;
  w.K = 32;
  w.N = 32;
  w.groups = 1;
  w.group_size = 32;
  w.q.assign(32 * 32, 0);
  for (int k = 0; k < 32; ++k) w.q[k * 32] = static_cast<uint8_t>((5 * k) % 8);
  w.zeros.assign(32, 4);  // sym 3-bit: z = 4, stored 3 in v1
  w.scales.assign(32, 1.0f);
  const GptqPacked p = gptq_pack(w, GptqVersion::V1);
  EXPECT_EQ(static_cast<uint32_t>(p.qweight[0 * 32]), 0xa878cea8u);
  EXPECT_EQ(static_cast<uint32_t>(p.qweight[1 * 32]), 0xcea878ceu);
  EXPECT_EQ(static_cast<uint32_t>(p.qweight[2 * 32]), 0x78cea878u);
  // Symmetric qzeros words from §3.3: 3-bit db6db6db b6db6db6 6db6db6d.
  EXPECT_EQ(static_cast<uint32_t>(p.qzeros[0]), 0xdb6db6dbu);
  EXPECT_EQ(static_cast<uint32_t>(p.qzeros[1]), 0xb6db6db6u);
  EXPECT_EQ(static_cast<uint32_t>(p.qzeros[2]), 0x6db6db6du);
  // And the other bit widths' symmetric words.
  const uint32_t sym_words[9] = {0, 0, 0x55555555u, 0, 0x77777777u, 0, 0, 0, 0x7F7F7F7Fu};
  for (int b : {2, 4, 8}) {
    GroupedIntWeight s = random_grouped(b, 64, 32, 32, false, 1, 1, 1);
    std::fill(s.zeros.begin(), s.zeros.end(), 1 << (b - 1));
    for (const int32_t word : gptq_pack(s, GptqVersion::V1).qzeros)
      EXPECT_EQ(static_cast<uint32_t>(word), sym_words[b]) << b << " bits";
  }
}

struct RoundTrip {
  int bits;
  int64_t K, N, g;
  bool act_order;
  GptqVersion version;
};

TEST(Gptq, PackUnpackRoundTripAndSpecDecoder) {
  std::vector<RoundTrip> cases;
  for (int b : {2, 3, 4, 8})
    for (GptqVersion v : {GptqVersion::V1, GptqVersion::V2}) {
      cases.push_back({b, 256, 64, 32, false, v});
      cases.push_back({b, 256, 96, 64, true, v});
      cases.push_back({b, 128, 32, 128, false, v});  // per-channel
    }
  cases.push_back({4, 200, 24, 64, false, GptqVersion::V2});  // K not a multiple of g
  cases.push_back({4, 100, 16, 25, true, GptqVersion::V1});   // odd group size, act-order
  cases.push_back({8, 52, 4, 13, false, GptqVersion::V1});
  uint32_t seed = 7;
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.bits << "-bit K=" << c.K << " N=" << c.N << " g=" << c.g
                                      << " act=" << c.act_order << " v" << (int)c.version + 1);
    const int32_t zmax = (1 << c.bits) - 1;
    // v1 cannot store z = 0; v2 stores 0 ..= 2^b - 1.
    const GroupedIntWeight w = random_grouped(c.bits, c.K, c.N, c.g, c.act_order,
                                              c.version == GptqVersion::V1 ? 1 : 0, zmax, ++seed);
    const GptqPacked p = gptq_pack(w, c.version);
    ASSERT_EQ(p.qweight.size(), size_t(gptq_qweight_rows(c.K, c.bits) * c.N));
    // Independent decode of every code and zero, then the formula of §3.3.
    const int64_t zcols = gptq_qzeros_cols(c.N, c.bits);
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t n = 0; n < c.N; ++n)
        ASSERT_EQ(spec_field(p.qweight, c.N, n, k, c.bits), w.q[k * c.N + n]) << k << "," << n;
    for (int64_t g = 0; g < w.groups; ++g)
      for (int64_t n = 0; n < c.N; ++n) {
        // qzeros row g is one bitstream along N: treat it as a "column" of words with stride 1.
        const int32_t stored = static_cast<int32_t>(spec_field(p.qzeros, 1, g * zcols, n, c.bits));
        ASSERT_EQ(stored + (c.version == GptqVersion::V1 ? 1 : 0), w.zeros[g * c.N + n]);
      }
    const GroupedIntWeight u = gptq_unpack(gptq_view(p), c.version, c.g, "rt");
    EXPECT_EQ(u.q, w.q);
    EXPECT_EQ(u.zeros, w.zeros);
    EXPECT_EQ(u.scales, w.scales);
    const QuantizedWeight q = grouped_int_to_quantized(u, "rt", "rt");
    EXPECT_EQ(q.k_perm.empty(), !c.act_order);
    EXPECT_EQ(q.block_k, c.g);
    EXPECT_EQ(q.code_type, c.bits == 8 ? DType::U8 : DType::U4);
    std::vector<float> deq(c.N * c.K);
    dequantize_rows(q, 0, c.N, deq.data(), /*original_order=*/true);
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t k = 0; k < c.K; ++k) {
        // scales[g][n] * (q - z) computed in double: exact, so equality with f32 is the test.
        const int64_t g = w.group_of(k);
        const double ref = double(w.scales[g * c.N + n]) *
                           (double(w.q[k * c.N + n]) - double(w.zeros[g * c.N + n]));
        ASSERT_EQ(deq[n * c.K + k], static_cast<float>(ref)) << n << "," << k;
        ASSERT_EQ(double(deq[n * c.K + k]), ref);
      }
    if (c.act_order) {
      // Canonical groups are contiguous: every column j of block j/g belongs to group j/g.
      for (int64_t j = 0; j < c.K; ++j) ASSERT_EQ(w.g_idx[q.k_perm[j]], j / c.g);
    }
  }
}

TEST(Gptq, V1StoredMaxReadsAsTwoToTheBits) {
  // A v1 field of 2^b - 1 (from a corrupt "z = 0") reads as 2^b, as GPTQ's kernels compute it.
  GroupedIntWeight w = random_grouped(4, 64, 8, 64, false, 16, 16, 3);
  const GptqPacked p = gptq_pack(w, GptqVersion::V1);
  EXPECT_EQ(static_cast<uint32_t>(p.qzeros[0]), 0xFFFFFFFFu);
  const GroupedIntWeight u = gptq_unpack(gptq_view(p), GptqVersion::V1, 64, "x");
  EXPECT_EQ(u.zeros[0], 16);
  EXPECT_NO_THROW(grouped_int_to_quantized(u, "x", "x"));
  GroupedIntWeight z0 = random_grouped(4, 64, 8, 64, false, 0, 0, 3);
  EXPECT_THROW(gptq_pack(z0, GptqVersion::V1), Error);
}

TEST(Gptq, RejectsUnequalActOrderGroupsAndBadGIdx) {
  GroupedIntWeight w = random_grouped(4, 64, 8, 16, true, 1, 15, 5);
  // Move one column from group 0 to group 1: sizes 15 and 17.
  for (int64_t k = 0; k < 64; ++k)
    if (w.g_idx[k] == 0) {
      w.g_idx[k] = 1;
      break;
    }
  expect_error([&] { grouped_int_to_quantized(w, "o", "file.st: tensor \"l\""); },
               ErrorCode::Format, {"file.st: tensor \"l\"", "group 0 15 columns, expected 16"});
  w.g_idx[3] = 4;  // G = 4
  expect_error([&] { grouped_int_to_quantized(w, "o", "t"); }, ErrorCode::Format, {"g_idx[3] = 4"});
  GroupedIntWeight s = random_grouped(4, 64, 8, 16, false, 1, 15, 5);
  s.scales[5] = std::nanf("");
  expect_error([&] { grouped_int_to_quantized(s, "o", "t"); }, ErrorCode::Format, {"not finite"});
  s.scales[5] = INFINITY;
  expect_error([&] { grouped_int_to_quantized(s, "o", "t"); }, ErrorCode::Format, {"not finite"});
}

// A g_idx whose groups add up to K but leave a group without columns: the last one (K = (G - 1)
// group size: more scale groups than the group size gives, which overran the canonical scales, a
// fuzzer's finding), or the first when the group size is taken from it (a group size of 0).
TEST(Gptq, RejectsActOrderGroupsWithoutColumns) {
  GroupedIntWeight w = random_grouped(4, 64, 8, 16, true, 1, 15, 7);
  GroupedIntWeight extra = w;  // five groups of scales; g_idx fills the first four
  extra.groups = 5;
  extra.zeros.resize(size_t(5 * 8), 8);
  extra.scales.resize(size_t(5 * 8), 0.01f);
  expect_error([&] { grouped_int_to_quantized(extra, "o", "t"); }, ErrorCode::Format,
               {"t", "group size 16", "K=64", "4 groups", "5"});
  extra.group_size = 0;  // taken from g_idx's first group: the same verdict
  expect_error([&] { grouped_int_to_quantized(extra, "o", "t"); }, ErrorCode::Format, {"group size 16", "5"});
  GroupedIntWeight empty_first = w;  // every column in group 1 of 2: group 0 has none
  empty_first.group_size = 0;
  empty_first.groups = 2;
  empty_first.zeros.assign(size_t(2 * 8), 8);
  empty_first.scales.assign(size_t(2 * 8), 0.01f);
  std::fill(empty_first.g_idx.begin(), empty_first.g_idx.end(), 1);
  expect_error([&] { grouped_int_to_quantized(empty_first, "o", "t"); }, ErrorCode::Format,
               {"t", "group 0", "no columns"});
}

// --------------------------------------------------------------- through files + configs

void write_gptq(const std::string& path, const std::string& prefix, const GptqPacked& p,
                bool with_g_idx) {
  SafetensorsWriter w;
  const int64_t rows = gptq_qweight_rows(p.K, p.bits), zc = gptq_qzeros_cols(p.N, p.bits);
  w.add(prefix + ".qweight", "I32", {rows, p.N}, p.qweight.data(), p.qweight.size() * 4);
  w.add(prefix + ".qzeros", "I32", {p.G, zc}, p.qzeros.data(), p.qzeros.size() * 4);
  w.add(prefix + ".scales", "F16", {p.G, p.N}, p.scales.data(), p.scales.size());
  if (with_g_idx) w.add(prefix + ".g_idx", "I32", {p.K}, p.g_idx.data(), p.g_idx.size() * 4);
  std::vector<uint16_t> bias(p.N, 0x3C00);
  w.add(prefix + ".bias", "F16", {p.N}, bias.data(), bias.size() * 2);
  w.set_metadata("format", "pt");
  w.write(path);
}

TEST(GptqFile, LoadsWithAndWithoutConfig) {
  for (int bits : {2, 3, 4, 8}) {
    ScratchDir dir;
    const std::string path = dir.file("model.safetensors");
    const GroupedIntWeight w =
        random_grouped(bits, 128, 64, 32, true, 0, (1 << bits) - 1, 11 + bits);
    write_gptq(path, "model.layers.0.mlp.down_proj", gptq_pack(w, GptqVersion::V2), true);
    mixq_test::write_bytes(dir.file("quantize_config.json"),
                           "{\"bits\": " + std::to_string(bits) +
                               ", \"group_size\": 32, \"desc_act\": true, \"sym\": false, "
                               "\"checkpoint_format\": \"gptq_v2\", \"damp_percent\": 0.01}");
    const CheckpointInfo info = inspect_checkpoint(path);
    EXPECT_EQ(info.format, "safetensors (gptq)");
    ASSERT_EQ(info.tensors.size(), 2u);  // the module (weight) and its bias
    EXPECT_EQ(info.tensors[0].name, "model.layers.0.mlp.down_proj");
    EXPECT_TRUE(info.tensors[0].is_weight);
    EXPECT_EQ(info.tensors[0].shape, (std::vector<int64_t>{64, 128}));
    EXPECT_EQ(info.tensors[1].name, "model.layers.0.mlp.down_proj.bias");
    EXPECT_FALSE(info.tensors[1].is_weight);
    const QuantizedWeight q = load_weight(path, "model.layers.0.mlp.down_proj");
    std::vector<float> deq(64 * 128);
    dequantize_rows(q, 0, 64, deq.data(), true);
    for (int64_t n = 0; n < 64; ++n)
      for (int64_t k = 0; k < 128; ++k) ASSERT_EQ(deq[n * 128 + k], w.dequant(n, k));
    EXPECT_NE(q.origin.find("gptq-v2"), std::string::npos);
    // Same tensors, no config: v1 assumed (zeros read one higher) and bits inferred from qzeros.
    std::remove(dir.file("quantize_config.json").c_str());
    if (bits != 8) {
      GroupedIntWeight w1 = random_grouped(bits, 128, 64, 32, false, 1, 1 << bits, 3);
      write_gptq(path, "m", gptq_pack(w1, GptqVersion::V1), false);
      const QuantizedWeight q1 = load_weight(path, "m.qweight");
      for (int64_t n = 0; n < 64; ++n)
        for (int64_t k = 0; k < 128; ++k) ASSERT_EQ(q1.dequant(n, k), w1.dequant(n, k));
    }
  }
}

TEST(GptqFile, InconsistentShapesAndConfigsFail) {
  ScratchDir dir;
  const std::string path = dir.file("m.safetensors");
  const GroupedIntWeight w = random_grouped(4, 64, 32, 32, false, 1, 15, 2);
  GptqPacked p = gptq_pack(w, GptqVersion::V1);
  {  // scales with the wrong N
    SafetensorsWriter sw;
    sw.add("l.qweight", "I32", {8, 32}, p.qweight.data(), p.qweight.size() * 4);
    sw.add("l.qzeros", "I32", {2, 4}, p.qzeros.data(), p.qzeros.size() * 4);
    sw.add("l.scales", "F16", {2, 16}, p.scales.data(), 64);
    sw.write(path);
    expect_error([&] { load_weight(path, "l"); }, ErrorCode::Format,
                 {"m.safetensors", "\"l\"", "fits neither"});
  }
  {  // qzeros of the wrong width
    SafetensorsWriter sw;
    sw.add("l.qweight", "I32", {8, 32}, p.qweight.data(), p.qweight.size() * 4);
    std::vector<int32_t> qz5(10, 0x11111111);
    sw.add("l.qzeros", "I32", {2, 5}, qz5.data(), 40);
    sw.add("l.scales", "F16", {2, 32}, p.scales.data(), p.scales.size());
    sw.write(path);
    expect_error([&] { load_weight(path, "l"); }, ErrorCode::Format,
                 {"\"l\" (gptq)", "qzeros [2, 5] fits no bit width"});
  }
  {  // g_idx out of range
    std::vector<int32_t> gi(64, 0);
    gi[10] = 7;
    SafetensorsWriter sw;
    sw.add("l.qweight", "I32", {8, 32}, p.qweight.data(), p.qweight.size() * 4);
    sw.add("l.qzeros", "I32", {2, 4}, p.qzeros.data(), p.qzeros.size() * 4);
    sw.add("l.scales", "F16", {2, 32}, p.scales.data(), p.scales.size());
    sw.add("l.g_idx", "I32", {64}, gi.data(), 256);
    sw.write(path);
    expect_error([&] { load_weight(path, "l"); }, ErrorCode::Format,
                 {"\"l\" (gptq)", "g_idx[10] = 7"});
  }
  {  // NaN scale
    GptqPacked bad = p;
    bad.scales[2] = 0x00;
    bad.scales[3] = 0x7E;
    write_gptq(path, "l", bad, true);
    expect_error([&] { load_weight(path, "l"); }, ErrorCode::Format,
                 {"\"l\" (gptq)", "not finite"});
  }
  write_gptq(path, "l", p, true);
  mixq_test::write_bytes(dir.file("quantize_config.json"),
                         "{\"bits\": 4, \"checkpoint_format\": \"marlin\"}");
  expect_error([&] { load_weight(path, "l"); }, ErrorCode::Unsupported, {"marlin"});
  mixq_test::write_bytes(dir.file("quantize_config.json"), "{\"bits\": 4,}");
  expect_error([&] { load_weight(path, "l"); }, ErrorCode::Format,
               {"quantize_config.json", "JSON"});
  mixq_test::write_bytes(dir.file("quantize_config.json"), "{\"quant_method\": \"awq\"}");
  expect_error([&] { load_weight(path, "l"); }, ErrorCode::Format, {"says quant_method \"awq\""});
  std::remove(dir.file("quantize_config.json").c_str());
  expect_error([&] { load_weight(path, "nope"); }, ErrorCode::InvalidArgument, {"nope"});
  // A group size beyond K (g128 on a 64-wide layer) is a single group: loads as one block.
  const GroupedIntWeight one = random_grouped(4, 64, 32, 64, false, 1, 15, 8);
  write_gptq(path, "l", gptq_pack(one, GptqVersion::V1), false);
  mixq_test::write_bytes(dir.file("quantize_config.json"), "{\"bits\": 4, \"group_size\": 128}");
  const QuantizedWeight q = load_weight(path, "l");
  EXPECT_EQ(q.block_k, 64);
  for (int64_t k = 0; k < 64; ++k) EXPECT_EQ(q.dequant(3, k), one.dequant(3, k));
}

}  // namespace
