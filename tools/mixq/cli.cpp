// Argument parsing for the mixq subcommands. Deliberately small: long options with a value
// ("--m 1,16" or "--m=1,16"), flags, and positionals; anything else is a usage error.
#include "cli.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mixq/error.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/output_file.hpp"

namespace mixq::cli {

void usage_fail(const std::string& command, const std::string& message) {
  throw UsageError("mixq " + command + ": " + message + " (see 'mixq " + command + " --help')");
}

Args::Args(const std::string& command, int argc, char** argv, const std::vector<OptionSpec>& specs)
    : command_(command) {
  auto find_spec = [&](const std::string& name) -> const OptionSpec* {
    for (const OptionSpec& s : specs)
      if (s.name == name || (!s.alias.empty() && s.alias == name)) return &s;
    return nullptr;
  };
  bool only_positionals = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (only_positionals || arg.size() < 2 || arg[0] != '-') {
      positionals_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positionals = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      help_ = true;
      continue;
    }
    std::string value;
    bool has_value = false;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    const OptionSpec* spec = find_spec(arg);
    if (!spec) usage_fail(command, "unknown option '" + arg + "'");
    if (spec->takes_value) {
      if (!has_value) {
        if (i + 1 >= argc) usage_fail(command, "option '" + arg + "' needs a value");
        value = argv[++i];
      }
    } else if (has_value) {
      usage_fail(command, "option '" + arg + "' takes no value");
    }
    if (values_.count(spec->name)) usage_fail(command, "option '" + arg + "' given twice");
    values_[spec->name] = value;
  }
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::string Args::require(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) usage_fail(command_, "missing required option " + name);
  if (it->second.empty()) usage_fail(command_, "option " + name + " has an empty value");
  return it->second;
}

void Args::expect_positionals(size_t min, size_t max, const std::string& what) const {
  if (positionals_.size() < min)
    usage_fail(command_, "missing argument(s): expected " + what);
  if (positionals_.size() > max)
    usage_fail(command_, "unexpected argument '" + positionals_[max] + "' (expected " + what + ")");
}

namespace {
bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}
}  // namespace

int64_t Args::get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
  if (!has(name)) return fallback;
  int64_t v = 0;
  const std::string s = get(name);
  if (!parse_int(s, &v) || v < lo || v > hi)
    usage_fail(command_, "option " + name + " must be an integer in [" + std::to_string(lo) +
                             ", " + std::to_string(hi) + "], got '" + s + "'");
  return v;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t p = text.find(sep, start);
    out.push_back(text.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

std::vector<int64_t> parse_int_list(const std::string& command, const std::string& option,
                                    const std::string& text, int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  for (const std::string& item : split(text, ',')) {
    int64_t v = 0;
    if (!parse_int(item, &v) || v < lo || v > hi)
      usage_fail(command, "option " + option + ": '" + item + "' is not an integer in [" +
                              std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out.push_back(v);
  }
  return out;
}

namespace {
bool exists_as_checkpoint(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode));
}

}  // namespace

std::pair<std::string, std::string> split_weight_spec(const std::string& command,
                                                      const std::string& spec) {
  if (spec.find(':') == std::string::npos)
    usage_fail(command, "--weights must be FILE:TENSOR (or FILE with --tensor NAME), got '" +
                            spec + "'");
  std::vector<size_t> splits;
  for (size_t p = spec.find(':'); p != std::string::npos; p = spec.find(':', p + 1))
    if (p > 0 && exists_as_checkpoint(spec.substr(0, p))) splits.push_back(p);
  if (splits.size() > 1)
    usage_fail(command, "--weights '" + spec + "' is ambiguous: both '" +
                            spec.substr(0, splits[0]) + "' and '" + spec.substr(0, splits[1]) +
                            "' exist; give the file alone and the name with --tensor");
  MIXQ_CHECK(!splits.empty(), ErrorCode::Io, command, ": --weights '", spec,
             "': no part before a ':' is an existing file or directory");
  const size_t p = splits[0];
  if (p + 1 >= spec.size())
    usage_fail(command, "--weights '" + spec + "' names no tensor after '" + spec.substr(0, p) +
                            ":'");
  return {spec.substr(0, p), spec.substr(p + 1)};
}

void check_outputs(const std::string& command,
                   const std::vector<std::pair<std::string, std::string>>& outputs,
                   const std::vector<std::string>& inputs) {
  for (const auto& [option, path] : outputs) {
    try {
      formats::check_output_path(path, option, inputs);
    } catch (const Error& e) {
      // Naming an input as the output is a mistake in the command line, not a failure of the run.
      if (e.code() == ErrorCode::InvalidArgument) usage_fail(command, error_message_body(e));
      throw;
    }
  }
}

std::FILE* summary_stream(const std::vector<std::string>& outputs) {
  for (const std::string& o : outputs)
    if (formats::writes_to_stdout(o)) return stderr;
  return stdout;
}

formats::NamePattern compile_pattern(const std::string& command, const std::string& option,
                                     const std::string& text) {
  try {
    return formats::NamePattern(text);
  } catch (const Error& e) {
    usage_fail(command, option + ": " + error_message_body(e));
  }
}

}  // namespace mixq::cli

namespace mixq::cli {

int print_help(const char* text) {
  std::fputs(text, stdout);
  return 0;
}

std::string one_line(const std::string& message) {
  std::string s = message;
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace mixq::cli
