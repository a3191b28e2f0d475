// Weight-only CUDA sweep: mixq vs cuBLAS FP16/BF16 in one process, plus the streaming-read
// ceiling of this run. Cold L2: every timed call uses the next of enough weight copies to cover
// >= 4x the L2; each figure is the median of 7 replays of a CUDA graph of >= 10 calls.
//   cuda_wo_sweep [--shapes KxN,...] [--m 1,16,...] [--schemes w4g128,w8g128] [--act f16,bf16]
//                 [--json FILE] [--variants 'VAR=V,VAR=V;VAR=V;...' [--rounds R]]
// --variants times mixq once per variant (a set of environment variables, e.g. the planner's
// knobs; an empty variant is the default), R rounds alternating the variants, in this process
// and on the same prepared weights: a same-process A/B. Rows end with the variant.
// An --act entry may be DATA[:DECLARED][/OUT] (diagnostics): activations filled as DATA (f16 or
// bf16) but passed as DECLARED, output in OUT (f16, bf16, f32); e.g. "bf16:f16" runs the f16
// kernel on bf16 bit patterns (timing only) and "bf16/f32" writes f32.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "bench_timing.cuh"
#include "linear_read_kernel.cuh"

#if defined(MIXQ_WS_DIAG_BUILD)
namespace mixq::cuda {
void ws_diag_dump_cta_log(const char* path);  // sm90_wo_wgmma_ws.cu, diagnostic builds only
}
#endif

using namespace mixq;

using bench_timing::g_l2;
using bench_timing::rot_count;
using bench_timing::split;
using bench_timing::time_graph;

static QuantizedWeight random_weight(int64_t N, int64_t K, const std::string& scheme, uint32_t seed) {
  const QuantScheme sc = parse_scheme(scheme);
  QuantizedWeight w;
  w.N = N; w.K = K; w.code_type = sc.code_type; w.block_k = sc.block_k ? std::min<int64_t>(sc.block_k, K) : K;
  w.block_n = 1; w.scale_type = DType::F16; w.zero_kind = sc.zero_kind;
  w.allocate();
  std::mt19937 rng(seed);
  for (auto& b : w.codes) b = uint8_t(rng());
  std::uniform_real_distribution<float> d(0.5f, 1.5f);
  const float base = w.code_type == DType::I8 ? 0.02f / 127 : 0.02f / 7;
  for (size_t i = 0; i < w.scales.size() / 2; ++i) { uint16_t h = f32_to_f16(base * d(rng)); std::memcpy(&w.scales[2 * i], &h, 2); }
  if (w.zero_kind == ZeroKind::Offset) for (size_t i = 0; i < w.zeros.size() / 2; ++i) { uint16_t h = f32_to_f16(0.001f * (d(rng) - 1)); std::memcpy(&w.zeros[2 * i], &h, 2); }
  return w;
}

