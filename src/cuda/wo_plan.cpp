#include "cuda/wo_plan.hpp"

#include <algorithm>
#include <cstdlib>

#include "cuda/wo_stream_k.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

// Must match kStreamWarps (wo_kernels.hpp).
constexpr int kStreamWarpsPlan = 4;

const char* wo_kernel_name(WoKernel k) {
  switch (k) {
    case WoKernel::Stream: return "sm80_wo_stream";
    case WoKernel::Wgmma: return "sm90_wo_wgmma";
    default: return "wo_dequant_cublas";
  }
}

int64_t stream_max_m(const DeviceCaps&, int, bool x_f32) {
  // Measured on H200 (bench/results/cuda_weight_only.md, mixq bench --backend cuda): on
  // 14336x21504 W4 g128 the streaming kernel takes 406 us at M = 32 and 1312 us at M = 64, where
  // dequantize + cuBLAS takes ~510 us. f32 activations run two MMAs per tile (hi/lo split), so
  // cuBLAS takes over earlier.
  return x_f32 ? 16 : 32;
}

int64_t stream_max_m_wgmma(const WoLayout& L, int sm_count) {
  // H100, the streaming kernel forced against the wgmma kernel at M = 1-8 on the nine layers, W4
  // and W8 g128, f16 and bf16 (bench/results/session22/call3, call4: after the streaming kernel's
  // activations came by cp.async in pieces and its run sums from the tensor cores, its cost
  // grows ~0.1-0.4 us per token instead of ~2). Up to M = 8 it shares one MMA shape, so where the
  // wgmma kernel has few 128-row tiles for the SMs (stream-K cuts every tile, its reduction and
  // tail weigh most) the streaming kernel holds on longer; where the wgmma kernel has more than
  // two waves of tiles it wins from M = 3 (W4) or even M = 1 (W8 8192x57344: 161.9 us against
  // 172.7). Within ~1% of the better kernel on every measured row.
  const int64_t mib = L.packed_bytes() >> 20;
  const int64_t tiles = (L.N + 127) / 128;  // the wgmma kernel's 128-row weight tiles
  if (L.bits == 4) {
    if (mib <= 10) return 6;
    if (mib <= 48) return 8;
    if (tiles < sm_count) return 6;
    if (tiles <= 2 * sm_count) return mib <= 96 ? 4 : 3;
    return 2;
  }
  if (mib <= 20) return 4;
  if (tiles < sm_count) return mib <= 96 ? 6 : 3;
  return tiles <= 2 * sm_count ? 1 : 0;
}

namespace {
size_t align256(size_t b) { return (b + 255) / 256 * 256; }
int ceil_div(int64_t a, int64_t b) { return int((a + b - 1) / b); }
}  // namespace

int choose_splits(int64_t tiles, int sm_count, int chunks, int max_splits) {
  int best = 1;
  double best_eff = 0;
  for (int s = 1; s <= max_splits && s * 4 <= std::max(chunks, 4); ++s) {
    const int64_t ctas = tiles * s;
    const int64_t waves = (ctas + sm_count - 1) / sm_count;
    // 2% per extra split for the partial-sum traffic and the reduction
    const double eff = double(ctas) / double(waves * sm_count) * (1.0 - 0.02 * (s - 1));
    if (eff > best_eff + 1e-9) { best_eff = eff; best = s; }
  }
  return best;
}

