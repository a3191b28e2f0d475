// Shared plumbing of the mixq command-line tool: argument parsing, the usage-error type, and the
// subcommand entry points. Every subcommand is `int run_X(const Args&)` in its own cmd_X.cpp.
//
// Exit codes: 0 success, 1 runtime error (mixq::Error, printed as "mixq: ..."; bench also uses 1
// when a result exceeds its error tolerance), 2 bad usage (one line on stderr).
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "mixq/formats/name_pattern.hpp"

namespace mixq::cli {

// Thrown for bad command lines; main prints "mixq <cmd>: <message>" and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct OptionSpec {
  std::string name;   // "--scheme" (long) or "-o"
  std::string alias;  // "" or the other spelling ("--output" for "-o")
  bool takes_value = true;
};

// Parsed command line of one subcommand: "--name value", "--name=value", flags, positionals.
class Args {
 public:
  Args(const std::string& command, int argc, char** argv, const std::vector<OptionSpec>& specs);

  const std::string& command() const { return command_; }
  bool help() const { return help_; }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // The value, or a UsageError naming the missing option.
  std::string require(const std::string& name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  // Checks the number of positionals; `what` names them in the error ("FILE TENSOR").
  void expect_positionals(size_t min, size_t max, const std::string& what) const;

  int64_t get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;

 private:
  std::string command_;
  bool help_ = false;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positionals_;
};

[[noreturn]] void usage_fail(const std::string& command, const std::string& message);

// "1,16,256" -> {1, 16, 256}; every value in [lo, hi].
std::vector<int64_t> parse_int_list(const std::string& command, const std::string& option,
                                    const std::string& text, int64_t lo, int64_t hi);
std::vector<std::string> split(const std::string& text, char sep);

// --weights FILE:TENSOR. Both parts may contain ':'; the file is the prefix before a ':' that
// names an existing file or directory. Exactly one prefix may qualify: when several do (a file
// "a" and a file "a:b"), the split is ambiguous and this is a usage error that points at
// --tensor, which takes the name separately. No ':' or no existing prefix: usage error / Io.
std::pair<std::string, std::string> split_weight_spec(const std::string& command,
                                                      const std::string& spec);

// Before any work: every (option, path) output can be written and is none of `inputs` (the same
// file, also through links). Writing onto an input is a usage error (exit 2); an unwritable
// destination is a runtime error (exit 1).
void check_outputs(const std::string& command,
                   const std::vector<std::pair<std::string, std::string>>& outputs,
                   const std::vector<std::string>& inputs);
// Where a command's summary lines go: stderr when one of `outputs` is standard output, so that
// data written to /dev/stdout is not mixed with text.
std::FILE* summary_stream(const std::vector<std::string>& outputs);

// --only / --skip patterns (formats::NamePattern); a syntax error is a usage error.
formats::NamePattern compile_pattern(const std::string& command, const std::string& option,
                                     const std::string& text);

// Subcommands: argv[0] is the subcommand's name. Each prints its --help text to stdout.
int run_bench(int argc, char** argv);
int run_bench_conv(int argc, char** argv);  // `mixq bench --op conv2d` (bench_conv.cpp)
int run_bench_tp(int argc, char** argv);    // `mixq bench --tp N,...` (bench_tp.cpp)
int run_quantize(int argc, char** argv);
int run_inspect(int argc, char** argv);
int run_dequantize(int argc, char** argv);
int run_matmul(int argc, char** argv);

// Prints `text` to stdout (for --help) and returns 0.
int print_help(const char* text);
// Replaces newlines so that an error message stays on one line.
std::string one_line(const std::string& message);

}  // namespace mixq::cli
