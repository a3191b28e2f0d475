// Diagnostic: where does the time of a small decode layer go (4096x4096 W4 at M = 1 is ~10 us for
// 8.4 MB, which HBM3 streams in ~2.8 us)? Times, on the packed W4 layout of wo_layout.hpp (512-byte
// chunks, one row tile's chunks contiguous), with the split-K grid the planner would pick:
// - an empty kernel of the same grid (the launch and drain floor of a graph of back-to-back calls);
// - the GEMV's register ring without math (RT row tiles per warp, D chunks in flight per warp);
// - every chunk of a block's split requested at once with cp.async.bulk into shared memory (sm_90);
// each also with programmatic dependent launch (PDL): the kernel lets the next launch start at once
// (griddepcontrol.launch_dependents) and only waits for the previous grid (griddepcontrol.wait)
// after its weight loads are issued, as a decode kernel may (weights do not depend on the previous
// kernel; activations and outputs do).
// Build (sm_90a): cmake --build <dir> --target cuda_small_read_probe, or
//   nvcc -O3 -std=c++17 -I bench -I src -gencode=arch=compute_90a,code=sm_90a
//        bench/cuda_small_read_probe.cu -o small_read_probe
// Run: ./small_read_probe [KxN,...]   (default: the four small layers of anchors.md)
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_timing.cuh"
#include "stream_read_kernel.cuh"
#include "cuda/kernels/sm90_sync.cuh"

using bench_timing::time_graph;
namespace sm90 = mixq::cuda::sm90;

#include "cuda/kernels/grid_dependency.cuh"

using mixq::cuda::allow_dependent_launch;
using mixq::cuda::grid_dependency_wait;

template <bool PDL>
__global__ void empty_kernel(unsigned* sink) {
  if (PDL) {
    allow_dependent_launch();
    grid_dependency_wait();
  }
  if (threadIdx.x == 1023) sink[0] = 1;
}

// Each warp requests its RT tiles' whole split (RT bulk copies of cps * 512 contiguous bytes) at
// once into its own shared-memory slice, then reads it back with 16-byte LDS.
template <int RT, bool PDL>
__global__ void __launch_bounds__(128) bulk_all(const uint4* w, int n_tiles, int kc, int cps, unsigned* sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (PDL) allow_dependent_launch();
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt0 = (blockIdx.x * 4 + warp) * RT;
  const int c0 = blockIdx.y * cps;
  const int chunks = min(cps, kc - c0);
  const uint32_t slice = sm90::smem_u32(smem) + uint32_t(warp) * RT * cps * 512;
  const uint32_t bar = sm90::smem_u32(&bars[warp]);
  unsigned acc = 0;
  const bool active = nt0 < n_tiles;
  if (lane == 0 && active) {
    sm90::mbar_init(bar, 1);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const uint32_t bytes = uint32_t(chunks) * 512;
    sm90::mbar_arrive_expect_tx(bar, RT * bytes);
#pragma unroll
    for (int rt = 0; rt < RT; ++rt) {
      const int nt = nt0 + rt < n_tiles ? nt0 + rt : nt0;
      const uint4* src = w + (int64_t(nt) * kc + c0) * 32;
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
              slice + uint32_t(rt) * cps * 512),
          "l"(src), "r"(bytes), "r"(bar)
          : "memory");
    }
  }
  if (PDL) grid_dependency_wait();
  __syncwarp();
  if (active) {
    sm90::mbar_wait(bar, 0);
    for (int rt = 0; rt < RT; ++rt)
      for (int c = 0; c < chunks; ++c) {
        const uint4 v = sm90::lds128(slice + uint32_t(rt * cps + c) * 512 + lane * 16);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
      }
  }
  if (acc == 0x9E3779B9u) sink[0] = acc;
#endif
}

struct Shape {
  int K, N;
};

