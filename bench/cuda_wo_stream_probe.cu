// Diagnostic: the decode GEMV (kernels/sm80_wo_stream.cuh, W4/W8 g128, M = 1, f16) with parts of it
// switched off (WoStreamParams::diag, compiled in with MIXQ_STREAM_DIAG), with the split reduction
// through a cluster or global partials, with and without programmatic dependent launch: where do
// the ~10 us of a 4096x4096 layer go when streaming its 8.4 MB alone takes ~4.6
// (bench/cuda_small_read_probe.cu)? Random codes and pairs (timing only; the tests check results).
// Build: cmake --build <dir> --target cuda_wo_stream_probe, or (sm_90a; add
// -DMIXQ_STREAM_DEPTH=4 -DMIXQ_STREAM_MT8_BLOCKS=3 for the deeper register ring):
//   nvcc -O3 -std=c++17 -DMIXQ_STREAM_DIAG -I bench -I src -gencode=arch=compute_90a,code=sm_90a
//        --expt-relaxed-constexpr bench/cuda_wo_stream_probe.cu -o wo_stream_probe
// Run: ./wo_stream_probe [KxN,...] [bits: 4|8] [blocks per SM the split is sized for, 0: default]
//      [1: also the rows with parts switched off] [M,... (1-8, default 1)]
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.cuh"
#include "cuda/kernels/sm80_wo_stream.cuh"
#include "cuda/wo_launch_config.hpp"

// MIXQ_PROBE_NO_DIAG: the kernel as the library compiles it (the diag rows then time the full
// kernel too; only "full kernel" means anything)
#if !defined(MIXQ_STREAM_DIAG) && !defined(MIXQ_PROBE_NO_DIAG)
#error "build with -DMIXQ_STREAM_DIAG (or -DMIXQ_PROBE_NO_DIAG)"
#endif

using namespace mixq::cuda;
using bench_timing::time_graph;

namespace {

bool g_diag_rows = false;
bool g_bf16 = false;  // MIXQ_PROBE_BF16=1: bf16 activations and outputs (the bf16 kernel)

struct Copy {
  uint4* codes;
  half2* pairs;
};

// the MT = 8 kernel the probe times (bf16 or f16 activations: the same signature)
template <int BITS>
auto probe_kernel() {
  return g_bf16 ? wo_stream_kernel<__nv_bfloat16, 8, BITS, false, false, 4>
                : wo_stream_kernel<half, 8, BITS, false, false, 4>;
}

template <int BITS>
void set_attributes() {
  auto kernel = probe_kernel<BITS>();
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024));
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
}

template <int BITS>
void launch(const WoStreamParams& p, dim3 grid, size_t smem, cudaStream_t s) {
  const WoLaunchConfig lc(p, grid, 128, smem, s);
  CK(cudaLaunchKernelEx(&lc.cfg, probe_kernel<BITS>(), p));
}

template <int BITS>
int max_clusters(int splits, size_t smem) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(1, splits, 1);
  cfg.blockDim = dim3(128);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute a;
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = 1;
  a.val.clusterDim.y = splits;
  a.val.clusterDim.z = 1;
  cfg.attrs = &a;
  cfg.numAttrs = 1;
  int c = 0;
  CK(cudaOccupancyMaxActiveClusters(&c, probe_kernel<BITS>(), &cfg));
  return c;
}

