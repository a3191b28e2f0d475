// safetensors container: JSON header parser, reader validation, writer, files > 4 GiB.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "formats/safetensors/st_json.hpp"
#include "mixq/formats/safetensors.hpp"
#include "test_safetensors_util.hpp"

using namespace mixq;
using namespace mixq::formats;
using mixq_test::expect_error;
using mixq_test::ScratchDir;
using mixq_test::st_bytes;
using mixq_test::write_bytes;

namespace {

json::Value parse(const std::string& s) {
  return json::parse(s.data(), s.size(), "t");
}

TEST(StJson, ParsesNestedValues) {
  const auto v = parse(R"( {"a": [1, -2, 3.5, 1e3, true, false, null], "b": {"c": "x\"y"}} )");
  ASSERT_TRUE(v.is_object());
  const auto* a = v.get("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->array.size(), 7u);
  EXPECT_TRUE(a->array[0].is_int());
  EXPECT_EQ(a->array[1].integer, -2);
  EXPECT_EQ(a->array[2].kind, json::Value::Kind::Float);
  EXPECT_EQ(a->array[3].kind, json::Value::Kind::Float);  // 1e3 is not an integer literal
  EXPECT_DOUBLE_EQ(a->array[3].number, 1000.0);
  EXPECT_TRUE(a->array[4].boolean);
  EXPECT_EQ(v.get("b")->get("c")->string, "x\"y");
}

TEST(StJson, EscapesAndSurrogatePairs) {
  const auto v = parse(R"("\u00e9\n\t\/\\\ud83d\ude00\u20ac")");
  EXPECT_EQ(v.string, "\xC3\xA9\n\t/\\\xF0\x9F\x98\x80\xE2\x82\xAC");
  std::string quoted;
  json::append_quoted(quoted, std::string("a\"b\\c\x01", 6));
  EXPECT_EQ(quoted, "\"a\\\"b\\\\c\\u0001\"");
  EXPECT_EQ(parse(quoted).string, std::string("a\"b\\c\x01", 6));
}

TEST(StJson, Int64Limits) {
  EXPECT_EQ(parse("9223372036854775807").integer, INT64_MAX);
  EXPECT_EQ(parse("-9223372036854775808").integer, INT64_MIN);
  EXPECT_EQ(parse("9223372036854775808").kind, json::Value::Kind::Float);
  EXPECT_EQ(parse("99999999999999999999999").kind, json::Value::Kind::Float);
}

TEST(StJson, RejectsMalformed) {
  for (const char* bad : {"",
                          "{",
                          "{\"a\":1,}",
                          "[1,]",
                          "{\"a\" 1}",
                          "{'a':1}",
                          "01",
                          "1.",
                          ".5",
                          "-",
                          "1e",
                          "tru",
                          "nul",
                          "\"abc",
                          "\"\\x\"",
                          "\"\\ud800\"",
                          "\"\\udc00\"",
                          "\"\\ud800\\u0041\"",
                          "\"\\u12g4\"",
                          "{\"a\":1,\"a\":2}",
                          "[1] 2",
                          "\"\x01\"",
                          "\"\xC0\xAF\"",
                          "\"\xED\xA0\x80\"",
                          "\"\xF5\x80\x80\x80\"",
                          "\"\xE2\x82\"",
                          "NaN",
                          "{\"a\":Infinity}",
                          "/*c*/1"}) {
    EXPECT_THROW(parse(bad), Error) << bad;
  }
  std::string deep(200, '[');
  deep += std::string(200, ']');
  expect_error([&] { parse(deep); }, ErrorCode::Format, {"nesting too deep"});
  expect_error([&] { parse("{\"k\":1,\"k\":2}"); }, ErrorCode::Format, {"duplicate key \"k\""});
}

