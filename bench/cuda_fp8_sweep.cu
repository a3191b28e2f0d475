// Standalone harness for the Hopper FP8 block-scaled GEMM (src/cuda/sm90_fp8_gemm.cu): random
// e4m3 codes and f32 block scales generated on the GPU, results checked against a float64 CPU
// reference (every output for small shapes, a random sample plus a device-side NaN count for
// large ones), timed with CUDA events over launches that rotate weight copies (cold L2).
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc -Iinclude \
//     bench/cuda_fp8_sweep.cu src/cuda/sm90_fp8_gemm.cu src/core/error.cpp -o fp8_sweep
//   ./fp8_sweep [--check-only] [--ms 2048,4096] [--nk 7168,16384,...] [--bn 0,128,192]
//               [--cluster 1,2] [--json out.json] [--iters 20] [--rounds 1]
// The checks run every (block_n, cluster) configuration of the lists (block_n 0: the launcher's
// pick). --rounds R > 1 times the variants in R interleaved rounds (median).
// Shapes are given as NxK (output features x reduction), unlike peers.py (KxN).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/sm90_fp8_gemm.hpp"

using mixq::cuda::Sm90Fp8GemmArgs;

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

__host__ __device__ inline uint32_t hash32(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
  return uint32_t(x);
}
// e4m3 codes, never NaN (0x7F / 0xFF); exponent limited so a 128-long dot stays well in range.
__global__ void fill_codes(uint8_t* q, int64_t rows, int64_t K, int64_t ld, uint64_t seed) {
  const int64_t n = rows * ld;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = i % ld;
    uint8_t c = uint8_t(hash32(seed * 0x9E3779B97F4A7C15ULL + i));
    if ((c & 0x7F) == 0x7F) c = 0x7E;
    q[i] = k < K ? c : 0;
  }
}
__global__ void fill_scales(float* s, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    s[i] = (0.25f + float(hash32(seed * 31 + i) % 1024) / 1024.f) / 448.f;
}
__global__ void count_nonfinite(const void* y, int type, int64_t M, int64_t N, int64_t ld, unsigned* bad) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < M * N; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = i / N, n = i % N;
    float v;
    if (type == 2) v = static_cast<const float*>(y)[m * ld + n];
    else {
      uint16_t h = static_cast<const uint16_t*>(y)[m * ld + n];
      v = type == 1 ? __uint_as_float(uint32_t(h) << 16) : __half2float(__ushort_as_half(h));
    }
    if (!isfinite(v)) atomicAdd(bad, 1u);
  }
}

static float e4m3(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  float v = e == 0 ? std::ldexp(float(m) / 8.f, -6) : std::ldexp(1.f + float(m) / 8.f, e - 7);
  return s ? -v : v;
}
static float half_bits(uint16_t h, int type) {
  if (type == 1) { uint32_t u = uint32_t(h) << 16; float f; std::memcpy(&f, &u, 4); return f; }
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? std::ldexp(float(m), -24) : e == 31 ? NAN : std::ldexp(1.f + m / 1024.f, e - 15);
  return s ? -v : v;
}

struct Problem {
  int64_t M, N, K, lda, ldb, ld_sa, ld_sb, nkb, nbn;
  uint8_t *a = nullptr, *b = nullptr;
  float *sa = nullptr, *sb = nullptr;
  int n_rot = 1;
  std::vector<uint8_t*> b_rot;
};

static Problem make_problem(int64_t M, int64_t N, int64_t K, int n_rot, uint64_t seed) {
  Problem p;
  p.M = M; p.N = N; p.K = K;
  p.lda = (K + 15) / 16 * 16; p.ldb = p.lda;
  p.nkb = (K + 127) / 128; p.nbn = (N + 127) / 128;
  p.ld_sa = (M + 3) / 4 * 4; p.ld_sb = (p.nkb + 3) / 4 * 4;
  CK(cudaMalloc(&p.a, M * p.lda));
  CK(cudaMalloc(&p.sa, p.nkb * p.ld_sa * 4));
  CK(cudaMalloc(&p.sb, p.nbn * p.ld_sb * 4));
  fill_codes<<<1024, 256>>>(p.a, M, K, p.lda, seed);
  fill_scales<<<256, 256>>>(p.sa, p.nkb * p.ld_sa, seed + 1);
  fill_scales<<<256, 256>>>(p.sb, p.nbn * p.ld_sb, seed + 2);
  p.n_rot = n_rot;
  for (int r = 0; r < n_rot; ++r) {
    uint8_t* b;
    CK(cudaMalloc(&b, N * p.ldb));
    fill_codes<<<1024, 256>>>(b, N, K, p.ldb, seed + 3);  // identical copies
    p.b_rot.push_back(b);
  }
  p.b = p.b_rot[0];
  CK(cudaDeviceSynchronize());
  return p;
}
static void free_problem(Problem& p) {
  cudaFree(p.a); cudaFree(p.sa); cudaFree(p.sb);
  for (auto b : p.b_rot) cudaFree(b);
}