int main(int argc, char** argv) {
  std::string shapes = "14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192";
  std::string ms = "1,2,4,8,16,32,64,128,256,1024,4096", schemes = "w4g128,w8g128", acts = "f16,bf16", json;
  bool baseline = true;
  std::string variants_arg;
  int rounds = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--shapes") shapes = next(); else if (a == "--m") ms = next(); else if (a == "--schemes") schemes = next();
    else if (a == "--act") acts = next(); else if (a == "--json") json = next(); else if (a == "--no-baseline") baseline = false;
    else if (a == "--variants") variants_arg = next(); else if (a == "--rounds") rounds = std::max(1, std::atoi(next().c_str()));
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  // each variant: the VAR=VALUE settings it applies (every variable any variant names is unset first)
  std::vector<std::vector<std::pair<std::string, std::string>>> variants;
  std::vector<std::string> variant_names, variant_vars;
  if (variants_arg.empty()) {
    variants.emplace_back();
    variant_names.push_back("");
  } else {
    for (const auto& v : split(variants_arg, ';')) {
      variants.emplace_back();
      for (const auto& kv : split(v, ',')) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) continue;
        variants.back().emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
        if (std::find(variant_vars.begin(), variant_vars.end(), kv.substr(0, eq)) == variant_vars.end())
          variant_vars.push_back(kv.substr(0, eq));
      }
      variant_names.push_back(v.empty() ? "default" : v);
    }
  }
  auto apply_variant = [&](size_t vi) {
    for (const auto& var : variant_vars) unsetenv(var.c_str());
    for (const auto& [k, v] : variants[vi]) setenv(k.c_str(), v.c_str(), 1);
  };
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0)); g_l2 = prop.l2CacheSize;
  cudaStream_t s; CK(cudaStreamCreate(&s));
  cublasHandle_t h; cublasCreate(&h); cublasSetStream(h, s);
  FILE* js = json.empty() ? nullptr : std::fopen(json.c_str(), "w");
  if (js) std::fprintf(js, "{\"device\": \"%s\", \"sms\": %d, \"l2\": %zu, \"ceiling\": [", prop.name, prop.multiProcessorCount, g_l2);
  // streaming-read ceiling
  std::printf("device %s, %d SMs, L2 %zu MB\nread ceiling:", prop.name, prop.multiProcessorCount, g_l2 >> 20);
  {
    const size_t maxb = size_t(1) << 30;
    void* buf; CK(cudaMalloc(&buf, maxb)); CK(cudaMemset(buf, 1, maxb)); unsigned* sink; CK(cudaMalloc(&sink, 4));
    bool first = true;
    for (size_t mb : {8, 32, 64, 154, 308, 617, 1024}) {
      const size_t bytes = mb << 20, n = bytes / 16;
      const int rot = int(std::min<size_t>(maxb / bytes, size_t(rot_count(bytes))));
      const int blocks = std::min<int>(prop.multiProcessorCount * 4, int((n + 2047) / 2048));
      const double us = time_graph([&](int i, cudaStream_t st) {
        linear_read_kernel<<<blocks, 512, 0, st>>>(static_cast<const uint4*>(buf) + size_t(i) * n, n, sink); }, rot, s);
      std::printf(" %zuMB %.1fus (%.2f TB/s)", mb, us, bytes / us * 1e-6);
      if (js) std::fprintf(js, "%s{\"mb\": %zu, \"us\": %.2f, \"TBps\": %.3f}", first ? "" : ",", mb, us, bytes / us * 1e-6);
      first = false;
    }
    std::printf("\n");
    cudaFree(buf); cudaFree(sink);
  }
  if (js) std::fprintf(js, "], \"rows\": [");
  bool first_row = true;
  std::printf("%-12s %-6s %-4s %5s  %10s %10s %10s  %8s %8s  %s\n", "KxN", "scheme", "act", "M", "mixq_us", "cublas_us", "x_cublas", "GB/s", "TFLOP/s", "kernel");
  for (const auto& shp : split(shapes, ',')) {
    const auto kn = split(shp, 'x');
    const int64_t K = std::stoll(kn[0]), N = std::stoll(kn[1]);
    for (const auto& act : split(acts, ',')) {
      const std::string act_in = split(act, '/')[0];
      const auto act_parts = split(act_in, ':');
      const std::string act_data = act_parts[0], act_decl = act_parts.size() > 1 ? act_parts[1] : act_parts[0];
      const std::string act_out = act.find('/') != std::string::npos ? act.substr(act.find('/') + 1) : act_decl;
      const DType xt = act_decl == "bf16" ? DType::BF16 : DType::F16;
      const DType xdata = act_data == "bf16" ? DType::BF16 : DType::F16;
      const DType yt = act_out == "f32" ? DType::F32 : act_out == "bf16" ? DType::BF16 : DType::F16;
      // dense baseline weights (16-bit) and activations
      const size_t wbytes16 = size_t(N) * K * 2;
      const int rot16 = rot_count(wbytes16);
      std::vector<void*> w16(baseline ? rot16 : 0);
      for (auto& p : w16) { CK(cudaMalloc(&p, wbytes16)); CK(cudaMemset(p, 0x31, wbytes16)); }
      const int64_t maxM = 4096;
      void *x, *y; CK(cudaMalloc(&x, maxM * K * 2)); CK(cudaMalloc(&y, maxM * N * 4));
      {
        std::vector<uint16_t> hx(size_t(maxM * K)); std::mt19937 rng(1); std::normal_distribution<float> nd;
        for (auto& v : hx) v = xdata == DType::F16 ? f32_to_f16(nd(rng)) : f32_to_bf16(nd(rng));
        CK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
      }
      for (const auto& sch : split(schemes, ',')) {
        const QuantizedWeight qw = random_weight(N, K, sch, 42);
        const size_t qbytes = size_t(qw.storage_bytes());
        const int rotq = rot_count(qbytes);
        std::vector<PreparedWeight> pw;
        PrepareOptions o; o.backend = BackendKind::CUDA;
        for (int r = 0; r < rotq; ++r) pw.push_back(prepare(qw, o));
        for (const auto& mstr : split(ms, ',')) {
          const int64_t M = std::stoll(mstr);
          double cub = 0;
          for (int round = 0; round < rounds; ++round)
          for (size_t vi = 0; vi < variants.size(); ++vi) {
          apply_variant(vi);
          // MIXQ_SWEEP_PROFILE_RANGE=1: only mixq's timed graphs run inside a profiler range (ncu
          // --profile-from-start off --graph-profiling graph: the timeline of back-to-back calls)
          static const bool ranged = std::getenv("MIXQ_SWEEP_PROFILE_RANGE") != nullptr;
          if (ranged) CK(cudaProfilerStart());
          const double us = time_graph([&](int i, cudaStream_t st) {
            ExecContext c; c.stream = st;
            linear(TensorView(x, xt, {M, K}, Device::CUDA), pw[i], TensorView(y, yt, {M, N}, Device::CUDA), {}, c); }, rotq, s);
          if (ranged) CK(cudaProfilerStop());
          if (baseline && round == 0 && vi == 0) {
            cub = time_graph([&](int i, cudaStream_t st) {
              (void)st; const float al = 1.f, be = 0.f; const cudaDataType_t t = xt == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
              cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &al, w16[i], t, int(K), x, t, int(K), &be, y, t, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); }, rot16, s);
          }
          const double bytes = double(qbytes) + double(M) * K * 2 + double(M) * N * 2;
          const std::string kname = pw[0].kernel_name(M);
          std::printf("%-12s %-6s %-4s %5lld  %10.1f %10.1f %10.2f  %8.0f %8.1f  %s%s%s\n", shp.c_str(), sch.c_str(), act.c_str(), (long long)M, us, cub, cub / us, bytes / us * 1e-3, 2.0 * M * N * K / us * 1e-6, kname.c_str(), variant_names[vi].empty() ? "" : "  ", variant_names[vi].c_str());
          std::fflush(stdout);
          if (js) { std::fprintf(js, "%s{\"K\": %lld, \"N\": %lld, \"M\": %lld, \"scheme\": \"%s\", \"act\": \"%s\", \"mixq_us\": %.2f, \"cublas_us\": %.2f, \"kernel\": \"%s\", \"variant\": \"%s\", \"round\": %d, \"weight_bytes\": %zu}", first_row ? "" : ",", (long long)K, (long long)N, (long long)M, sch.c_str(), act.c_str(), us, cub, kname.c_str(), variant_names[vi].c_str(), round, qbytes); first_row = false; }
          }
          apply_variant(0);
        }
      }
      for (auto p : w16) cudaFree(p);
      cudaFree(x); cudaFree(y);
    }
  }
  if (js) { std::fprintf(js, "]}\n"); std::fclose(js); }
#if defined(MIXQ_WS_DIAG_BUILD)
  // diagnostic builds: the wgmma kernel's per-CTA timing log of the last launches
  if (const char* log = std::getenv("MIXQ_WS_CTA_LOG")) mixq::cuda::ws_diag_dump_cta_log(log);
#endif
  return 0;
}
