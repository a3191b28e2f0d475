// Sharded safetensors checkpoints: the index parser, SafetensorsCheckpoint's shard-by-shard
// agreement with the index, lazy opening (load_weight reads only the shards it needs), and a
// GPTQ module assembled from three shards exactly as from one file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/safetensors.hpp"
#include "mixq/formats/safetensors_checkpoint.hpp"
#include "mixq/formats/safetensors_index.hpp"
#include "test_util.hpp"

namespace {

using namespace mixq::formats;

const char* const kS1 = "model-00001-of-00003.safetensors";
const char* const kS2 = "model-00002-of-00003.safetensors";
const char* const kS3 = "model-00003-of-00003.safetensors";

SafetensorsIndex parse(const std::string& text) {
  return parse_safetensors_index(text.data(), text.size(), "/d/model.safetensors.index.json");
}

TEST(SafetensorsIndex, ParsesTheHuggingFaceLayout) {
  const SafetensorsIndex idx = parse(
      R"({"metadata": {"total_size": 96, "format": "pt"},
          "weight_map": {"b": "model-00002-of-00002.safetensors",
                         "a": "model-00001-of-00002.safetensors",
                         "c": "model-00002-of-00002.safetensors"}})");
  EXPECT_EQ(idx.dir, "/d");
  ASSERT_EQ(idx.weight_map.size(), 3u);
  EXPECT_EQ(idx.weight_map[0].first, "a");  // sorted by tensor name
  EXPECT_EQ(idx.shards, std::vector<std::string>({"model-00001-of-00002.safetensors",
                                                  "model-00002-of-00002.safetensors"}));
  EXPECT_EQ(idx.metadata[0], std::make_pair(std::string("total_size"), std::string("96")));
  EXPECT_EQ(idx.shard_path("x.safetensors"), "/d/x.safetensors");
  // names outside a numbered series are fine
  EXPECT_NO_THROW(parse(R"({"weight_map": {"a": "first.safetensors", "b": "second.safetensors"}})"));
}

TEST(SafetensorsIndex, RefusesMalformedIndexes) {
  EXPECT_MIXQ_ERROR(parse("[]"), "must be a JSON object");
  EXPECT_MIXQ_ERROR(parse("{}"), "no \"weight_map\" (not a safetensors index file)");
  EXPECT_MIXQ_ERROR(parse(R"({"weight_map": []})"), "\"weight_map\" must be an object");
  EXPECT_MIXQ_ERROR(parse(R"({"weight_map": {}})"), "\"weight_map\" is empty");
  EXPECT_MIXQ_ERROR(parse(R"({"weight_map": {"a": 3}})"), "weight_map[\"a\"] must be a file name");
  EXPECT_MIXQ_ERROR(parse(R"({"metadata": 1, "weight_map": {"a": "x.safetensors"}})"),
                    "\"metadata\" must be an object");
  for (const char* bad : {"../x.safetensors", "/etc/passwd", "", ".", "..", "d/x.safetensors"})
    EXPECT_MIXQ_ERROR(parse(std::string(R"({"weight_map": {"a": ")") + bad + "\"}}"),
                      "is not a plain file name");
  EXPECT_MIXQ_ERROR(parse(R"({"weight_map": {"a": "pytorch_model.bin"}})"),
                    "is not a .safetensors file");
  EXPECT_MIXQ_ERROR(parse(R"({"weight_map": {"a": "model-00001-of-00003.safetensors",
                                             "b": "model-00003-of-00003.safetensors"}})"),
                    "names 2 of the 3 shards", "no tensor is in shard 2");
  EXPECT_MIXQ_ERROR(parse(R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                             "b": "other-00002-of-00002.safetensors"}})"),
                    "belong to different series");
  EXPECT_MIXQ_ERROR(parse(R"({"weight_map": {"a": "model-00003-of-00002.safetensors"}})"),
                    "numbered outside 1..2");
  EXPECT_MIXQ_ERROR(parse(R"({"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}})"),
                    "duplicate key \"a\"");
  EXPECT_MIXQ_ERROR(parse("{\"weight_map\": {\"a\": "), "JSON");
}

