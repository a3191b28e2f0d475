// Shared helpers for the safetensors-format unit tests: scratch directories, raw file writers,
// seeded random data.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "mixq/error.hpp"

namespace mixq_test {

// A fresh directory under the build's temp area, removed by the destructor.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/mixq_st_XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (d) path_ = d;
  }
  ~ScratchDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

// 8-byte little-endian length + header + data.
inline std::string st_bytes(const std::string& header, const std::string& data, uint64_t len) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xFF);
  return out + header + data;
}
inline std::string st_bytes(const std::string& header, const std::string& data) {
  return st_bytes(header, data, header.size());
}

// Expects a mixq::Error of `code` whose message contains every fragment.
template <typename F>
void expect_error(F&& f, mixq::ErrorCode code, std::initializer_list<const char*> fragments) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const mixq::Error& e) {
    EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code)) << e.what();
    for (const char* frag : fragments)
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << frag << "\"";
  }
}

}  // namespace mixq_test
