// Which kernel a CUDA prepared weight is told to run (tests and benchmarks force kernels by name).
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>

#include "mixq/ops.hpp"

namespace mixq::cuda {

// PrepareOptions::force_kernel, else the MIXQ_FORCE_KERNEL environment variable when it starts
// with one of `env_prefixes` (the variable is shared by every CUDA backend, so a name meant for
// another backend is ignored here; an empty list accepts any value). Empty: the dispatch decides.
inline std::string forced_kernel(const PrepareOptions& o,
                                 std::initializer_list<std::string_view> env_prefixes = {}) {
  if (!o.force_kernel.empty()) return o.force_kernel;
  static const std::string env = [] {  // read once per process
    const char* e = std::getenv("MIXQ_FORCE_KERNEL");
    return e ? std::string(e) : std::string();
  }();
  if (env.empty()) return std::string();
  const std::string_view v(env);
  if (env_prefixes.size() == 0) return std::string(v);
  for (std::string_view p : env_prefixes)
    if (v.substr(0, p.size()) == p) return std::string(v);
  return std::string();
}

}  // namespace mixq::cuda