TEST(Safetensors, DTypeSizes) {
  EXPECT_EQ(safetensors_dtype_size("F8_E4M3"), 1);
  EXPECT_EQ(safetensors_dtype_size("BF16"), 2);
  EXPECT_EQ(safetensors_dtype_size("C64"), 8);
  EXPECT_EQ(safetensors_dtype_size("F4"), 0);
  EXPECT_EQ(safetensors_dtype_bits("F4"), 4);
  EXPECT_EQ(safetensors_dtype_bits("F6_E3M2"), 6);
  EXPECT_EQ(safetensors_dtype_size("Q4"), 0);
  uint64_t n = 0;
  EXPECT_TRUE(safetensors_tensor_bytes("F6_E2M3", {4}, &n));
  EXPECT_EQ(n, 3u);
  EXPECT_FALSE(safetensors_tensor_bytes("F4", {3}, &n));  // 12 bits: not a whole byte
  EXPECT_FALSE(safetensors_tensor_bytes("F32", {int64_t(1) << 40, int64_t(1) << 30}, &n));
}

TEST(Safetensors, WriterReaderRoundTripAndAlignment) {
  ScratchDir dir;
  std::vector<uint8_t> u8 = {1, 2, 3};  // odd size, added first
  std::vector<double> f64 = {1.5, -2.25};
  std::vector<uint16_t> f16(5);
  for (int i = 0; i < 5; ++i) f16[i] = static_cast<uint16_t>(0x3C00 + i);
  std::vector<float> scalar = {42.f};
  SafetensorsWriter w;
  w.add("bytes", "U8", {3}, u8.data(), 3);
  w.add("halfs", "F16", {5}, f16.data(), 10);
  w.add("empty", "F32", {0, 4}, nullptr, 0);
  w.add("doubles", "F64", {2, 1}, f64.data(), 16);
  w.add("scalar", "F32", {}, scalar.data(), 4);
  w.add("weird \"name\"\n\xC3\xA9", "I8", {1}, u8.data(), 1);
  w.set_metadata("format", "pt");
  w.set_metadata("quote\"key", "va\\lue");
  const std::string path = dir.file("a.safetensors");
  w.write(path);
  auto f = SafetensorsFile::open(path);
  ASSERT_EQ(f->tensors().size(), 6u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->metadata().at("quote\"key"), "va\\lue");
  const auto& d = f->get("doubles");
  EXPECT_EQ(d.dtype, "F64");
  EXPECT_EQ(d.shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(std::memcmp(d.data, f64.data(), 16), 0);
  EXPECT_EQ(std::memcmp(f->get("halfs").data, f16.data(), 10), 0);
  EXPECT_EQ(std::memcmp(f->get("bytes").data, u8.data(), 3), 0);
  EXPECT_EQ(f->get("scalar").shape.size(), 0u);
  EXPECT_EQ(f->get("empty").nbytes, 0u);
  EXPECT_NE(f->find("weird \"name\"\n\xC3\xA9"), nullptr);
  EXPECT_EQ(f->find("nope"), nullptr);
  expect_error([&] { f->get("nope"); }, ErrorCode::InvalidArgument, {"nope"});
  // Every tensor is naturally aligned in the file (buffer 8-aligned, larger elements first).
  for (const auto& t : f->tensors()) {
    const int sz = safetensors_dtype_size(t.dtype);
    EXPECT_EQ(t.offset % static_cast<uint64_t>(sz), 0u) << t.name;
  }
  EXPECT_EQ((f->get("doubles").offset), f->get("doubles").offset / 8 * 8);
}

TEST(Safetensors, WriterRejectsBadInput) {
  SafetensorsWriter w;
  float x[2] = {1, 2};
  EXPECT_THROW(w.add("a", "F32", {3}, x, 8), Error);
  EXPECT_THROW(w.add("a", "Q4", {2}, x, 8), Error);
  EXPECT_THROW(w.add("__metadata__", "F32", {2}, x, 8), Error);
  w.add("a", "F32", {2}, x, 8);
  EXPECT_THROW(w.add("a", "F32", {2}, x, 8), Error);
  expect_error([&] { w.write("/nonexistent-dir/x.safetensors"); }, ErrorCode::Io, {"nonexistent"});
}

TEST(Safetensors, AcceptsPaddingAndAllDTypes) {
  ScratchDir dir;
  std::string header = "{";
  std::string data;
  uint64_t off = 0;
  for (const char* dt :
       {"BOOL",        "U8",          "I8",      "I16", "U16",     "F16",    "BF16",    "I32",
        "U32",         "F32",         "F64",     "I64", "U64",     "C64",    "F8_E4M3", "F8_E5M2",
        "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2"}) {
    const int bits = safetensors_dtype_bits(dt);
    const uint64_t n = 8 * static_cast<uint64_t>(bits) / 8;  // 8 elements
    if (header.size() > 1) header += ",";
    header += std::string("\"t_") + dt + "\":{\"dtype\":\"" + dt +
              "\",\"shape\":[2,4],\"data_offsets\":[" + std::to_string(off) + "," +
              std::to_string(off + n) + "]}";
    data += std::string(n, '\x11');
    off += n;
  }
  header += "}   \n ";
  const std::string path = dir.file("all.safetensors");
  write_bytes(path, st_bytes(header, data));
  auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f->tensors().size(), 22u);
  EXPECT_EQ(f->get("t_F4").nbytes, 4u);
  EXPECT_EQ(f->get("t_F6_E2M3").nbytes, 6u);
}