template <int BITS>
void run_shape(int K, int N, int M, int blocks_per_sm, int sms, cudaStream_t s) {
  constexpr int RT = wo_row_tiles(8, BITS, false);
  set_attributes<BITS>();
  const int n_tiles = (N + 15) / 16, chunks = K / 64;
  const int n_blocks = (n_tiles + 4 * RT - 1) / (4 * RT);
  int splits = std::max(1, sms * blocks_per_sm / n_blocks);
  splits = std::min(splits, std::max(1, chunks / 4));
  int cps = (chunks + splits - 1) / splits;
  splits = (chunks + cps - 1) / cps;
  // the planner's staging: as much of the split as fits the shared memory of blocks_per_sm blocks
  const int x_rows = std::min(M, 8);
  auto smem_for = [&](int stage) { return StreamSmem::x_bytes(x_rows, stage * 64); };
  // MIXQ_PROBE_SMEM_BUDGET: shared memory per SM the staging may take (default: all 228 KB);
  // MIXQ_PROBE_SMEM_PAD: bytes added to each block's allocation (unused: only the L1 / shared
  // memory split of the SM changes)
  const char* budget_env = std::getenv("MIXQ_PROBE_SMEM_BUDGET");
  const char* pad_env = std::getenv("MIXQ_PROBE_SMEM_PAD");
  const size_t sm_budget = budget_env ? size_t(std::atol(budget_env)) : size_t(228 * 1024);
  int stage = cps;
  while (stage > 1 && smem_for(stage) > sm_budget / blocks_per_sm - 1024) --stage;
  const size_t smem = smem_for(stage) + (pad_env ? size_t(std::atol(pad_env)) : 0);
  const size_t smem_cluster = std::max(smem, size_t(4) * RT * 16 * x_rows * 4);
  const bool cluster_ok = splits <= kStreamMaxClusterSplits && splits > 1 &&
                          n_blocks <= max_clusters<BITS>(splits, smem_cluster);

  const size_t code_bytes = size_t(n_tiles) * chunks * 32 * (BITS == 4 ? 16 : 32);
  const int groups = K / 128;
  const size_t pair_bytes = size_t(round_up(int64_t(n_tiles) * 16, 64)) * groups * 4;  // lane order
  const int n_rot = bench_timing::rot_count(code_bytes + pair_bytes);
  std::mt19937 rng(1);
  std::vector<uint32_t> hc(code_bytes / 4);
  for (auto& v : hc) v = rng();
  std::vector<half2> hp(pair_bytes / 4);
  std::uniform_real_distribution<float> us(0.005f, 0.02f);
  for (auto& v : hp) v = __floats2half2_rn(us(rng), -0.08f);
  std::vector<half> hx(size_t(M) * K);
  std::normal_distribution<float> nx(0.f, 1.f);
  for (auto& v : hx) {  // bf16: the same 16-bit slots hold bf16 values
    const float f = nx(rng);
    v = g_bf16 ? __ushort_as_half(__bfloat16_as_ushort(__float2bfloat16(f))) : __float2half(f);
  }
  std::vector<Copy> copies(n_rot);
  for (auto& c : copies) {
    CK(cudaMalloc(&c.codes, code_bytes));
    CK(cudaMalloc(&c.pairs, pair_bytes));
    CK(cudaMemcpy(c.codes, hc.data(), code_bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.pairs, hp.data(), pair_bytes, cudaMemcpyHostToDevice));
  }
  half *x, *y;
  float* partial;
  unsigned* tickets;
  CK(cudaMalloc(&x, size_t(M) * K * 2));
  CK(cudaMemcpy(x, hx.data(), size_t(M) * K * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&y, size_t(M) * N * 2));
  CK(cudaMalloc(&partial, size_t(splits) * M * N * 4));
  CK(cudaMalloc(&tickets, n_blocks * 4));
  CK(cudaMemset(tickets, 0, n_blocks * 4));

  WoStreamParams p{};
  p.x = x;
  p.ldx = K;
  p.x_type = g_bf16 ? IoType::BF16 : IoType::F16;
  p.M = M;
  p.N = N;
  p.K = K;
  p.x_rows = x_rows;
  p.pair_f32 = false;
  p.int_zero = true;
  p.Kp = K;
  p.group_shift = 7;
  p.groups = groups;
  p.chunks_per_split = cps;
  p.chunks_per_stage = stage;
  p.splits = splits;
  p.partial = partial;
  p.tickets = tickets;
  p.y = y;
  p.ldy = N;
  p.y_type = g_bf16 ? IoType::BF16 : IoType::F16;
  p.bias_type = IoType::F32;
  p.clamp_lo = -INFINITY;
  p.clamp_hi = INFINITY;
  const dim3 grid(n_blocks, splits, 1);
  const double gb = double(code_bytes + pair_bytes) * 1e-3;

  struct Mode {
    const char* name;
    bool cluster, pdl;
  };
  std::vector<Mode> modes = {{"global", false, false}, {"global+pdl", false, true}};
  if (cluster_ok) {
    modes.push_back({"cluster", true, false});
    modes.push_back({"cluster+pdl", true, true});
  }
  // the outputs of the full kernel under every mode (same summation order: same bits)
  std::vector<std::vector<half>> outs;
  for (const Mode& m : modes) {
    p.cluster = m.cluster;
    p.pdl = m.pdl;
    p.diag = 0;
    p.codes = copies[0].codes;
    p.pairs_stream = copies[0].pairs;
    CK(cudaMemset(y, 0xFF, size_t(M) * N * 2));
    launch<BITS>(p, grid, m.cluster ? smem_cluster : smem, s);
    CK(cudaStreamSynchronize(s));
    outs.emplace_back(size_t(M) * N);
    CK(cudaMemcpy(outs.back().data(), y, size_t(M) * N * 2, cudaMemcpyDeviceToHost));
  }
  int mismatches = 0;
  for (size_t i = 1; i < outs.size(); ++i)
    for (size_t n = 0; n < outs[i].size(); ++n)
      mismatches += __half_as_ushort(outs[i][n]) != __half_as_ushort(outs[0][n]);

  std::printf("\n%dx%d W%d M=%d: grid %dx%d (%d chunks per split, %d per stage, %zu B smem), %.1f MB, %d copies, cluster %s, "
              "outputs of the modes differ in %d of %d\n",
              K, N, BITS, M, n_blocks, splits, cps, stage, smem, gb * 1e-3, n_rot, cluster_ok ? "fits" : "does not fit",
              mismatches, M * N * int(outs.size() - 1));
  std::printf("%-34s", "diag \\ us per call");
  for (const Mode& m : modes) std::printf(" %12s", m.name);
  std::printf("\n");
  struct Variant {
    int diag;
    const char* name;
  };
  std::vector<Variant> diags = {{0, "full kernel"}};
  if (g_diag_rows) {
    diags.push_back({kStreamDiagNoStage, "- activation staging"});
    diags.push_back({kStreamDiagNoPairs, "- scale pairs"});
    diags.push_back({kStreamDiagNoMath, "- conversion + MMA"});
    diags.push_back({kStreamDiagNoReduce, "- split reduction + stores"});
    diags.push_back({kStreamDiagNoStage | kStreamDiagNoPairs | kStreamDiagNoMath | kStreamDiagNoReduce,
                     "weight loads only"});
  }
  for (const auto& d : diags) {
    std::printf("%-34s", d.name);
    for (const Mode& m : modes) {
      p.cluster = m.cluster;
      p.pdl = m.pdl;
      p.diag = d.diag;
      const double t = time_graph(
          [&](int i, cudaStream_t st) {
            WoStreamParams q = p;
            q.codes = copies[i].codes;
            q.pairs_stream = copies[i].pairs;
            launch<BITS>(q, grid, m.cluster ? smem_cluster : smem, st);
          },
          n_rot, s);
      std::printf(" %12.2f", t);
    }
    std::printf("\n");
  }
  for (auto& c : copies) {
    CK(cudaFree(c.codes));
    CK(cudaFree(c.pairs));
  }
  CK(cudaFree(x));
  CK(cudaFree(y));
  CK(cudaFree(partial));
  CK(cudaFree(tickets));
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  bench_timing::g_l2 = prop.l2CacheSize;
  const std::string shapes = argc > 1 ? argv[1] : "4096x4096,4096x6144,14336x4096,8192x10240";
  const int bits = argc > 2 ? std::atoi(argv[2]) : 4;
  const int bps = argc > 3 && std::atoi(argv[3]) > 0 ? std::atoi(argv[3]) : (bits == 4 ? 4 : 5);
  g_diag_rows = argc > 4 && std::atoi(argv[4]) != 0;
  g_bf16 = std::getenv("MIXQ_PROBE_BF16") && std::atoi(std::getenv("MIXQ_PROBE_BF16")) == 1;
  std::vector<int> ms;
  for (const auto& m : bench_timing::split(argc > 5 ? argv[5] : "1", ',')) ms.push_back(std::min(8, std::max(1, std::stoi(m))));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  std::printf("%s: %d SMs; %s activations; split sized for %d blocks per SM; median of 7 graph replays, cold L2\n",
              prop.name, prop.multiProcessorCount, g_bf16 ? "bf16" : "f16", bps);
  for (const auto& t : bench_timing::split(shapes, ',')) {
    const int K = std::stoi(t.substr(0, t.find('x'))), N = std::stoi(t.substr(t.find('x') + 1));
    for (int M : ms) {
      if (bits == 8) run_shape<kCodesU8>(K, N, M, bps, prop.multiProcessorCount, s);
      else run_shape<kCodesU4>(K, N, M, bps, prop.multiProcessorCount, s);
    }
  }
  return 0;
}
