// Quick timing of the CPU backend (not part of the build; see docs/cpu-backend.md for the
// command). Layer 4096 rows x K = 14336 (the anchors.md ggml rows), random data, warm caches
// except for the weights, which at these sizes (>= 33 MB) do not fit in cache anyway.
#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <cstring>
#include <vector>

#include "mixq/cpu.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"

using namespace mixq;

static double time_us(const std::function<void()>& f, int reps) {
  f();  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, us);
  }
  return best;
}

int main(int argc, char** argv) {
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 4096, K = argc > 2 ? std::atoll(argv[2]) : 14336;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  std::vector<float> wf(static_cast<size_t>(N * K));
  std::mt19937 g(1);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (auto& v : wf) v = d(g);
  const TensorView wv(wf.data(), DType::F32, {N, K});
  printf("cpu isa %s, N=%lld K=%lld threads=%d (best of runs, us)\n", cpu::isa_name(), (long long)N,
         (long long)K, threads);
  struct Case { const char* scheme; ActQuant act; const char* force; };
  const Case cases[] = {{"w4g128", ActQuant::None, "cpu_f32"}, {"w4g128", ActQuant::None, "cpu_i8dot"},
                        {"w4g32asym", ActQuant::None, "cpu_f32"}, {"w4g32asym", ActQuant::None, "cpu_i8dot"},
                        {"w8g128", ActQuant::None, "cpu_f32"}, {"w8g128", ActQuant::None, "cpu_i8dot"},
                        {"w8g128", ActQuant::Int8Block, ""}, {"fp8b128", ActQuant::Fp8Block, ""}};
  // CASES=w4g128 (substring filter on the scheme) and MS=1,8,256 select a subset.
  std::vector<int64_t> ms = {1, 8, 16, 256};
  if (const char* e = std::getenv("MS")) {
    ms.clear();
    for (const char* p = e; *p;) { ms.push_back(std::atoll(p)); while (*p && *p != ',') ++p; if (*p) ++p; }
  }
  for (const Case& c : cases) {
    if (const char* f = std::getenv("CASES"); f && !std::strstr(c.scheme, f)) continue;
    const QuantizedWeight q = quantize_weight(wv, parse_scheme(c.scheme));
    PrepareOptions o;
    o.backend = BackendKind::CPU;
    o.act = c.act;
    o.force_kernel = c.force;
    const PreparedWeight p = prepare(q, o);
    for (int64_t M : ms) {
      std::vector<float> x(static_cast<size_t>(M * K)), y(static_cast<size_t>(M * N));
      for (auto& v : x) v = d(g);
      ExecContext ctx;
      ctx.num_threads = threads;
      const double us = time_us([&] {
        linear(TensorView(x.data(), DType::F32, {M, K}), p, TensorView(y.data(), DType::F32, {M, N}), {}, ctx);
      }, M >= 256 ? 2 : 10);
      printf("%-8s %-12s %-22s M=%-4lld %10.0f us  %7.1f GFLOP/s  %6.1f GB/s weights\n", c.scheme,
             act_quant_name(c.act), p.kernel_name(M).c_str(), (long long)M, us, 2e-3 * M * N * K / us,
             q.storage_bytes() / us * 1e-3);
    }
  }
  const cpu::DenseGemmF32 dense(wf.data(), N, K, threads);
  for (int64_t M : ms) {
    std::vector<float> x(static_cast<size_t>(M * K)), y(static_cast<size_t>(M * N));
    const double us = time_us([&] { dense.run(x.data(), M, y.data()); }, M >= 256 ? 2 : 10);
    printf("dense f32 (DenseGemmF32)             M=%-4lld %10.0f us  %7.1f GFLOP/s  %6.1f GB/s\n",
           (long long)M, us, 2e-3 * M * N * K / us, 4e-3 * N * K / us);
  }
}