struct BadCase {
  const char* label;
  std::string bytes;
  ErrorCode code;
  const char* fragment;
};

std::string tensor(const char* name, const char* dtype, const char* shape, const char* offs) {
  return std::string("\"") + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offs + "}";
}

TEST(Safetensors, RejectsBadFilesWithClearErrors) {
  ScratchDir dir;
  const std::string d8(8, '\x01');
  const std::string ok = "{" + tensor("a", "F32", "[2]", "[0,8]") + "}";
  std::vector<BadCase> cases = {
      {"empty", "", ErrorCode::Format, "truncated"},
      {"short", "abc", ErrorCode::Format, "truncated"},
      {"length past end", st_bytes(ok, d8, 1000), ErrorCode::Format, "past the end"},
      {"huge length", st_bytes(ok, d8, uint64_t(1) << 62), ErrorCode::Format, "exceeds the limit"},
      {"not an object", st_bytes("[1,2]   ", ""), ErrorCode::Format, "does not start with '{'"},
      {"bad json", st_bytes("{\"a\":}", d8), ErrorCode::Format, "JSON"},
      {"trailing garbage", st_bytes(ok + "x", d8), ErrorCode::Format, "trailing"},
      {"unknown dtype", st_bytes("{" + tensor("a", "F12", "[2]", "[0,8]") + "}", d8),
       ErrorCode::Format, "unknown dtype \"F12\""},
      {"size mismatch", st_bytes("{" + tensor("a", "F32", "[3]", "[0,8]") + "}", d8),
       ErrorCode::Format, "needs 12 bytes"},
      {"overflowing shape",
       st_bytes("{" + tensor("a", "F32", "[4294967296,4294967296]", "[0,8]") + "}", d8),
       ErrorCode::Format, "overflows"},
      {"float shape", st_bytes("{" + tensor("a", "F32", "[2.0]", "[0,8]") + "}", d8),
       ErrorCode::Format, "non-negative integer"},
      {"negative shape", st_bytes("{" + tensor("a", "F32", "[-2]", "[0,8]") + "}", d8),
       ErrorCode::Format, "non-negative integer"},
      {"huge offset",
       st_bytes("{" + tensor("a", "U8", "[8]", "[0,18446744073709551616]") + "}", d8),
       ErrorCode::Format, "data_offsets[1]"},
      {"offset out of bounds", st_bytes("{" + tensor("a", "U8", "[8]", "[4,12]") + "}", d8),
       ErrorCode::Format, "run past the data buffer"},
      {"reversed offsets", st_bytes("{" + tensor("a", "U8", "[0]", "[8,0]") + "}", d8),
       ErrorCode::Format, "reversed"},
      {"overlap",
       st_bytes(
           "{" + tensor("a", "U8", "[6]", "[0,6]") + "," + tensor("b", "U8", "[4]", "[4,8]") + "}",
           d8),
       ErrorCode::Format, "overlaps"},
      {"hole",
       st_bytes(
           "{" + tensor("a", "U8", "[2]", "[0,2]") + "," + tensor("b", "U8", "[4]", "[4,8]") + "}",
           d8),
       ErrorCode::Format, "hole"},
      {"trailing bytes", st_bytes("{" + tensor("a", "U8", "[4]", "[0,4]") + "}", d8),
       ErrorCode::Format, "trailing bytes"},
      {"duplicate tensor",
       st_bytes(
           "{" + tensor("a", "U8", "[4]", "[0,4]") + "," + tensor("a", "U8", "[4]", "[4,8]") + "}",
           d8),
       ErrorCode::Format, "duplicate key \"a\""},
      {"metadata non-string", st_bytes("{\"__metadata__\":{\"k\":1}}", ""), ErrorCode::Format,
       "__metadata__ \"k\" must be a string"},
      {"metadata not object", st_bytes("{\"__metadata__\":[]}", ""), ErrorCode::Format,
       "__metadata__ must be an object"},
      {"unknown field",
       st_bytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8],\"x\":1}}", d8),
       ErrorCode::Format, "unknown field \"x\""},
      {"missing field", st_bytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[8]}}", d8), ErrorCode::Format,
       "needs dtype, shape and data_offsets"},
      {"three offsets", st_bytes("{" + tensor("a", "U8", "[8]", "[0,4,8]") + "}", d8),
       ErrorCode::Format, "array of 2"},
      {"sub-byte straddle",
       st_bytes("{" + tensor("a", "F4", "[3]", "[0,2]") + "}", std::string(2, 'x')),
       ErrorCode::Format, "byte boundary"},
      {"bad utf8 name", st_bytes("{\"\xFF\":1}", ""), ErrorCode::Format, "UTF-8"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = dir.file("bad" + std::to_string(i) + ".safetensors");
    write_bytes(path, cases[i].bytes);
    SCOPED_TRACE(cases[i].label);
    expect_error([&] { SafetensorsFile::open(path); }, cases[i].code, {cases[i].fragment, "bad"});
  }
  expect_error([&] { SafetensorsFile::open(dir.file("missing.safetensors")); }, ErrorCode::Io,
               {"missing.safetensors"});
  expect_error([&] { SafetensorsFile::open(dir.path()); }, ErrorCode::Io, {"not a regular file"});
}

