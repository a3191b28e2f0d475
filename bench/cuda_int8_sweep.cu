// INT8 W8A8 CUDA sweep: mixq int8-block (with its activation quantizer, and the GEMM alone), the
// quantizer alone, cuBLAS FP16 (cublasGemmEx) and cuBLAS INT8 (cublasGemmEx s8 -> s32, no scales)
// in one process. Cold L2: every timed call uses the next of enough weight copies to cover >= 4x
// the L2; each figure is the median of 7 replays of a CUDA graph of >= 10 calls.
//   cuda_int8_sweep [--shapes KxN,...] [--m 1,16,...] [--g 128] [--asym] [--kernels auto|all|k1,k2]
//                   [--json FILE]
// --kernels all also times every mixq tile shape at each M (MIXQ_FORCE_KERNEL), to measure the
// dispatch thresholds.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cuda/act_quant.hpp"
#include "mixq/act_quant.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "bench_timing.cuh"

using namespace mixq;

#define CB(x) do { cublasStatus_t e_ = (x); if (e_ != CUBLAS_STATUS_SUCCESS) { std::fprintf(stderr, "%s: status %d\n", #x, int(e_)); std::exit(1); } } while (0)

using bench_timing::g_l2;
using bench_timing::rot_count;
using bench_timing::split;
using bench_timing::time_graph;

static QuantizedWeight random_weight(int64_t N, int64_t K, int64_t g, bool asym, uint32_t seed) {
  QuantizedWeight w;
  w.N = N; w.K = K; w.code_type = DType::I8; w.block_k = g; w.block_n = 1; w.scale_type = DType::F16;
  w.zero_kind = asym ? ZeroKind::Offset : ZeroKind::None;
  w.allocate();
  std::mt19937 rng(seed);
  for (auto& b : w.codes) b = uint8_t(rng());
  std::uniform_real_distribution<float> d(0.5f, 1.5f);
  for (size_t i = 0; i < w.scales.size() / 2; ++i) { uint16_t h = f32_to_f16(0.02f / 127 * d(rng)); std::memcpy(&w.scales[2 * i], &h, 2); }
  for (size_t i = 0; i < w.zeros.size() / 2; ++i) { uint16_t h = f32_to_f16(0.001f * (d(rng) - 1)); std::memcpy(&w.zeros[2 * i], &h, 2); }
  return w;
}

__global__ void fill_f16(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    const float v = (float(h & 0xFFFF) / 65536.f - 0.5f) * 4.f;
    p[i] = __half_as_ushort(__float2half_rn(v));
  }
}

