// Kernel-level timing of the CPU backend: every (kernel set, scheme, kernel, M) asked for, on one
// layer, warm caches except for the weights (>= 8 MB here, streamed from memory at M <= 8).
// Not part of the default build: `ninja -C build cpu_bench`. Used for the dispatcher's thresholds
// (docs/decisions/cpu-isa-dispatch.md) and bench/results/cpu_isa.md.
//
//   cpu_bench N K threads                         (defaults 4096 14336 2)
//   ISAS=avx512,avx2vnni,avx2,scalar              kernel sets (default: the best one)
//   CASES=w4g128,w8g128,w8g128:int8               schemes, ':int8' / ':fp8' for W8A8
//   KERNELS=auto,cpu_f32,cpu_i8dot                force_kernel values ("auto": the dispatcher)
//   MS=1,4,16,64,512                              rows
//   REPS=7                                        timed calls per row (best and median printed)
//   JSON=out.json                                 also write the rows as JSON
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"

using namespace mixq;

namespace {

std::vector<std::string> env_list(const char* name, const std::string& dflt) {
  const char* e = std::getenv(name);
  std::stringstream in(e && *e ? e : dflt);
  std::vector<std::string> out;
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Best and median of `reps` timed calls after one warm-up call, in µs.
std::pair<double, double> time_us(const std::function<void()>& f, int reps) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 4096, K = argc > 2 ? std::atoll(argv[2]) : 14336;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  const int reps = std::max(1, std::atoi(std::getenv("REPS") ? std::getenv("REPS") : "7"));
  std::vector<int64_t> ms;
  for (const std::string& m : env_list("MS", "1,4,16,64,512")) ms.push_back(std::atoll(m.c_str()));
  std::vector<float> wf(static_cast<size_t>(N * K));
  std::mt19937 g(1);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& v : wf) v = d(g);
  const TensorView wv(wf.data(), DType::F32, {N, K});
  printf("N=%lld K=%lld threads=%d, best / median of %d calls (us)\n", (long long)N, (long long)K,
         threads, reps);
  std::string json = "[\n";
  for (const std::string& cs : env_list("CASES", "w4g128,w8g128")) {
    const size_t colon = cs.find(':');
    const std::string scheme = cs.substr(0, colon);
    const std::string act_s = colon == std::string::npos ? "" : cs.substr(colon + 1);
    const ActQuant act = act_s == "int8" ? ActQuant::Int8Block
                         : act_s == "fp8" ? ActQuant::Fp8Block : ActQuant::None;
    const QuantizedWeight q = quantize_weight(wv, parse_scheme(scheme));
    for (const std::string& isa : env_list("ISAS", "auto"))
      for (const std::string& kern : env_list("KERNELS", act == ActQuant::None ? "auto" : "auto")) {
        PrepareOptions o;
        o.backend = BackendKind::CPU;
        o.act = act;
        o.cpu_isa = isa;
        o.force_kernel = kern == "auto" ? "" : kern;
        PreparedWeight p;
        try {
          p = prepare(q, o);
        } catch (const Error& e) {
          printf("%-12s %-9s %-10s skipped: %s\n", cs.c_str(), isa.c_str(), kern.c_str(), e.what());
          continue;
        }
        for (int64_t M : ms) {
          std::vector<float> x(static_cast<size_t>(M * K)), y(static_cast<size_t>(M * N));
          for (auto& v : x) v = d(g);
          ExecContext ctx;
          ctx.num_threads = threads;
          std::vector<uint8_t> ws(linear_workspace_size(p, M) + 64);
          ctx.workspace = ws.data();
          ctx.workspace_bytes = ws.size();
          const int r = M >= 256 ? std::max(2, reps / 2) : reps;
          const auto [best, med] = time_us([&] {
            linear(TensorView(x.data(), DType::F32, {M, K}), p, TensorView(y.data(), DType::F32, {M, N}), {}, ctx);
          }, r);
          printf("%-12s %-9s %-10s %-24s M=%-4lld %10.0f %10.0f  %7.1f GFLOP/s\n", cs.c_str(),
                 isa.c_str(), kern.c_str(), p.kernel_name(M).c_str(), (long long)M, best, med,
                 2e-3 * M * N * K / best);
          fflush(stdout);
          char line[512];
          snprintf(line, sizeof line,
                   "  {\"case\": \"%s\", \"isa\": \"%s\", \"force\": \"%s\", \"kernel\": \"%s\", "
                   "\"N\": %lld, \"K\": %lld, \"threads\": %d, \"M\": %lld, \"best_us\": %.1f, "
                   "\"median_us\": %.1f},\n",
                   cs.c_str(), isa.c_str(), kern.c_str(), p.kernel_name(M).c_str(), (long long)N,
                   (long long)K, threads, (long long)M, best, med);
          json += line;
        }
      }
  }
  if (const char* path = std::getenv("JSON")) {
    if (json.size() > 2) json.erase(json.size() - 2, 1);  // the last comma
    json += "]\n";
    if (FILE* f = std::fopen(path, "w")) {
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
  }
  return 0;
}
