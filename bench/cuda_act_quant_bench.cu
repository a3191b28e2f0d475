// Activation quantizer bandwidth (mixq/act_quant.hpp on CUDA tensors) against the
// device-to-device copy ceiling measured in the same run.
//   cuda_act_quant_bench [--shapes MxK,...] [--act f16,bf16,f32] [--json FILE]
// Bytes counted per call: x read (M*K*elem) + codes written (M*pitch) + meta written (4 or 12
// bytes per block). The copy ceiling is cudaMemcpyAsync of a 256 MiB buffer, counted as read +
// write (2 * bytes). Every figure is the median of 7 replays of a CUDA graph of >= 10 calls that
// rotate over enough input copies to cover >= 4x the L2 (so the input is read cold).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "mixq/act_quant.hpp"
#include "mixq/numeric.hpp"
#include "bench_timing.cuh"

using namespace mixq;

namespace {

using bench_timing::g_l2;
using bench_timing::split;
using bench_timing::time_graph;
// at least two copies: consecutive calls never reuse one input
int rot_count(size_t bytes) { return bench_timing::rot_count(bytes, 2); }

struct Row {
  std::string quant, act;
  int64_t M, K;
  double us, gbs, pct;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> shapes = {"4096x16384", "4096x4096", "512x16384", "16x16384"};
  std::vector<std::string> acts = {"f16", "bf16"};
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--shapes") shapes = split(next(), ',');
    else if (a == "--act") acts = split(next(), ',');
    else if (a == "--json") json = next();
    else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  g_l2 = size_t(prop.l2CacheSize);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  // Copy ceiling: D2D memcpy of 256 MiB, rotating 2 sources (read + write counted).
  const size_t cbytes = size_t(256) << 20;
  void *c_src[2], *c_dst;
  for (auto& p : c_src) { CK(cudaMalloc(&p, cbytes)); CK(cudaMemset(p, 1, cbytes)); }
  CK(cudaMalloc(&c_dst, cbytes));
  const double copy_us = time_graph(
      [&](int i, cudaStream_t st) { CK(cudaMemcpyAsync(c_dst, c_src[i], cbytes, cudaMemcpyDeviceToDevice, st)); },
      2, s);
  const double copy_gbs = 2.0 * double(cbytes) / copy_us * 1e-3;
  for (auto p : c_src) CK(cudaFree(p));
  CK(cudaFree(c_dst));
  std::printf("device %s, L2 %zu MiB; D2D copy ceiling %.1f GB/s (256 MiB, read + write)\n",
              prop.name, g_l2 >> 20, copy_gbs);

  std::vector<Row> rows;
  std::printf("%-10s %-5s %6s %6s %10s %10s %8s\n", "quant", "act", "M", "K", "us", "GB/s", "%copy");
  for (const auto& sh : shapes) {
    const auto mk = split(sh, 'x');
    const int64_t M = std::atoll(mk.at(0).c_str()), K = std::atoll(mk.at(1).c_str());
    for (const auto& an : acts) {
      const DType t = an == "f16" ? DType::F16 : an == "bf16" ? DType::BF16 : DType::F32;
      const size_t esize = t == DType::F32 ? 4 : 2;
      const size_t xbytes = size_t(M * K) * esize;
      const int nrot = rot_count(xbytes);
      std::vector<void*> xs(static_cast<size_t>(nrot));
      {
        std::vector<uint16_t> h(size_t(M * K) * esize / 2);
        std::mt19937 rng(1);
        std::normal_distribution<float> nd(0.f, 1.f);
        if (t == DType::F32)
          for (size_t i = 0; i < h.size(); i += 2) { const float f = nd(rng); std::memcpy(&h[i], &f, 4); }
        else
          for (auto& v : h) v = t == DType::F16 ? f32_to_f16(nd(rng)) : f32_to_bf16(nd(rng));
        for (auto& p : xs) { CK(cudaMalloc(&p, xbytes)); CK(cudaMemcpy(p, h.data(), xbytes, cudaMemcpyHostToDevice)); }
      }
      const int64_t ldq = act_quant_row_pitch(K), ldm = act_quant_meta_pitch(M);
      void *q, *meta;
      const int64_t nb_max = (K + 31) / 32;
      CK(cudaMalloc(&q, size_t(M * ldq)));
      CK(cudaMalloc(&meta, size_t(3 * nb_max * ldm) * 4));
      for (const char* quant : {"fp8_1x128", "int8_b128", "int8_b64"}) {
        const std::string qn = quant;
        const int64_t block = qn == "int8_b64" ? 64 : 128;
        const int64_t nb = (K + block - 1) / block;
        const bool fp8 = qn == "fp8_1x128";
        const TensorView qv = TensorView::strided(q, fp8 ? DType::F8E4M3 : DType::I8, {M, K}, {ldq, 1}, Device::CUDA);
        auto mv = [&](int j, DType mt) {
          return TensorView::strided(static_cast<float*>(meta) + j * nb * ldm, mt, {nb, M}, {ldm, 1}, Device::CUDA);
        };
        const double us = time_graph(
            [&](int i, cudaStream_t st) {
              ExecContext ctx;
              ctx.stream = st;
              const TensorView xv = TensorView::strided(xs[size_t(i)], t, {M, K}, {K, 1}, Device::CUDA);
              if (fp8) quantize_activations_fp8_block(xv, qv, mv(0, DType::F32), ctx);
              else quantize_activations_int8_block(xv, block, qv, mv(0, DType::F32), mv(1, DType::F32), mv(2, DType::I32), ctx);
            },
            nrot, s);
        const double bytes = double(xbytes) + double(M * ldq) + double(nb * M) * (fp8 ? 4 : 12);
        const double gbs = bytes / us * 1e-3;
        rows.push_back({qn, an, M, K, us, gbs, 100.0 * gbs / copy_gbs});
        const Row& r = rows.back();
        std::printf("%-10s %-5s %6lld %6lld %10.2f %10.1f %7.1f%%\n", r.quant.c_str(), r.act.c_str(),
                    (long long)M, (long long)K, r.us, r.gbs, r.pct);
      }
      for (auto p : xs) CK(cudaFree(p));
      CK(cudaFree(q));
      CK(cudaFree(meta));
    }
  }
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (!f) { std::fprintf(stderr, "cannot write %s\n", json.c_str()); return 1; }
    std::fprintf(f, "{\"device\": \"%s\", \"copy_ceiling_gbs\": %.2f, \"rows\": [\n", prop.name, copy_gbs);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(f, "  {\"quant\": \"%s\", \"act\": \"%s\", \"M\": %lld, \"K\": %lld, \"us\": %.3f, "
                   "\"gbs\": %.2f, \"pct_copy\": %.2f}%s\n", r.quant.c_str(), r.act.c_str(),
                   (long long)r.M, (long long)r.K, r.us, r.gbs, r.pct, i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  CK(cudaStreamDestroy(s));
  return 0;
}
