// An environment variable set or unset for a test's scope (the planner's knobs are read per call),
// restored as it was at construction.
#pragma once

#include <cstdlib>
#include <string>

namespace mixq::test {

class ScopedEnv {
 public:
  explicit ScopedEnv(const char* name) : name_(name) {
    const char* v = std::getenv(name);
    had_ = v != nullptr;
    if (had_) saved_ = v;
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), saved_.c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const char* value) { setenv(name_.c_str(), value, 1); }
  void unset() { unsetenv(name_.c_str()); }

 private:
  std::string name_;
  bool had_ = false;
  std::string saved_;
};

}  // namespace mixq::test