// GPTQ 4-bit K = 32, N = 8, one group, act-order g_idx; plus a dense matrix and a vector.
struct Tensors {
  std::vector<int32_t> qweight = std::vector<int32_t>(4 * 8), qzeros{0x76543210}, g_idx;
  std::vector<uint16_t> scales = std::vector<uint16_t>(8, 0x3C00);
  std::vector<float> dense = std::vector<float>(4 * 32, 0.5f), vec = std::vector<float>(8, 1.f);
  Tensors() {
    for (size_t i = 0; i < qweight.size(); ++i) qweight[i] = static_cast<int32_t>(0x12345678u * (i + 1));
    for (int k = 0; k < 32; ++k) g_idx.push_back(0);
  }
  void add(SafetensorsWriter& w, const std::string& name) const {
    if (name == "layer.qweight") w.add(name, "I32", {4, 8}, qweight.data(), 4 * 8 * 4);
    if (name == "layer.qzeros") w.add(name, "I32", {1, 1}, qzeros.data(), 4);
    if (name == "layer.g_idx") w.add(name, "I32", {32}, g_idx.data(), 32 * 4);
    if (name == "layer.scales") w.add(name, "F16", {1, 8}, scales.data(), 16);
    if (name == "dense.weight") w.add(name, "F32", {4, 32}, dense.data(), 4 * 32 * 4);
    if (name == "norm.weight") w.add(name, "F32", {8}, vec.data(), 32);
  }
};

class Sharded : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "mixq_sharded_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(mkdtemp(buf.data()), nullptr);
    dir_ = buf.data();
    // each module's parts spread over the three shards
    write_shard(kS1, {"layer.qweight", "dense.weight"});
    write_shard(kS2, {"layer.qzeros", "layer.g_idx", "norm.weight"});
    write_shard(kS3, {"layer.scales"});
    write_index({{"layer.qweight", kS1}, {"dense.weight", kS1}, {"layer.qzeros", kS2},
                 {"layer.g_idx", kS2}, {"norm.weight", kS2}, {"layer.scales", kS3}});
    SafetensorsWriter one;
    for (const char* n : {"layer.qweight", "layer.qzeros", "layer.g_idx", "layer.scales",
                          "dense.weight", "norm.weight"})
      t_.add(one, n);
    ASSERT_EQ(::mkdir((dir_ + "/one").c_str(), 0700), 0);
    one.write(dir_ + "/one/model.safetensors");
  }
  void TearDown() override {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir_.c_str());
  }
  void write_shard(const std::string& name, const std::vector<std::string>& tensors,
                   const std::vector<std::pair<std::string, std::string>>& meta = {}) {
    SafetensorsWriter w;
    for (const auto& t : tensors) t_.add(w, t);
    for (const auto& kv : meta) w.set_metadata(kv.first, kv.second);
    w.write(dir_ + "/" + name);
  }
  void write_index(const std::vector<std::pair<std::string, std::string>>& map) {
    std::string text = "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {";
    for (size_t i = 0; i < map.size(); ++i)
      text += (i ? ", \"" : "\"") + map[i].first + "\": \"" + map[i].second + "\"";
    std::ofstream(index()) << text << "}}";
  }
  std::string index() const { return dir_ + "/model.safetensors.index.json"; }
  std::string dir_;
  Tensors t_;
};

TEST_F(Sharded, OneViewOverAllShards) {
  for (const std::string& path : {index(), dir_, dir_ + "/"}) {
    const auto c = SafetensorsCheckpoint::open(path);
    EXPECT_TRUE(c->sharded());
    EXPECT_EQ(c->tensors().size(), 6u);
    ASSERT_NE(c->find("layer.scales"), nullptr);
    EXPECT_EQ(c->find("layer.scales")->shape, std::vector<int64_t>({1, 8}));
    EXPECT_EQ(c->find("missing"), nullptr);
    EXPECT_EQ(c->metadata().at("index.total_size"), "1");
    EXPECT_EQ(c->files().size(), 4u);
  }
  EXPECT_EQ(checkpoint_files(index()).size(), 4u);
}

TEST_F(Sharded, ModulesSplitAcrossShardsLoadLikeOneFile) {
  const mixq::QuantizedWeight a = load_weight(index(), "layer");
  const mixq::QuantizedWeight b = load_weight(dir_ + "/one/model.safetensors", "layer");
  EXPECT_EQ(a.codes, b.codes);
  EXPECT_EQ(a.scales, b.scales);
  EXPECT_EQ(a.zeros, b.zeros);
  EXPECT_EQ(mixq::dequantize_to_f32(a), mixq::dequantize_to_f32(b));
  const CheckpointInfo info = inspect_checkpoint(dir_);
  EXPECT_EQ(info.format, "safetensors (gptq), 3 shards");
  ASSERT_EQ(info.tensors.size(), 3u);  // dense.weight, layer, norm.weight
  EXPECT_EQ(info.tensors[1].name, "layer");
  EXPECT_TRUE(info.tensors[1].is_weight);
}