static Sm90Fp8GemmArgs args_of(const Problem& p, const uint8_t* b, void* y, int y_type,
                               const void* bias, int bias_type, float lo, float hi, int sms) {
  Sm90Fp8GemmArgs a;
  a.a = p.a; a.lda = p.lda; a.sa = p.sa; a.ld_sa = p.ld_sa;
  a.b = b; a.ldb = p.ldb; a.sb = p.sb; a.ld_sb = p.ld_sb;
  a.M = p.M; a.N = p.N; a.K = p.K;
  a.y = y; a.ldy = p.N; a.y_type = y_type;
  a.bias = bias; a.bias_type = bias_type; a.clamp_lo = lo; a.clamp_hi = hi;
  a.num_sms = sms;
  return a;
}

// The kernel a launch with block_n / cluster (0: picked / default) runs for p.
static const char* kernel_name(const Problem& p, int bn, int cluster, int sms) {
  return mixq::cuda::sm90_fp8_gemm_name(mixq::cuda::sm90_fp8_gemm_tile(p.M, p.N, sms, {bn, cluster}));
}

// Checks `samples` outputs (all when samples <= 0) against float64; returns the pass flag.
static bool check(const Problem& p, int y_type, bool with_bias, float lo, float hi, int64_t samples,
                  int sms, int bn, int cluster, std::string* summary) {
  const int yb = y_type == 2 ? 4 : 2;
  void* y;
  CK(cudaMalloc(&y, p.M * p.N * yb));
  CK(cudaMemset(y, 0xFF, p.M * p.N * yb));  // NaN poison
  std::vector<float> bias_h(p.N);
  for (int64_t n = 0; n < p.N; ++n) bias_h[n] = float(int(hash32(n + 7) % 2001) - 1000) / 100.f;
  float* bias_d = nullptr;
  if (with_bias) {
    CK(cudaMalloc(&bias_d, p.N * 4));
    CK(cudaMemcpy(bias_d, bias_h.data(), p.N * 4, cudaMemcpyHostToDevice));
  }
  auto args = args_of(p, p.b, y, y_type, bias_d, 2, lo, hi, sms);
  args.block_n = bn;
  args.cluster = cluster;
  launch_sm90_fp8_block_gemm(args, 0);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  unsigned* bad_d;
  CK(cudaMalloc(&bad_d, 4));
  CK(cudaMemset(bad_d, 0, 4));
  count_nonfinite<<<1024, 256>>>(y, y_type, p.M, p.N, p.N, bad_d);
  unsigned bad = 0;
  CK(cudaMemcpy(&bad, bad_d, 4, cudaMemcpyDeviceToHost));
  std::vector<uint8_t> ah(p.M * p.lda), bh(p.N * p.ldb), yh(p.M * p.N * yb);
  std::vector<float> sah(p.nkb * p.ld_sa), sbh(p.nbn * p.ld_sb);
  CK(cudaMemcpy(ah.data(), p.a, ah.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(bh.data(), p.b, bh.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(yh.data(), y, yh.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(sah.data(), p.sa, sah.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(sbh.data(), p.sb, sbh.size() * 4, cudaMemcpyDeviceToHost));
  float lut[256];
  for (int i = 0; i < 256; ++i) lut[i] = e4m3(uint8_t(i));
  std::mt19937_64 rng(1234);
  const int64_t total = p.M * p.N;
  const int64_t count = samples <= 0 ? total : std::min(samples, total);
  double sxy = 0, sxx = 0, syy = 0, sdd = 0;
  for (int64_t s = 0; s < count; ++s) {
    const int64_t idx = samples <= 0 ? s : int64_t(rng() % uint64_t(total));
    const int64_t m = idx / p.N, n = idx % p.N;
    double acc = 0;
    for (int64_t kb = 0; kb < p.nkb; ++kb) {
      double part = 0;
      for (int64_t k = kb * 128; k < std::min(p.K, kb * 128 + 128); ++k)
        part += double(lut[ah[m * p.lda + k]]) * double(lut[bh[n * p.ldb + k]]);
      acc += part * double(sah[kb * p.ld_sa + m]) * double(sbh[(n / 128) * p.ld_sb + kb]);
    }
    if (with_bias) acc += bias_h[n];
    acc = std::min<double>(std::max<double>(acc, lo), hi);
    double got;
    if (y_type == 2) { float f; std::memcpy(&f, &yh[idx * 4], 4); got = f; }
    else { uint16_t h; std::memcpy(&h, &yh[idx * 2], 2); got = half_bits(h, y_type); }
    sxy += acc * got; sxx += acc * acc; syy += got * got; sdd += (acc - got) * (acc - got);
    if (!std::isfinite(got)) ++bad;
  }
  const double cos_err = (sxx + syy) > 0 ? 1 - 2 * sxy / (sxx + syy) : 0;
  const double rel_fro = sxx > 0 ? std::sqrt(sdd / sxx) : std::sqrt(sdd);
  const double tol = y_type == 2 ? 1e-3 : 2e-3;  // f32 out: tensor-core accumulation rounding only
  const bool ok = bad == 0 && cos_err <= 1e-3 && rel_fro <= tol;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s M=%ld N=%ld K=%ld y=%d bias=%d checked=%ld nonfinite=%u 1-cos=%.2e relfro=%.2e %s",
                kernel_name(p, bn, cluster, sms),
                long(p.M), long(p.N), long(p.K), y_type, int(with_bias), long(count), bad, cos_err,
                rel_fro, ok ? "OK" : "FAIL");
  *summary = buf;
  cudaFree(y); cudaFree(bad_d);
  if (bias_d) cudaFree(bias_d);
  return ok;
}

// Median of reps - 1 timed batches of `iters` launches (the first batch warms up).
static double time_us(const Problem& p, int sms, int group_n, int block_n, int cluster, int iters,
                      int reps) {
  void* y;
  CK(cudaMalloc(&y, p.M * p.N * 2));
  std::vector<double> ts;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (int rep = 0; rep < reps; ++rep) {
    CK(cudaEventRecord(e0));
    for (int i = 0; i < iters; ++i) {
      auto a = args_of(p, p.b_rot[i % p.n_rot], y, 1, nullptr, 2, -INFINITY, INFINITY, sms);
      a.group_n = group_n;
      a.block_n = block_n;
      a.cluster = cluster;
      launch_sm90_fp8_block_gemm(a, 0);
    }
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep > 0) ts.push_back(ms * 1e3 / iters);
  }
  std::sort(ts.begin(), ts.end());
  cudaFree(y);
  return ts[ts.size() / 2];
}

static std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  for (const char* c = s; *c;) { v.push_back(std::strtoll(c, const_cast<char**>(&c), 10)); if (*c) ++c; }
  return v;
}

int main(int argc, char** argv) {
  std::vector<int64_t> ms = {2048, 4096};
  std::vector<std::pair<int64_t, int64_t>> nk = {{7168, 16384}, {24576, 1536}, {21504, 14336}, {57344, 8192}};
  bool check_only = false, bench_only = false;
  int only_case = -1;
  std::vector<int64_t> groups = {0}, bns = {0}, clusters = {0}, check_bns = {128, 192},
                       check_clusters = {1, 2};
  const char* json = nullptr;
  int iters = 20;  // launches per timed repeat; large values time a sustained (power-limited) run
  int rounds = 1;  // > 1: interleaved rounds of all variants, median over rounds
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--check-only") check_only = true;
    else if (a == "--bench-only") bench_only = true;
    else if (a == "--case" && i + 1 < argc) only_case = std::atoi(argv[++i]);
    else if (a == "--ms" && i + 1 < argc) ms = parse_list(argv[++i]);
    else if (a == "--groups" && i + 1 < argc) groups = parse_list(argv[++i]);
    else if (a == "--bn" && i + 1 < argc) bns = check_bns = parse_list(argv[++i]);
    else if (a == "--cluster" && i + 1 < argc) clusters = check_clusters = parse_list(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--iters" && i + 1 < argc) iters = std::max(1, std::atoi(argv[++i]));
    else if (a == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--nk" && i + 1 < argc) {
      nk.clear();
      auto v = parse_list(argv[++i]);
      for (size_t j = 0; j + 1 < v.size(); j += 2) nk.push_back({v[j], v[j + 1]});
    }
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("device %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  int fails = 0;
  if (!bench_only) {
    struct C { int64_t M, N, K; int y; bool bias; float lo, hi; int64_t samples; };
    const float inf = INFINITY;
    const std::vector<C> cases = {
        {1, 128, 128, 2, false, -inf, inf, 0},     {7, 1000, 1000, 2, true, -inf, inf, 0},
        {64, 256, 7232, 1, true, -5.f, 5.f, 0},    {129, 1000, 1000, 0, true, 0.f, inf, 0},
        {1000, 1000, 1000, 2, false, -inf, inf, 0}, {333, 517, 77, 2, true, -inf, inf, 0},
        {2048, 2304, 7232, 1, true, -inf, inf, 20000}, {300, 7168, 16384, 2, false, -inf, inf, 3000},
        {4096, 24576, 1536, 1, false, -inf, inf, 3000}, {257, 130, 4000, 0, true, -inf, 10.f, 0},
    };
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const C& c = cases[ci];
      if (only_case >= 0 && int(ci) != only_case) continue;
      Problem p = make_problem(c.M, c.N, c.K, 1, uint64_t(c.M * 131 + c.N * 7 + c.K));
      for (int64_t bn : check_bns)
        for (int64_t cl : check_clusters) {
          std::string s;
          const bool ok = check(p, c.y, c.bias, c.lo, c.hi, c.samples, sms, int(bn), int(cl), &s);
          fails += !ok;
          std::printf("check %s\n", s.c_str());
          std::fflush(stdout);
        }
      free_problem(p);
    }
    std::printf("checks: %d failed\n", fails);
  }
  if (check_only) return fails ? 1 : 0;
  FILE* jf = json ? std::fopen(json, "w") : nullptr;
  if (jf) std::fprintf(jf, "{\"device\": \"%s\", \"rows\": [\n", prop.name);
  bool first = true;
  std::printf("%6s %6s %6s %6s %10s %10s  %s\n", "M", "N", "K", "group", "us", "TFLOP/s", "kernel");
  for (auto [N, K] : nk)
    for (int64_t M : ms) {
      const double bytes = double(N) * K;
      const int n_rot = int(std::min<double>(8, std::max(1.0, std::ceil(4.0 * prop.l2CacheSize / bytes))));
      Problem p = make_problem(M, N, K, n_rot, 99);
      if (!bench_only || true) {
        std::string s;
        const bool ok = check(p, 1, false, -INFINITY, INFINITY, 1000, sms, int(bns[0]), int(clusters[0]), &s);
        if (!ok) { ++fails; std::printf("check %s\n", s.c_str()); }
      }
      // Variants are timed in interleaved rounds (each round times every variant once), so clock
      // and temperature drift under the power cap falls on all of them alike.
      struct Variant { int64_t bn, cl, g; };
      std::vector<Variant> vars;
      for (int64_t bn : bns)
        for (int64_t cl : clusters)
          for (int64_t g : groups) vars.push_back({bn, cl, g});
      std::vector<std::vector<double>> times(vars.size());
      for (int r = 0; r < rounds; ++r)
        for (size_t v = 0; v < vars.size(); ++v)
          times[v].push_back(time_us(p, sms, int(vars[v].g), int(vars[v].bn), int(vars[v].cl),
                                     iters, rounds > 1 ? 2 : 6));
      for (size_t v = 0; v < vars.size(); ++v) {
        const auto [bn, cl, g] = vars[v];
        std::sort(times[v].begin(), times[v].end());
        const double us = times[v][times[v].size() / 2];
        const double tf = 2.0 * M * N * K / us * 1e-6;
        const char* name = kernel_name(p, int(bn), int(cl), sms);
        std::printf("%6ld %6ld %6ld %6ld %10.1f %10.1f  %s\n", long(M), long(N), long(K), long(g), us, tf, name);
        std::fflush(stdout);
        if (jf) std::fprintf(jf, "%s  {\"M\": %ld, \"N\": %ld, \"K\": %ld, \"group_n\": %ld, \"rounds\": %d, \"kernel\": \"%s\", \"us\": %.2f, \"tflops\": %.1f}",
                             first ? "" : ",\n", long(M), long(N), long(K), long(g), rounds, name, us, tf);
        first = false;
      }
      free_problem(p);
    }
  if (jf) { std::fprintf(jf, "\n]}\n"); std::fclose(jf); }
  return fails ? 1 : 0;
}