template <typename Kernel, typename... Args>
void launch(Kernel k, dim3 grid, size_t smem, bool pdl, cudaStream_t s, Args... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(128);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, k, args...));
}

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  bench_timing::g_l2 = prop.l2CacheSize;
  const int sms = prop.multiProcessorCount;
  std::vector<Shape> shapes;
  for (const auto& t : bench_timing::split(argc > 1 ? argv[1] : "4096x4096,4096x6144,14336x4096,8192x10240", ','))
    shapes.push_back({std::stoi(t.substr(0, t.find('x'))), std::stoi(t.substr(t.find('x') + 1))});
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  std::printf("%s, %d SMs; us per call (median of 7 graph replays, cold L2)\n", prop.name, sms);
  std::printf("%-11s %-34s %-9s %7s %7s %9s\n", "KxN", "variant", "grid", "us", "us_pdl", "GB/s_pdl");
  for (const Shape& sh : shapes) {
    const int n_tiles = sh.N / 16, kc = sh.K / 64;
    const size_t bytes = size_t(n_tiles) * kc * 512;
    const int n_rot = bench_timing::rot_count(bytes);
    std::vector<uint4*> copies = zeroed_copies(bytes, n_rot);
    // the planner's split: all blocks resident (4 per SM), each at least 4 chunks long
    auto grid_for = [&](int rt, int min_chunks, int max_cps) {
      const int bx = (n_tiles / rt + 3) / 4;
      int splits = std::max(1, sms * 4 / bx);
      splits = std::min(splits, std::max(1, kc / min_chunks));
      int cps = (kc + splits - 1) / splits;
      cps = std::min(cps, max_cps);
      splits = (kc + cps - 1) / cps;
      return std::make_pair(dim3(bx, splits), cps);
    };
    auto row = [&](const char* name, dim3 grid, auto&& run_one) {
      double us[2];
      for (int pdl = 0; pdl < 2; ++pdl)
        us[pdl] = time_graph([&](int i, cudaStream_t st) { run_one(i, st, pdl != 0); }, n_rot, s);
      char g[32];
      std::snprintf(g, sizeof g, "%ux%u", grid.x, grid.y);
      std::printf("%5dx%-5d %-34s %-9s %7.2f %7.2f %9.0f\n", sh.K, sh.N, name, g, us[0], us[1],
                  bytes / us[1] * 1e-3);
    };
    {
      const auto gc = grid_for(4, 4, 1 << 20);
      const dim3 grid = gc.first;
      const int cps = gc.second;
      row("empty kernel (GEMV grid)", grid, [&](int, cudaStream_t st, bool pdl) {
        if (pdl) launch(empty_kernel<true>, grid, 0, true, st, sink);
        else launch(empty_kernel<false>, grid, 0, false, st, sink);
      });
      row("reg ring RT4 D2 (the GEMV's)", grid, [&](int i, cudaStream_t st, bool pdl) {
        if (pdl) launch(stream_tiles<4, 2, false, true>, grid, 0, true, st, copies[i], n_tiles, kc, cps, sink);
        else launch(stream_tiles<4, 2, false, false>, grid, 0, false, st, copies[i], n_tiles, kc, cps, sink);
      });
      row("reg ring RT4 D4", grid, [&](int i, cudaStream_t st, bool pdl) {
        if (pdl) launch(stream_tiles<4, 4, false, true>, grid, 0, true, st, copies[i], n_tiles, kc, cps, sink);
        else launch(stream_tiles<4, 4, false, false>, grid, 0, false, st, copies[i], n_tiles, kc, cps, sink);
      });
    }
    {
      const auto gc = grid_for(1, 4, 1 << 20);
      const dim3 grid = gc.first;
      const int cps = gc.second;
      row("reg ring RT1 D4", grid, [&](int i, cudaStream_t st, bool pdl) {
        if (pdl) launch(stream_tiles<1, 4, false, true>, grid, 0, true, st, copies[i], n_tiles, kc, cps, sink);
        else launch(stream_tiles<1, 4, false, false>, grid, 0, false, st, copies[i], n_tiles, kc, cps, sink);
      });
    }
    for (int min_chunks : {2, 4, 8}) {
      // at most 48 KB of shared memory per block (4 warps x RT4 x cps x 512 B): cps <= 6
      const auto gc = grid_for(4, min_chunks, 6);
      const dim3 grid = gc.first;
      const int cps = gc.second;
      const size_t smem = size_t(4) * 4 * cps * 512;
      static bool attr = false;
      if (!attr) {
        CK(cudaFuncSetAttribute(bulk_all<4, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10));
        CK(cudaFuncSetAttribute(bulk_all<4, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10));
        attr = true;
      }
      char name[64];
      std::snprintf(name, sizeof name, "bulk all RT4 (cps %d)", cps);
      row(name, grid, [&](int i, cudaStream_t st, bool pdl) {
        if (pdl) launch(bulk_all<4, true>, grid, smem, true, st, copies[i], n_tiles, kc, cps, sink);
        else launch(bulk_all<4, false>, grid, smem, false, st, copies[i], n_tiles, kc, cps, sink);
      });
    }
    for (auto& p : copies) CK(cudaFree(p));
  }
  return 0;
}