int main(int argc, char** argv) {
  std::string shapes = "14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192";
  std::string ms = "1,16,64,256,1024,4096", kernels = "auto", json;
  int64_t g = 128; bool asym = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--shapes") shapes = next(); else if (a == "--m") ms = next(); else if (a == "--g") g = std::stoll(next());
    else if (a == "--asym") asym = true; else if (a == "--kernels") kernels = next(); else if (a == "--json") json = next();
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0)); g_l2 = prop.l2CacheSize;
  cudaStream_t s; CK(cudaStreamCreate(&s));
  cublasHandle_t h; CB(cublasCreate(&h)); CB(cublasSetStream(h, s));
  void* cublas_ws; CK(cudaMalloc(&cublas_ws, 32 << 20)); CB(cublasSetWorkspace(h, cublas_ws, 32 << 20));
  FILE* js = json.empty() ? nullptr : std::fopen(json.c_str(), "w");
  if (js) std::fprintf(js, "{\"device\": \"%s\", \"sms\": %d, \"l2\": %zu, \"g\": %lld, \"asym\": %s, \"rows\": [", prop.name, prop.multiProcessorCount, g_l2, (long long)g, asym ? "true" : "false");
  std::printf("device %s, %d SMs, L2 %zu MB, int8-block g%lld %s\n", prop.name, prop.multiProcessorCount, g_l2 >> 20, (long long)g, asym ? "offset" : "symmetric");
  std::printf("%-12s %5s %9s %9s %8s %9s %9s %8s %8s %7s  %s\n", "KxN", "M", "mixq_us", "gemm_us", "quant_us", "fp16_us", "int8_us", "TOPS", "x_fp16", "x_int8", "kernel");
  bool first_row = true;
  // --kernels auto | all (every sm80 tile) | a comma list of kernel names ("auto" = the dispatch)
  std::vector<std::string> forced = kernels == "all" ? std::vector<std::string>{"sm80_i8_16x32", "sm80_i8_64x64", "sm80_i8_128x128"} : std::vector<std::string>{""};
  if (kernels != "all" && kernels != "auto") { forced = split(kernels, ','); for (auto& k : forced) if (k == "auto") k.clear(); }
  for (const auto& shp : split(shapes, ',')) {
    const auto kn = split(shp, 'x');
    const int64_t K = std::stoll(kn[0]), N = std::stoll(kn[1]);
    const size_t w8 = size_t(N) * K, w16 = w8 * 2;
    const int rot8 = rot_count(w8), rot16 = rot_count(w16);
    std::vector<PreparedWeight> pw;
    PrepareOptions o; o.backend = BackendKind::CUDA; o.act = ActQuant::Int8Block;
    {
      const QuantizedWeight w = random_weight(N, K, g, asym, 1);
      for (int r = 0; r < rot8; ++r) pw.push_back(prepare(w, o));
    }
    std::vector<void*> wf16(rot16), wi8(rot8);
    for (auto& p : wf16) { CK(cudaMalloc(&p, w16)); fill_f16<<<1024, 256>>>(static_cast<uint16_t*>(p), w8, 7); }
    for (auto& p : wi8) { CK(cudaMalloc(&p, w8)); CK(cudaMemset(p, 0x13, w8)); }
    const int64_t maxM = 4096;
    void *x, *y, *y32; CK(cudaMalloc(&x, maxM * K * 2)); CK(cudaMalloc(&y, maxM * N * 2)); CK(cudaMalloc(&y32, maxM * N * 4));
    fill_f16<<<1024, 256>>>(static_cast<uint16_t*>(x), size_t(maxM) * K, 3);
    void* ws; const size_t wsb = linear_workspace_size(pw[0], maxM); CK(cudaMalloc(&ws, wsb));
    CK(cudaDeviceSynchronize());
    for (const auto& mstr : split(ms, ',')) {
      const int64_t M = std::stoll(mstr);
      const double ops = 2.0 * double(M) * double(N) * double(K);
      // quantized activations for the GEMM-only timing (same workspace layout as linear()); the
      // GEMM alone runs with the weight's own scratch, since its workspace holds them
      const int64_t ldq = cuda::act_row_pitch(K), ldm = cuda::act_meta_pitch(M);
      const int64_t nb = (K + g - 1) / g;
      const size_t meta = (size_t(nb * ldm) * 4 + 255) / 256 * 256;
      char* p = static_cast<char*>(ws);
      int8_t* q = reinterpret_cast<int8_t*>(p); p += (size_t(M * ldq) + 255) / 256 * 256;
      float* sx = reinterpret_cast<float*>(p); float* ox = reinterpret_cast<float*>(p + meta);
      int32_t* sums = reinterpret_cast<int32_t*>(p + 2 * meta);
      const auto mv = [&](void* b, DType t) {
        return TensorView::strided(b, t, {nb, M}, {ldm, 1}, Device::CUDA); };
      const QuantizedActivations xq = QuantizedActivations::int8_block(
          g, TensorView::strided(q, DType::I8, {M, K}, {ldq, 1}, Device::CUDA),
          mv(sx, DType::F32), mv(ox, DType::F32), mv(sums, DType::I32));
      const double quant_us = time_graph([&](int, cudaStream_t st) {
        cuda::launch_quantize_int8_block(x, 0, K, M, K, g, q, ldq, sx, ox, sums, ldm, st); }, 1, s);
      const float alpha = 1.f, beta = 0.f; const int32_t ialpha = 1, ibeta = 0;
      const double fp16_us = time_graph([&](int i, cudaStream_t) {
        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &alpha, wf16[i], CUDA_R_16F, int(K), x, CUDA_R_16F, int(K),
                        &beta, y, CUDA_R_16F, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)); }, rot16, s);
      double int8_us = -1;
      if (K % 4 == 0 && N % 4 == 0) {  // x as int8: reinterpret the f16 buffer's bytes
        int8_us = time_graph([&](int i, cudaStream_t) {
          CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &ialpha, wi8[i], CUDA_R_8I, int(K), x, CUDA_R_8I, int(K),
                          &ibeta, y32, CUDA_R_32I, int(N), CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT)); }, rot8, s);
      }
      for (const auto& fk : forced) {
        if (fk.empty()) unsetenv("MIXQ_FORCE_KERNEL"); else setenv("MIXQ_FORCE_KERNEL", fk.c_str(), 1);
        const std::string kname = pw[0].kernel_name(M);
        ExecContext ctx; ctx.stream = s; ctx.workspace = ws; ctx.workspace_bytes = wsb;
        const double mixq_us = time_graph([&](int i, cudaStream_t) {
          linear(TensorView(x, DType::F16, {M, K}, Device::CUDA), pw[i], TensorView(y, DType::F16, {M, N}, Device::CUDA), {}, ctx); }, rot8, s);
        const double gemm_us = time_graph([&](int i, cudaStream_t st) {
          ExecContext gctx; gctx.stream = st;
          linear(xq, pw[i], TensorView(y, DType::F16, {M, N}, Device::CUDA), {}, gctx); }, rot8, s);
        std::printf("%-12s %5lld %9.1f %9.1f %8.1f %9.1f %9.1f %8.1f %8.2f %7.2f  %s\n", shp.c_str(), (long long)M, mixq_us, gemm_us, quant_us,
                    fp16_us, int8_us, ops / mixq_us * 1e-6, fp16_us / mixq_us, int8_us > 0 ? int8_us / mixq_us : 0.0, kname.c_str());
        if (js) std::fprintf(js, "%s\n{\"shape\": \"%s\", \"K\": %lld, \"N\": %lld, \"M\": %lld, \"kernel\": \"%s\", \"mixq_us\": %.2f, \"gemm_us\": %.2f, \"quant_us\": %.2f, \"cublas_fp16_us\": %.2f, \"cublas_int8_us\": %.2f}",
                             first_row ? "" : ",", shp.c_str(), (long long)K, (long long)N, (long long)M, kname.c_str(), mixq_us, gemm_us, quant_us, fp16_us, int8_us);
        first_row = false;
        std::fflush(stdout);
      }
      unsetenv("MIXQ_FORCE_KERNEL");
    }
    for (auto p : wf16) cudaFree(p);
    for (auto p : wi8) cudaFree(p);
    cudaFree(x); cudaFree(y); cudaFree(y32); cudaFree(ws);
  }
  if (js) { std::fprintf(js, "]}\n"); std::fclose(js); }
  return 0;
}
