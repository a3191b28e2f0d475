// .npy reader/writer: round trips of every supported dtype and rank, numpy-written files (when
// python3 with numpy is available), and strict rejection of malformed headers and data.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/formats/npy.hpp"

namespace {

using mixq::DType;
using mixq::formats::NpyArray;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "mixq_npy_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<uint8_t> image(const std::string& header_dict, int version, size_t data_bytes) {
  std::string dict = header_dict;
  const size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(version), 0};
  const uint32_t len = static_cast<uint32_t>(dict.size());
  for (size_t b = 0; b < (version == 1 ? 2u : 4u); ++b) out.push_back((len >> (8 * b)) & 0xFF);
  out.insert(out.end(), dict.begin(), dict.end());
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<uint8_t>(i * 37 + 1));
  return out;
}

NpyArray parse(const std::vector<uint8_t>& bytes) {
  return mixq::formats::parse_npy(bytes.data(), bytes.size(), "test.npy");
}

void expect_format_error(const std::vector<uint8_t>& bytes, const std::string& needle) {
  try {
    parse(bytes);
    FAIL() << "no error; expected one mentioning '" << needle << "'";
  } catch (const mixq::Error& e) {
    EXPECT_EQ(e.code(), mixq::ErrorCode::Format) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test.npy"), std::string::npos) << e.what();
  }
}

TEST(Npy, RoundTripEveryDtypeAndRank) {
  std::mt19937 gen(7);
  const std::vector<std::vector<int64_t>> shapes = {{}, {5}, {3, 7}, {2, 3, 5}, {1, 0}, {65, 1}};
  for (DType t : {DType::F32, DType::F16, DType::I8, DType::I32}) {
    for (const auto& shape : shapes) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      const size_t bytes = static_cast<size_t>(n) * (mixq::dtype_bits(t) / 8);
      std::vector<uint8_t> data(bytes);
      for (auto& b : data) b = static_cast<uint8_t>(gen());
      if (t == DType::F16)  // avoid NaN payloads so that byte equality is meaningful anyway
        for (size_t i = 1; i < bytes; i += 2) data[i] &= 0x3F;
      const std::string path = temp_path("rt.npy");
      mixq::formats::write_npy(path, t, shape, data.data());
      const NpyArray a = mixq::formats::read_npy(path);
      EXPECT_EQ(a.dtype, t);
      EXPECT_EQ(a.shape, shape);
      ASSERT_EQ(a.numel(), n);
      // An empty vector's data() may be null, and memcmp's arguments must not be even for 0
      // bytes (UBSan: nonnull-attribute).
      if (bytes > 0) {
        EXPECT_EQ(std::memcmp(a.data.data(), data.data(), bytes), 0);
      }
      std::remove(path.c_str());
    }
  }
}

TEST(Npy, HeaderIsWhatNumpyWrites) {
  const std::string h = mixq::formats::npy_header(DType::F32, {3, 4});
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.substr(10, 60).find("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"),
            0u);
  EXPECT_EQ(h.back(), '\n');
  EXPECT_NE(mixq::formats::npy_header(DType::I8, {5}).find("(5,)"), std::string::npos);
  EXPECT_NE(mixq::formats::npy_header(DType::I8, {}).find("'shape': ()"), std::string::npos);
}

TEST(Npy, AcceptsVariantsNumpyAccepts) {
  // Reordered keys, double quotes, version 2.0, no trailing comma.
  NpyArray a = parse(image("{\"shape\": (2,3), \"fortran_order\": False, \"descr\": \"<i4\"}", 2, 24));
  EXPECT_EQ(a.dtype, DType::I32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.data.as<uint8_t>()[0], 1);
  a = parse(image("{'descr': '|i1', 'fortran_order': False, 'shape': (4,), }", 3, 4));
  EXPECT_EQ(a.dtype, DType::I8);
}

TEST(Npy, RejectsMalformedInput) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  expect_format_error(image("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 1, 24),
                      "Fortran");
  expect_format_error(image("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 24),
                      "big-endian");
  expect_format_error(image("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 1, 48),
                      "<f8");
  expect_format_error(image(ok, 1, 23), "truncated");
  expect_format_error(image(ok, 1, 25), "after the array data");
  expect_format_error(image("{'descr': '<f4', 'shape': (2, 3), }", 1, 24), "fortran_order");
  expect_format_error(image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", 1, 24),
                      "unexpected");
  expect_format_error(image("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", 1, 24),
                      "dimension");
  expect_format_error(
      image("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", 1, 8),
      "overflows");
  expect_format_error(
      image("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 100000), }", 1, 8),
      "truncated");
  expect_format_error(image(ok + "junk", 1, 24), "trailing");
  std::vector<uint8_t> bad_magic = image(ok, 1, 24);
  bad_magic[1] = 'X';
  expect_format_error(bad_magic, "magic");
  std::vector<uint8_t> long_header = image(ok, 1, 24);
  long_header[8] = 0xFF;
  long_header[9] = 0xFF;
  expect_format_error(long_header, "header length");
  std::vector<uint8_t> v9 = image(ok, 1, 24);
  v9[6] = 9;
  expect_format_error(v9, "version");
  const std::vector<uint8_t> full = image(ok, 1, 24);
  expect_format_error(std::vector<uint8_t>(full.begin(), full.begin() + 9), "truncated");
}

TEST(Npy, MissingFileIsIoError) {
  try {
    mixq::formats::read_npy("/nonexistent/dir/x.npy");
    FAIL();
  } catch (const mixq::Error& e) {
    EXPECT_EQ(e.code(), mixq::ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.npy"), std::string::npos);
  }
}

// numpy as an external oracle: files numpy writes load with the right values, and numpy loads
// ours. Skipped (visibly) without python3 + numpy.
TEST(Npy, NumpyOracle) {
  if (std::system("python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 with numpy not available";
  const std::string theirs = temp_path("np_written.npy");
  const std::string ours = temp_path("ours.npy");
  const std::string cmd =
      "python3 -c \"import numpy as np; np.save('" + theirs +
      "', (np.arange(-12, 12, dtype=np.float32) / 8).astype(np.float16).reshape(2, 3, 4))\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const NpyArray a = mixq::formats::read_npy(theirs);
  ASSERT_EQ(a.dtype, DType::F16);
  ASSERT_EQ(a.shape, (std::vector<int64_t>{2, 3, 4}));
  // -12/8 = -1.5 is 0xBE00 in f16; 11/8 = 1.375 is 0x3D80.
  EXPECT_EQ(a.data.as<uint16_t>()[0], 0xBE00);
  EXPECT_EQ(a.data.as<uint16_t>()[23], 0x3D80);

  std::vector<int32_t> v = {1, -2, 300000, -7, 5, 6};
  mixq::formats::write_npy(ours, DType::I32, {3, 2}, v.data());
  const std::string check = "python3 -c \"import numpy as np; a = np.load('" + ours +
                            "'); assert a.dtype == np.int32 and a.shape == (3, 2) and "
                            "a.tolist() == [[1, -2], [300000, -7], [5, 6]], a\"";
  EXPECT_EQ(std::system(check.c_str()), 0);
  std::remove(theirs.c_str());
  std::remove(ours.c_str());
}

}  // namespace