WoPlan plan_weight_only(int64_t M, const WoLayout& L, int x_bytes, bool x_f32, bool gather,
                        bool y_direct, const DeviceCaps& caps, const std::string& force,
                        bool wgmma_ok, const StreamKnobs& knobs, bool y16) {
  MIXQ_CHECK_ARG(force.empty() || force == "stream" || force == "cublas" || force == "wgmma",
                 "force_kernel '", force, "' is not one of stream, cublas, wgmma");
  MIXQ_CHECK(force != "wgmma" || wgmma_ok, ErrorCode::Unsupported,
             "force_kernel 'wgmma' needs an sm_90a build on a Hopper GPU and 16-bit activations "
             "with 16-byte aligned rows");
  WoPlan p;
  // Which kernel, measured on H100:
  // - the streaming kernel up to stream_max_m_wgmma(L), then the warp-specialized wgmma kernel
  //   (128-K stages, two CTAs per SM at M <= 16); the thresholds of earlier versions and their
  //   data are in bench/results/cuda_wo_wgmma_ws_k128.md, cuda_wo_wgmma_ws_streamk.md and
  //   cuda_wo_wgmma.md;
  // - past kWgmmaMaxM (kWgmmaBigMaxM on large GEMMs) dequantize + cuBLAS wins where the output is
  //   f32 or unaligned; a 16-bit output stays on the wgmma kernel (wo_plan.hpp).
  const int64_t stream_max = !wgmma_ok ? stream_max_m(caps, L.bits, x_f32) : stream_max_m_wgmma(L, caps.sm_count);
  const bool stream = force == "stream" || (force.empty() && M <= stream_max);
  const bool big_gemm = L.K >= 8192 && L.N * L.K >= (int64_t(128) << 20);
  const bool wgmma = force == "wgmma" ||
                     (force.empty() && wgmma_ok && (y16 || M <= kWgmmaMaxM || (big_gemm && M <= kWgmmaBigMaxM)));
  if (!stream && wgmma) {
    p.kernel = WoKernel::Wgmma;
    p.mt = M <= 16 ? 16 : M <= 32 ? 32 : M <= 64 ? 64 : M <= 128 ? 128 : 256;
    // Short GEMMs (K <= 4096) with few 128-row tiles at M > 128: a token tile of 128 where 256
    // leaves the tiles short of half the SMs (H100, bench/results/cuda_wo_wgmma_ws_k128/
    // h100_token_tile_sweep_m128_1024.txt, W4 g128 f16: 4096x4096 M = 256 21.7 us at mt = 64
    // against 27.9 at 256, M = 512 33.0 at 128 against 40.7; 4096x6144 M = 256 32.4 at 128
    // against 31.9). Not 64: since the TMA-store epilogue and the inline reduction, 128 is as fast
    // in f16 and 9% faster in bf16 (session 25 call 7, 4096x4096 M = 256: 21.0 / 21.1 us against
    // 21.2 / 23.2). Long K keeps 256: stream-K spreads its few tiles (14336x4096 M = 256: 52.5
    // at 256, 62.0 at 64).
    if (p.mt == 256 && L.K <= 4096 && int64_t(ceil_div(L.N, 128)) * ceil_div(M, 256) < caps.sm_count / 2)
      p.mt = 128;
    if (const char* e = std::getenv("MIXQ_WGMMA_MT")) {  // tuning knob: force the token tile
      const int v = std::atoi(e);
      if (v == 16 || v == 32 || v == 64 || v == 128 || v == 256) p.mt = v;
    }
    p.m_blocks = ceil_div(M, p.mt);
    p.n_blocks = ceil_div(L.N, 128);
    const int chunks = int(L.Kp / kChunkK);
    p.gather_bytes = gather ? size_t(M * round_up(L.K, 8) * x_bytes) : 0;
    // Which kernel: the warp-specialized kernel at every M since its copies are three TMA loads
    // per stage (H100, bench/results/cuda_wo_wgmma_ws_streamk.md: 14336x21504 W8 M = 64 124 us
    // against 148 for W4 on v1); MIXQ_WGMMA_V1=1 forces the v1 kernel (2 CTAs per SM, split-K).
    static const int v1_env = [] {
      const char* e = std::getenv("MIXQ_WGMMA_V1");
      return e && (e[0] == '0' || e[0] == '1') ? e[0] - '0' : -1;
    }();
    p.stream_k = v1_env != 1 || L.e4m3;  // v1 decodes integer codes only
    if (p.stream_k) {
      // Programmatic dependent launch of the kernel and its stream-K fixup (sm90_wo_wgmma_ws.cu)
      // and the weight stages loaded before its dependency wait. H100, same-process A/B on the
      // nine layers, W4/W8 g128 f16, M = 8 ... 256 (bench/results/session16/call4: no PDL, PDL
      // with 0, 1, 2 and a ring of early stages):
      // - the weight-stream-bound launches (W8 up to M = 64 on 32 MiB and more, W4 up to M = 16
      //   on the two-CTA weights of 48 MiB and more) gain 2-5% with PDL and the whole ring loaded
      //   early (14336x21504 W4 M = 8 66.9 -> 64.7 us, W8 113.9 -> 111.6);
      // - elsewhere early stages cost the consumers the ring's fill (4096x4096 W4 M = 16 11.5 ->
      //   13.1 with the ring, 11.9 with one stage); PDL without them gains 1-5% at M > 64 on
      //   weights below 96 MiB (4096x6144 W8 M = 256 35.5 -> 33.5) and loses up to 8% at M = 32
      //   and 64 on the large W4 weights (28672x8192 M = 64 68.0 -> 73.3): off there.
      // The rule is within 2% of the best of the five variants on every row of that run.
      // MIXQ_WGMMA_PDL=0|1 forces PDL off or on (tuning knob, tests; read per call), MIXQ_WS_EARLY
      // the early stages (sm90_wo_wgmma_ws.cu).
      const int64_t mib = L.packed_bytes() >> 20;
      const bool stream_bound = M <= 64 && (L.bits == 8 ? mib >= 32 : M <= 16 && mib >= 48);
      const bool short_compute = M > 64 && mib < 96;
      const char* e = std::getenv("MIXQ_WGMMA_PDL");
      p.pdl = e && (e[0] == '0' || e[0] == '1') ? e[0] == '1' : stream_bound || short_compute;
      p.early_stages = p.pdl && stream_bound ? -1 : 0;
      p.chunks_per_split = chunks;
      p.partial_floats = size_t(ws_partial_floats(caps.sm_count, p.mt));
      p.tickets = size_t(ws_flags(caps.sm_count, p.mt));  // the inline reduction's flags
      return p;
    }
    const int64_t cap = int64_t(kMaxWgmmaPartialFloats / size_t(std::max<int64_t>(1, M * L.N)));
    const int max_splits = int(std::max<int64_t>(1, std::min<int64_t>(8, cap)));
    p.splits = choose_splits(int64_t(p.n_blocks) * p.m_blocks, caps.sm_count, chunks, max_splits);
    p.chunks_per_split = ceil_div(chunks, p.splits);
    p.splits = ceil_div(chunks, p.chunks_per_split);
    p.partial_floats = p.splits > 1 ? size_t(p.splits) * size_t(M) * size_t(L.N) : 0;
    return p;
  }
  if (!stream) {
    p.kernel = WoKernel::DequantCublas;
    const int64_t elem = x_f32 ? 4 : 2;
    size_t chunk_bytes = kDequantChunkBytes;
    if (const char* e = std::getenv("MIXQ_DEQUANT_CHUNK_MB"))  // tuning knob (benchmarks)
      if (std::atoi(e) >= 1 && std::atoi(e) <= 1024) chunk_bytes = size_t(std::atoi(e)) << 20;
    int64_t rows = int64_t(chunk_bytes / size_t(L.Kp * elem)) / kTileRows * kTileRows;
    rows = std::max<int64_t>(rows, kTileRows);
    p.chunk_rows = std::min<int64_t>(rows, L.Np);
    p.chunk_bytes = size_t(p.chunk_rows * L.Kp * elem);
    p.gather_bytes = gather ? size_t(M * L.K * x_bytes) : 0;
    p.out_bytes = y_direct ? 0 : size_t(M * L.N * 4);
    return p;
  }
  p.kernel = WoKernel::Stream;
  p.mt = M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : 64;
  p.m_blocks = ceil_div(M, p.mt);
  const int n_tiles = ceil_div(L.N, kTileRows);
  const int rt = wo_row_tiles(p.mt, L.bits, x_f32);
  p.n_blocks = ceil_div(n_tiles, kStreamWarpsPlan * rt);
  const int chunks = int(L.Kp / kChunkK);

  p.x_rows = int(std::min<int64_t>(p.mt, M));
  const int sx = x_f32 ? 2 : 1;
  auto smem_for = [&](int stage_chunks) {
    // activations (+ zero row; StreamSmem in kernels/sm80_wo_stream.cuh; the weights stream
    // through registers), hi and lo planes for f32 activations
    const int64_t kr = int64_t(stage_chunks) * kChunkK;
    return (size_t(p.x_rows) * size_t(kr + 8) + kChunkK + 8) * 2 * sx;
  };
  // Decode wants many blocks resident so that enough weight loads are in flight; mt <= 16 is
  // compiled for wo_stream_min_blocks() resident blocks (launch bounds), larger tiles are limited
  // by their registers (wo_stream_resident_blocks).
  int blocks_per_sm = wo_stream_resident_blocks(p.mt, L.bits);
  if (const char* e = std::getenv("MIXQ_STREAM_BLOCKS_PER_SM"))  // tuning knob (benchmarks)
    if (std::atoi(e) >= 1 && std::atoi(e) <= 16) blocks_per_sm = std::atoi(e);
  const size_t budget = std::min<size_t>(caps.smem_per_block_optin, (228 * 1024) / blocks_per_sm - 1024);

  // Split K so that all blocks are resident at once (one wave: a second, partial wave would
  // stream alone with too few loads in flight), as many as fit, each at least min_chunks long.
  int min_chunks = 4;
  if (const char* e = std::getenv("MIXQ_STREAM_MIN_CHUNKS"))  // tuning knob (benchmarks)
    if (std::atoi(e) >= 1 && std::atoi(e) <= 64) min_chunks = std::atoi(e);
  const int64_t base = int64_t(p.n_blocks) * p.m_blocks;
  const int64_t resident = int64_t(caps.sm_count) * blocks_per_sm;
  int splits = int(std::max<int64_t>(1, resident / base));
  splits = std::min(splits, std::max(1, chunks / min_chunks));
  auto set_splits = [&](int s) {
    p.chunks_per_split = ceil_div(chunks, s);
    p.splits = ceil_div(chunks, p.chunks_per_split);
  };
  set_splits(splits);
  // The splits' reduction. On sm_90 the splits of a tile can run as one thread-block cluster and
  // reduce through distributed shared memory: no partials, fence, ticket or last-block L2 round
  // trip (H100, M = 1-2: 4096x4096 W4 10.4 -> 9.9 us, 11.9 -> 10.1 at M = 2; session13/call2,
  // where this rule never lost). But clusters are
  // placed within one GPC: where the grid fills the GPU (8192x8192 W4: 32 clusters of 16 for 528
  // block slots) part of it waits for a second wave and the call is 25-42% slower
  // (bench/results/session13/call1). So a cluster only where every cluster of the grid fits at
  // once (caps.cluster_capacity) and without cutting the split count; MIXQ_STREAM_CLUSTER=0|1
  // (or knobs.cluster) forces global partials or clusters (at most kStreamMaxClusterSplits).
  int cluster_mode = -1;
  if (const char* e = std::getenv("MIXQ_STREAM_CLUSTER"))  // tuning knob (benchmarks, tests)
    if (e[0] == '0' || e[0] == '1') cluster_mode = e[0] - '0';
  if (knobs.cluster >= 0) cluster_mode = knobs.cluster > 0;
  bool cluster = false;
  if (caps.stream_clusters && p.splits > 1) {
    if (cluster_mode == 1) {
      cluster = true;
      set_splits(std::min(splits, kStreamMaxClusterSplits));
    } else if (cluster_mode < 0 && p.splits <= kStreamMaxClusterSplits) {
      const int b = std::min(blocks_per_sm, DeviceCaps::kMaxClusterBlocksPerSm);
      cluster = base <= caps.cluster_capacity[b][p.splits];
    }
  }
  if (!cluster) {
    const int64_t cap = int64_t(kMaxPartialFloats / size_t(std::max<int64_t>(1, M * L.N)));
    set_splits(int(std::max<int64_t>(1, std::min<int64_t>(p.splits, cap))));
  }
  p.cluster = cluster && p.splits > 1;
  // Programmatic dependent launch on the sm_90 image (the kernel waits for the previous grid only
  // after its first weight loads are in flight; the next grid may start once all of its blocks
  // run). H100, M = 1-2 (bench/results/session15/call5): 3-15% faster on every W4 layer
  // (4096x4096 9.1 -> 8.1 us) and on the W8 grids that fill the GPU or run short splits, but
  // 4-11% slower where a long-running grid leaves a fifth of the block slots free (W8 4096x28672,
  // 14336x21504, 8192x57344: the next grid's early blocks take those slots and stream alongside).
  // MIXQ_STREAM_PDL=0|1 (or knobs.pdl) forces it off or on.
  int pdl_mode = -1;
  if (const char* e = std::getenv("MIXQ_STREAM_PDL"))  // tuning knob (benchmarks, tests)
    if (e[0] == '0' || e[0] == '1') pdl_mode = e[0] - '0';
  if (knobs.pdl >= 0) pdl_mode = knobs.pdl;
  const bool fills = base * p.splits * 5 >= resident * 4;  // >= 80% of the block slots
  const bool short_split = p.chunks_per_split <= kStreamPdlMaxFreeChunks;
  p.pdl = caps.stream_clusters && (pdl_mode == 1 || (pdl_mode < 0 && (fills || short_split)));
  // Stage as much of the split's K range as fits the budget (ideally all of it: one barrier).
  int stage = 1;
  for (int s = p.chunks_per_split; s >= 1; --s) {
    if (smem_for(s) <= budget) { stage = s; break; }
  }
  p.chunks_per_stage = stage;
  p.smem_bytes = smem_for(stage);
  // after the K loop the same memory holds the block's output tile of the cluster reduction
  // ([x_rows][rows of the block] floats; StreamSmem in kernels/sm80_wo_stream.cuh)
  if (p.cluster)
    p.smem_bytes = std::max(p.smem_bytes, size_t(kStreamWarpsPlan) * rt * kTileRows * p.x_rows * 4);
  const bool global_partials = p.splits > 1 && !p.cluster;
  p.partial_floats = global_partials ? size_t(p.splits) * size_t(M) * size_t(L.N) : 0;
  p.tickets = global_partials ? size_t(base) : 0;
  return p;
}

size_t wo_workspace_bytes(const WoPlan& p) {
  return align256(p.partial_floats * 4) + align256(p.tickets * 4) + align256(p.chunk_bytes) +
         align256(p.gather_bytes) + align256(p.out_bytes);
}

}  // namespace mixq::cuda
