// libFuzzer target for the mixq command-line parser: the input is split at NUL bytes into an
// argv and parsed with the union of every subcommand's options, then the values go through the
// same helpers the subcommands use (integers and lists, FILE:TENSOR splitting, --only / --skip
// patterns matched against the other arguments, scheme names). Usage errors and mixq::Error are
// the expected outcomes; crashes, sanitizer reports and any other exception are findings.
#include <cstdint>
#include <string>
#include <vector>

#include "cli.hpp"
#include "mixq/error.hpp"
#include "mixq/quantize.hpp"

namespace {

const std::vector<mixq::cli::OptionSpec> kSpecs = {
    {"-o", "--output", true}, {"--scheme", "", true},   {"--only", "", true},
    {"--skip", "", true},     {"--format", "", true},   {"--weights", "", true},
    {"--tensor", "", true},   {"--input", "", true},    {"--bias", "", true},
    {"--backend", "", true},  {"--act", "", true},      {"--threads", "", true},
    {"--m", "", true},        {"--shapes", "", true},   {"--json", "", true},
    {"--quick", "", false},   {"--no-progress", "", false},
    {"--max-value-chars", "", true}};

template <typename F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const mixq::cli::UsageError&) {
  } catch (const mixq::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixq::cli;
  std::vector<std::string> words{"fuzz"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      words.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  words.push_back(cur);
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(&w[0]);
  argv.push_back(nullptr);
  const int argc = static_cast<int>(words.size());

  expect_clean([&] {
    Args a("fuzz", argc, argv.data(), kSpecs);
    (void)a.help();
    expect_clean([&] { a.expect_positionals(0, 2, "FILE TENSOR"); });
    expect_clean([&] { (void)a.get_int("--threads", 0, 0, 4096); });
    expect_clean([&] { (void)a.get_int("--max-value-chars", 160, 8, 1 << 20); });
    expect_clean([&] { (void)a.require("-o"); });
    if (a.has("--m"))
      expect_clean([&] { (void)parse_int_list("fuzz", "--m", a.get("--m"), 1, 1 << 20); });
    if (a.has("--shapes")) (void)split(a.get("--shapes"), ',');
    if (a.has("--weights"))
      expect_clean([&] { (void)split_weight_spec("fuzz", a.get("--weights")); });
    if (a.has("--scheme")) expect_clean([&] { (void)mixq::parse_scheme(a.get("--scheme")); });
    for (const char* opt : {"--only", "--skip"}) {
      if (!a.has(opt)) continue;
      expect_clean([&] {
        const mixq::formats::NamePattern p = compile_pattern("fuzz", opt, a.get(opt));
        for (const std::string& name : a.positionals()) (void)p.search(name);
        (void)p.search(std::string(4096, 'a'));
      });
    }
    (void)one_line(a.get("--input"));
  });
  return 0;
}
