// InputFile / OutputFile / check_output_path: inputs must be regular files and are refused
// before they can block; outputs appear only complete (temporary file + rename), keep the old
// file on failure, follow symbolic links, keep permissions, and can never be an input.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "mixq/formats/input_file.hpp"
#include "mixq/formats/output_file.hpp"
#include "test_util.hpp"

namespace {

using mixq::formats::InputFile;
using mixq::formats::OutputFile;
using mixq::formats::check_output_path;

class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "mixq_fileio_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(mkdtemp(buf.data()), nullptr);
    dir_ = buf.data();
  }
  void TearDown() override {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir_.c_str());
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  static void put(const std::string& p, const std::string& text) {
    std::ofstream(p, std::ios::binary) << text;
  }
  static std::string get(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  int entries() const {  // files in the directory, temporary ones included
    int n = 0;
    for (const std::string& line : split_lines(run("ls -A '" + dir_ + "'"))) n += !line.empty();
    return n;
  }
  static std::string run(const std::string& cmd) {
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[256];
      while (size_t k = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, k);
      pclose(p);
    }
    return out;
  }
  static std::vector<std::string> split_lines(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string line; std::getline(ss, line);) out.push_back(line);
    return out;
  }
  std::string dir_;
};

TEST_F(FileIo, InputsMustBeRegularFiles) {
  put(path("f"), "abc");
  EXPECT_EQ(InputFile(path("f"), "input").read_all(10), std::vector<uint8_t>({'a', 'b', 'c'}));
  EXPECT_MIXQ_ERROR(InputFile(path("f"), "input").read_all(2), "larger than the limit");
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  // no writer: a blocking open would hang here
  EXPECT_MIXQ_ERROR(InputFile(path("fifo"), "input"), "input '", "fifo' is a FIFO");
  EXPECT_MIXQ_ERROR(InputFile(dir_, "checkpoint"), "is a directory, not a regular file");
  EXPECT_MIXQ_ERROR(InputFile("/dev/zero", "input"), "is a character device");
  EXPECT_MIXQ_ERROR(InputFile(path("none"), "input"), "cannot open: No such file");
}

TEST_F(FileIo, OutputAppearsOnlyWhenCommitted) {
  const std::string p = path("out.bin");
  put(p, "old contents");
  {
    OutputFile o(p);
    o.write("new", 3);
    EXPECT_NE(o.temp_path(), p);
    EXPECT_EQ(get(p), "old contents");  // nothing visible before commit
    EXPECT_EQ(entries(), 2);
    o.commit();
  }
  EXPECT_EQ(get(p), "new");
  EXPECT_EQ(entries(), 1);
  {
    OutputFile o(p);  // abandoned (an exception half-way): the old file stays, no temporary
    o.write(std::string(3 << 20, 'x').data(), 3 << 20);
  }
  EXPECT_EQ(get(p), "new");
  EXPECT_EQ(entries(), 1);
}

TEST_F(FileIo, ReplacingFollowsLinksAndKeepsTheMode) {
  const std::string target = path("real"), link = path("link");
  put(target, "x");
  ASSERT_EQ(::chmod(target.c_str(), 0640), 0);
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  OutputFile o(link);
  o.write("replaced", 8);
  o.commit();
  struct stat lst {}, st {};
  ASSERT_EQ(::lstat(link.c_str(), &lst), 0);
  EXPECT_TRUE(S_ISLNK(lst.st_mode));  // the link is kept, its target replaced
  EXPECT_EQ(get(target), "replaced");
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST_F(FileIo, StreamsAreWrittenInPlace) {
  OutputFile o("/dev/null");
  EXPECT_TRUE(o.streamed());
  o.write("abc", 3);
  o.commit();
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  EXPECT_MIXQ_ERROR(OutputFile(path("fifo")), "no process is reading this FIFO");
}

TEST_F(FileIo, OutputPathsAreCheckedBeforeAnyWork) {
  put(path("in"), "input");
  EXPECT_NO_THROW(check_output_path(path("new"), "-o", {path("in")}));
  EXPECT_NO_THROW(check_output_path("/dev/null", "-o", {path("in")}));
  EXPECT_MIXQ_ERROR_CODE(mixq::ErrorCode::InvalidArgument,
                         check_output_path(path("in"), "-o", {path("x"), path("in")}),
                         "-o '", "in' is the input file '", "destroy the input");
  ASSERT_EQ(::link(path("in").c_str(), path("hard").c_str()), 0);
  ASSERT_EQ(::symlink(path("in").c_str(), path("soft").c_str()), 0);
  EXPECT_MIXQ_ERROR(check_output_path(path("hard"), "-o", {path("in")}), "is the input file");
  EXPECT_MIXQ_ERROR(check_output_path(path("soft"), "-o", {path("in")}), "is the input file");
  EXPECT_MIXQ_ERROR(check_output_path(path("in"), "-o", {path("soft")}), "is the input file");
  EXPECT_MIXQ_ERROR_CODE(mixq::ErrorCode::Io, check_output_path(path("nodir/x"), "--json"),
                         "--json '", "nodir/x': directory '", "' does not exist");
  EXPECT_MIXQ_ERROR(check_output_path(dir_, "-o"), "is a directory");
  EXPECT_MIXQ_ERROR(check_output_path(path("in") + "/x", "-o"), "in/x': Not a directory");
  ASSERT_EQ(::symlink(path("missing").c_str(), path("dangling").c_str()), 0);
  EXPECT_MIXQ_ERROR(check_output_path(path("dangling"), "-o"), "symbolic link to a missing file");
  EXPECT_MIXQ_ERROR(check_output_path("", "-o"), "empty");
}

}  // namespace
