// GGUF block weights on the CPU backend: native width (src/cpu/ggml/) vs the canonical form
// (Tuning::cpu_ggml_native = off), each with its default kernel per M, plus the streaming-read
// floor of the tensor's file bytes. Not part of the default build: `ninja cpu_ggml_native_bench`.
//
//   cpu_ggml_native_bench [--types Q4_0,Q4_K,...] [--shapes KxN,...] [--m 1,4,16,64,512]
//                         [--threads 1,2] [--reps 5] [--json out.json]
//                         [--native-force cpu_i8dot|cpu_f32]   (the native side's force_kernel)
//
// Shapes are K x N (reduction x output rows, as in the table). Every timed call is
// preceded by a read of a 640 MB buffer so the weights come from DRAM; the time is the median
// (and the best) of `reps` calls. The read floor is the file's tensor bytes divided by the
// bandwidth of a plain streaming read with the same thread count, measured just before each
// shape's rows (best of 5 reads of 1 GB).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mixq/formats/ggml_blocks.hpp"
#include "mixq/ops.hpp"

using namespace mixq;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= s.size()) {
    const size_t q = s.find(',', p);
    out.push_back(s.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

formats::GgmlType type_by_name(const std::string& n) {
  for (uint32_t id = 0; id < 64; ++id) {
    const formats::GgmlTypeInfo* t = formats::ggml_type_info(id);
    if (t && n == t->name) return static_cast<formats::GgmlType>(id);
  }
  std::fprintf(stderr, "unknown type %s\n", n.c_str());
  std::exit(2);
}

// Byte offsets of each type's f16 scale fields (kept finite and moderate).
std::vector<int> f16_fields(formats::GgmlType t) {
  switch (t) {
    case formats::GgmlType::Q4_1: case formats::GgmlType::Q5_1: case formats::GgmlType::Q4_K:
    case formats::GgmlType::Q5_K: return {0, 2};
    case formats::GgmlType::Q2_K: return {80, 82};
    case formats::GgmlType::Q3_K: return {108};
    case formats::GgmlType::Q6_K: return {208};
    default: return {0};
  }
}

std::vector<uint8_t> random_blocks(formats::GgmlType type, int64_t N, int64_t K) {
  const formats::GgmlTypeInfo* ti = formats::ggml_type_info(uint32_t(type));
  const int64_t nb = N * (K / ti->block_elems);
  std::vector<uint8_t> d(static_cast<size_t>(nb * ti->block_bytes));
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= d.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(&d[i], &v, 8);
  }
  const std::vector<int> f = f16_fields(type);
  for (int64_t i = 0; i < nb; ++i)
    for (int off : f) {
      const uint16_t h = static_cast<uint16_t>(((rng() & 1) << 15) | ((7 + rng() % 4) << 10) |
                                               (rng() & 0x3FF));
      std::memcpy(&d[static_cast<size_t>(i * ti->block_bytes + off)], &h, 2);
    }
  return d;
}

// Streaming read of buf with `threads` threads (each a contiguous slice); returns GB/s.
volatile uint64_t g_sink;
double read_gbps(const std::vector<uint64_t>& buf, int threads) {
  const size_t n = buf.size(), per = n / threads;
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      const uint64_t* p = buf.data() + t * per;
      for (size_t i = 0; i + 4 <= per; i += 4) {
        a0 += p[i];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
      }
      sums[t] = a0 + a1 + a2 + a3;
    });
  for (auto& th : ts) th.join();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (uint64_t v : sums) g_sink = g_sink + v;
  return double(n * 8) / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> types = {"Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "IQ4_XS"};
  std::vector<std::string> shapes = {"4096x4096", "4096x14336", "14336x4096", "4096x6144"};
  std::vector<int64_t> ms = {1, 4, 16, 64, 512};
  std::vector<int> threads = {1, 2};
  int reps = 5;
  std::string json, native_force;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--types") types = split(v);
    else if (a == "--shapes") shapes = split(v);
    else if (a == "--m") { ms.clear(); for (auto& s : split(v)) ms.push_back(std::atoll(s.c_str())); }
    else if (a == "--threads") { threads.clear(); for (auto& s : split(v)) threads.push_back(std::atoi(s.c_str())); }
    else if (a == "--reps") reps = std::atoi(v.c_str());
    else if (a == "--json") json = v;
    else if (a == "--native-force") native_force = v;
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  std::vector<uint64_t> flush(640ull << 20 >> 3, 1);
  std::vector<uint64_t> rbuf(1ull << 30 >> 3, 3);
  FILE* jf = json.empty() ? nullptr : std::fopen(json.c_str(), "w");
  if (jf) std::fprintf(jf, "[\n");
  bool first = true;
  std::printf("%-7s %-11s %3s %4s %10s %10s %10s %10s %7s %9s %8s  %s\n", "type", "KxN", "thr", "M",
              "canon_us", "native_us", "nat_best", "floor_us", "speedup", "floor_frac", "GB/s", "kernel");
  for (const std::string& shape : shapes) {
    const int64_t K = std::atoll(shape.c_str()), N = std::atoll(shape.c_str() + shape.find('x') + 1);
    for (const std::string& tn : types) {
      const formats::GgmlType type = type_by_name(tn);
      const std::vector<uint8_t> blocks = random_blocks(type, N, K);
      const QuantizedWeight w = formats::ggml_to_canonical(type, blocks.data(), N, K, tn);
      PrepareOptions nat;
      nat.backend = BackendKind::CPU;
      PrepareOptions can = nat;
      nat.force_kernel = native_force;
      can.tuning = Tuning::parse("cpu_ggml_native=off");
      const PreparedWeight pn = prepare(w, nat), pc = prepare(w, can);
      const double file_bytes = double(blocks.size());
      for (int th : threads) {
        double bw = 0;
        for (int r = 0; r < 5; ++r) bw = std::max(bw, read_gbps(rbuf, th));
        const double floor_us = file_bytes / (bw * 1e3);
        for (int64_t M : ms) {
          std::vector<float> x(static_cast<size_t>(M * K)), y(static_cast<size_t>(M * N));
          std::mt19937 g(7);
          std::normal_distribution<float> nd(0.f, 1.f);
          for (auto& v : x) v = nd(g);
          ExecContext ctx;
          ctx.num_threads = th;
          auto time_one = [&](const PreparedWeight& pw, double* best) {
            std::vector<double> ts;
            const int n = M >= 512 ? std::max(2, reps / 2) : reps;
            linear(TensorView(x.data(), DType::F32, {M, K}), pw, TensorView(y.data(), DType::F32, {M, N}),
                   Epilogue::none(), ctx);  // warm-up (workspace, thread pool)
            for (int r = 0; r < n; ++r) {
              read_gbps(flush, th);
              const auto t0 = Clock::now();
              linear(TensorView(x.data(), DType::F32, {M, K}), pw, TensorView(y.data(), DType::F32, {M, N}),
                     Epilogue::none(), ctx);
              ts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
            }
            std::sort(ts.begin(), ts.end());
            *best = ts.front();
            return ts[ts.size() / 2];
          };
          double cb, nb;
          const double cu = time_one(pc, &cb), nu = time_one(pn, &nb);
          std::printf("%-7s %-11s %3d %4lld %10.0f %10.0f %10.0f %10.0f %7.2f %9.2f %8.1f  %s | %s\n",
                      tn.c_str(), shape.c_str(), th, (long long)M, cu, nu, nb, floor_us, cu / nu,
                      floor_us / nb, bw, pn.kernel_name(M).c_str(), pc.kernel_name(M).c_str());
          std::fflush(stdout);
          if (jf) {
            std::fprintf(jf,
                         "%s  {\"type\": \"%s\", \"K\": %lld, \"N\": %lld, \"threads\": %d, \"M\": %lld, "
                         "\"canonical_us_median\": %.1f, \"canonical_us_best\": %.1f, "
                         "\"native_us_median\": %.1f, \"native_us_best\": %.1f, "
                         "\"file_bytes\": %.0f, \"read_gbps\": %.2f, \"read_floor_us\": %.1f, "
                         "\"native_kernel\": \"%s\", \"canonical_kernel\": \"%s\"}",
                         first ? "" : ",\n", tn.c_str(), (long long)K, (long long)N, th, (long long)M,
                         cu, cb, nu, nb, file_bytes, bw, floor_us, pn.kernel_name(M).c_str(),
                         pc.kernel_name(M).c_str());
            first = false;
          }
        }
      }
    }
  }
  if (jf) {
    std::fprintf(jf, "\n]\n");
    std::fclose(jf);
  }
  return 0;
}
