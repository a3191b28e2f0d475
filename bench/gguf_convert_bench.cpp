// Q4_K -> canonical conversion throughput, single thread, on a synthetic GGUF file.
//   ninja -C build gguf_convert_bench && build/tests/gguf_convert_bench [GiB=1] [path]
// Writes the file (random blocks, finite fp16 scales), maps it, times load_weight (the
// conversion; the page cache is warm after the write) and reports GB/s of input bytes.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <sys/resource.h>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "formats/gguf/ggml_block_layout.hpp"
#include "mixq/formats/gguf.hpp"

using namespace mixq;
using namespace mixq::formats;

int main(int argc, char** argv) {
  const double gib = argc > 1 ? std::stod(argv[1]) : 1.0;
  const std::string path = argc > 2 ? argv[2] : "/tmp/mixq_q4k_bench.gguf";
  const int64_t K = 4096, row_bytes = K / 256 * 144;
  const int64_t N = static_cast<int64_t>(gib * (1ll << 30)) / row_bytes;
  std::vector<uint8_t> raw(static_cast<size_t>(N * row_bytes));
  std::mt19937_64 rng(1);
  for (size_t i = 0; i + 8 <= raw.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(raw.data() + i, &v, 8);
  }
  for (int64_t b = 0; b < N * K / 256; ++b) {
    detail::store_u16(raw.data() + b * 144, f32_to_f16(0.001f * static_cast<float>(b % 97 + 1)));
    detail::store_u16(raw.data() + b * 144 + 2, f32_to_f16(0.0005f * static_cast<float>(b % 89 + 1)));
  }
  save_gguf(path, {{"w", {N, K}, GgmlType::Q4_K, nullptr, raw.data(), raw.size()}});
  raw.clear();
  raw.shrink_to_fit();
  auto f = GgufFile::open(path);
  // Wall time, and the thread's CPU time (meaningful on a shared, oversubscribed machine).
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
  };
  double best = 1e30, best_cpu = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const double c0 = cpu_now();
    const auto t0 = std::chrono::steady_clock::now();
    QuantizedWeight w = f->load_weight("w");
    const auto t1 = std::chrono::steady_clock::now();
    best_cpu = std::min(best_cpu, cpu_now() - c0);
    rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    std::printf("  rep %d: thread user %.3f s sys %.3f s (cumulative)\n", rep,
                ru.ru_utime.tv_sec + 1e-6 * ru.ru_utime.tv_usec,
                ru.ru_stime.tv_sec + 1e-6 * ru.ru_stime.tv_usec);
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    if (rep == 0) std::printf("canonical: %s\n", w.describe().c_str());
  }
  const double in_bytes = static_cast<double>(f->tensor("w").nbytes);
  std::printf("Q4_K -> canonical, 1 thread, %.3f GB input (best of 5): wall %.3f s = %.2f GB/s, "
              "thread CPU %.3f s = %.2f GB/s\n",
              in_bytes / 1e9, best, in_bytes / 1e9 / best, best_cpu, in_bytes / 1e9 / best_cpu);
  std::remove(path.c_str());
  return 0;
}
