#include "bench_options.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mixq/error.hpp"

namespace mixq::cli {

double parse_tol_scale(const Args& a) {
  if (!a.has("--tol-scale")) return 1.0;
  const std::string t = a.get("--tol-scale");
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v))
    usage_fail("bench", "--tol-scale must be a positive number, got '" + t + "'");
  return v;
}

DType parse_cuda_activation(const Args& a, DType fallback) {
  if (!a.has("--act")) return fallback;
  const std::string act = a.get("--act");
  if (act != "f16" && act != "bf16") usage_fail("bench", "--act must be f16 or bf16, got '" + act + "'");
  return act == "f16" ? DType::F16 : DType::BF16;
}

Tuning parse_tuning(const Args& a) {
  if (!a.has("--tune")) return default_tuning();
  try {
    return Tuning::parse(a.get("--tune"), default_tuning());
  } catch (const Error& e) {
    usage_fail("bench", "--tune: " + std::string(e.what()).substr(std::strlen("mixq: ")));
  }
}

bench::DriverConfig parse_driver_config(const Args& a) {
  bench::DriverConfig cfg;
  cfg.threads = static_cast<int>(a.get_int("--threads", 0, 0, 4096));
  cfg.cuda_activation = parse_cuda_activation(a, DType::F16);
  cfg.tuning = parse_tuning(a);
  cfg.force_kernel = a.get("--force-kernel", "");
  cfg.chain = a.has("--chain");
  return cfg;
}

double parse_settle_s(const Args& a, const std::string& driver_backend, int fallback_ms) {
  const int64_t ms = a.get_int("--settle-ms", fallback_ms, 0, 60000);  // checked on every backend
  return driver_backend == "cuda" ? double(ms) / 1e3 : 0.0;
}

}  // namespace mixq::cli
