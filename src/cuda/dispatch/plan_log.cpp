#include "cuda/dispatch/plan_log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mixq::cuda {

bool log_plans() {
  static const bool on = [] {
    const char* e = std::getenv("MIXQ_LOG");
    return e && std::strstr(e, "plan") != nullptr;
  }();
  return on;
}

void print_plan(const char* op, int64_t M, const std::string& kernel) {
  std::fprintf(stderr, "mixq: %s M=%lld -> %s\n", op, static_cast<long long>(M), kernel.c_str());
}

}  // namespace mixq::cuda
