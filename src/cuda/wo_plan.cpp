#include "cuda/wo_plan.hpp"

#include <algorithm>

#include "mixq/error.hpp"

namespace mixq::cuda {

const char* wo_kernel_name(WoKernel k) {
  return k == WoKernel::Stream ? "sm80_wo_stream" : "wo_dequant_cublas";
}

int64_t stream_max_m(const DeviceCaps&, int, bool x_f32) {
  // f32 activations run two MMAs per tile (hi/lo split), so cuBLAS takes over earlier.
  return x_f32 ? 32 : 64;
}

namespace {
size_t align256(size_t b) { return (b + 255) / 256 * 256; }
int ceil_div(int64_t a, int64_t b) { return int((a + b - 1) / b); }
}  // namespace

WoPlan plan_weight_only(int64_t M, const WoLayout& L, int x_bytes, bool x_f32, bool gather,
                        const DeviceCaps& caps, const std::string& force) {
  MIXQ_CHECK_ARG(force.empty() || force == "stream" || force == "cublas",
                 "force_kernel '", force, "' is not one of stream, cublas");
  WoPlan p;
  const bool stream = force == "stream" || (force.empty() && M <= stream_max_m(caps, L.bits, x_f32));
  if (!stream) {
    p.kernel = WoKernel::DequantCublas;
    const int64_t elem = x_f32 ? 4 : 2;
    int64_t rows = int64_t(kDequantChunkBytes / size_t(L.Kp * elem)) / kTileRows * kTileRows;
    rows = std::max<int64_t>(rows, kTileRows);
    p.chunk_rows = std::min<int64_t>(rows, L.Np);
    p.chunk_bytes = size_t(p.chunk_rows * L.Kp * elem);
    p.gather_bytes = gather ? size_t(M * L.K * x_bytes) : 0;
    return p;
  }
  p.kernel = WoKernel::Stream;
  p.mt = M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : 64;
  p.m_blocks = ceil_div(M, p.mt);
  const int n_tiles = ceil_div(L.N, kTileRows);
  p.n_blocks = ceil_div(n_tiles, 4);
  const int chunks = int(L.Kp / kChunkK);

  // Shared memory: keep a block under ~48 KB so four fit on an SM (enough warps in flight to
  // cover DRAM latency); the activation tile is restaged when a split's K range is longer.
  const size_t budget = 48 * 1024;
  const int sx = x_f32 ? 2 : 1;
  int stage = 1;
  for (int s = chunks; s >= 1; --s) {
    const int64_t kr = int64_t(s) * kChunkK;
    const int max_groups = int(kr / std::min<int64_t>(L.group, kr)) + 2;
    const size_t bytes = size_t(p.mt) * (kr + 8) * 2 * sx + size_t(p.mt) * max_groups * 4 + 16;
    if (bytes <= budget) { stage = s; break; }
  }

  // Split K so that about four blocks per SM are resident, within the workspace cap.
  const int64_t base = int64_t(p.n_blocks) * p.m_blocks;
  const int64_t target = int64_t(caps.sm_count) * 4;
  int splits = int(std::max<int64_t>(1, (target + base - 1) / base));
  splits = std::min(splits, chunks);
  const int64_t cap = int64_t(kMaxPartialFloats / size_t(std::max<int64_t>(1, M * L.N)));
  splits = int(std::max<int64_t>(1, std::min<int64_t>(splits, cap)));
  p.chunks_per_split = ceil_div(chunks, splits);
  p.splits = ceil_div(chunks, p.chunks_per_split);
  p.chunks_per_stage = std::min(stage, p.chunks_per_split);
  const int64_t kr = int64_t(p.chunks_per_stage) * kChunkK;
  p.max_groups_per_stage = int(kr / std::min<int64_t>(L.group, kr)) + 2;
  p.smem_bytes = size_t(p.mt) * (kr + 8) * 2 * sx + size_t(p.mt) * p.max_groups_per_stage * 4 + 16;
  p.partial_floats = p.splits > 1 ? size_t(p.splits) * size_t(M) * size_t(L.N) : 0;
  p.tickets = size_t(base);
  return p;
}

size_t wo_workspace_bytes(const WoPlan& p) {
  return align256(p.partial_floats * 4) + align256(p.tickets * 4) + align256(p.chunk_bytes) +
         align256(p.gather_bytes);
}

}  // namespace mixq::cuda