TEST_F(Sharded, LoadWeightOpensOnlyTheShardsItNeeds) {
  std::ofstream(dir_ + "/" + kS3, std::ios::trunc) << "garbage";  // layer.scales' shard
  EXPECT_EQ(load_weight(index(), "dense.weight").N, 4);  // shard 1 only
  const auto sub = SafetensorsCheckpoint::open_subset(index(), {"norm.weight"});
  EXPECT_EQ(sub->tensors().size(), 1u);
  EXPECT_MIXQ_ERROR(load_weight(index(), "layer"), kS3, "truncated safetensors file");
  EXPECT_MIXQ_ERROR(inspect_checkpoint(index()), kS3);
}

TEST_F(Sharded, ShardsMustAgreeWithTheIndex) {
  ASSERT_EQ(std::remove((dir_ + "/" + std::string(kS2)).c_str()), 0);
  EXPECT_MIXQ_ERROR_CODE(mixq::ErrorCode::Io, inspect_checkpoint(index()),
                         "shard \"" + std::string(kS2) + "\" (3 tensor(s), e.g. \"layer.g_idx\")",
                         "is missing");
  write_shard(kS2, {"layer.qzeros", "layer.g_idx", "norm.weight"});

  // a tensor found in a shard other than the one the index names
  write_index({{"layer.qweight", kS1}, {"dense.weight", kS1}, {"layer.qzeros", kS2},
               {"layer.g_idx", kS2}, {"norm.weight", kS3}, {"layer.scales", kS3}});
  EXPECT_MIXQ_ERROR(SafetensorsCheckpoint::open_subset(index(), {"layer.qzeros"}),
                    std::string(kS2) + ": holds tensor \"norm.weight\"", "puts in shard \"" +
                    std::string(kS3) + "\"");
  EXPECT_MIXQ_ERROR(inspect_checkpoint(index()), "norm.weight");
  // a listed tensor the shard lacks, a shard tensor the index does not list
  write_index({{"layer.qweight", kS1}, {"dense.weight", kS1}, {"ghost", kS1},
               {"layer.qzeros", kS2}, {"layer.g_idx", kS2}, {"norm.weight", kS2},
               {"layer.scales", kS3}});
  EXPECT_MIXQ_ERROR(inspect_checkpoint(index()), "lists tensor \"ghost\" in shard", "does not hold it");
  write_index({{"layer.qweight", kS1}, {"dense.weight", kS1}, {"layer.qzeros", kS2},
               {"layer.g_idx", kS2}, {"layer.scales", kS3}});
  EXPECT_MIXQ_ERROR(inspect_checkpoint(index()), "holds tensor \"norm.weight\", which the index",
                    "does not list");
  // a file of the same series the index does not name
  write_index({{"layer.qweight", kS1}, {"dense.weight", kS1}, {"layer.qzeros", kS2},
               {"layer.g_idx", kS2}, {"norm.weight", kS2}, {"layer.scales", kS3}});
  write_shard("model-00004-of-00003.safetensors", {"norm.weight"});
  EXPECT_MIXQ_ERROR(inspect_checkpoint(dir_), "shard file \"model-00004-of-00003.safetensors\"",
                    "not in weight_map");
}

TEST_F(Sharded, MixqMetadataMustAgreeAcrossShards) {
  write_shard(kS1, {"layer.qweight", "dense.weight"}, {{"mixq.source", "a"}});
  write_shard(kS2, {"layer.qzeros", "layer.g_idx", "norm.weight"}, {{"mixq.source", "b"}});
  EXPECT_MIXQ_ERROR(SafetensorsCheckpoint::open(index()), "metadata \"mixq.source\" = \"b\"",
                    "disagrees with another shard's \"a\"");
}

TEST_F(Sharded, DirectoriesWithoutAnIndex) {
  const std::string d = dir_ + "/one";
  EXPECT_EQ(checkpoint_in_directory(d), d + "/model.safetensors");  // HF single-file layout
  EXPECT_EQ(inspect_checkpoint(d).tensors.size(), 3u);
  ASSERT_EQ(::mkdir((dir_ + "/empty").c_str(), 0700), 0);
  EXPECT_MIXQ_ERROR(inspect_checkpoint(dir_ + "/empty"), "holds no *.safetensors.index.json");
  std::ofstream(dir_ + "/other.safetensors.index.json") << "{}";
  EXPECT_MIXQ_ERROR(inspect_checkpoint(dir_), "holds 2 index files");
}

}  // namespace