TEST(Safetensors, TruncationsOfAValidFileAllFail) {
  ScratchDir dir;
  std::vector<float> a = {1, 2, 3, 4, 5};
  SafetensorsWriter w;
  w.add("a", "F32", {5}, a.data(), 20);
  w.set_metadata("m", "v");
  const std::string path = dir.file("v.safetensors");
  w.write(path);
  FILE* fp = std::fopen(path.c_str(), "rb");
  std::string bytes(4096, '\0');
  bytes.resize(std::fread(&bytes[0], 1, bytes.size(), fp));
  std::fclose(fp);
  ASSERT_NO_THROW(SafetensorsFile::open(path));
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string p = dir.file("t.safetensors");
    write_bytes(p, bytes.substr(0, n));
    EXPECT_THROW(SafetensorsFile::open(p), Error) << "truncated to " << n;
  }
}

// A sparse file whose single tensor is larger than 4 GiB: offsets and sizes are 64-bit end to end.
TEST(Safetensors, FilesLargerThan4GiB) {
  ScratchDir dir;
  const uint64_t n = (uint64_t(1) << 32) + 24;
  std::string header = "{\"big\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(n) +
                       "],\"data_offsets\":[0," + std::to_string(n) + "]}}";
  while (header.size() % 8) header += ' ';
  const std::string path = dir.file("big.safetensors");
  write_bytes(path, st_bytes(header, ""));
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const uint64_t total = 8 + header.size() + n;
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0) {
    ::close(fd);
    GTEST_SKIP() << "file system cannot hold a sparse 4 GiB file";
  }
  const char tail = 0x5A;
  ASSERT_EQ(::pwrite(fd, &tail, 1, static_cast<off_t>(total - 1)), 1);
  ::close(fd);
  auto f = SafetensorsFile::open(path);
  const auto& t = f->get("big");
  EXPECT_EQ(t.nbytes, n);
  EXPECT_EQ(t.shape[0], static_cast<int64_t>(n));
  EXPECT_EQ(f->file_size(), total);
  EXPECT_EQ(t.data[n - 1], 0x5A);
  EXPECT_EQ(t.data[0], 0);
}

}  // namespace
