// Dispatch for the weight-only CUDA path: which kernel runs a call with M rows, and how it is
// decomposed. Pure host functions of (M, layout, device properties), tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/wo_layout.hpp"

namespace mixq::cuda {

// What the planner needs to know about the GPU (read from cudaGetDeviceProperties).
struct DeviceCaps {
  int sm_count = 132;
  int cc_major = 9, cc_minor = 0;
  size_t smem_per_block_optin = 227 * 1024;
  size_t l2_bytes = 50u << 20;
  // the streaming kernel's loaded image can launch thread-block clusters and programmatic
  // dependent launches (sm_90 code on a 9.x device: wo_stream_clusters_available)
  bool stream_clusters = false;
  // cluster_capacity[b][s]: how many clusters of s blocks (128 threads) the GPU holds at once
  // when b such blocks fit an SM (cudaOccupancyMaxActiveClusters; 0: unknown). Clusters are
  // placed within one GPC, so near full occupancy fewer fit than SMs x b / s.
  static constexpr int kMaxClusterBlocksPerSm = 8;
  int cluster_capacity[kMaxClusterBlocksPerSm + 1][kStreamMaxClusterSplits + 1] = {};
};

enum class WoKernel { Stream, DequantCublas, Wgmma };
const char* wo_kernel_name(WoKernel k);

struct WoPlan {
  WoKernel kernel = WoKernel::Stream;
  // stream kernel
  int mt = 8;                 // tokens per block (8, 16, 32, 64)
  int x_rows = 1;             // activation rows staged per block, min(mt, M)
  int m_blocks = 1;
  int n_blocks = 1;
  int splits = 1;
  int chunks_per_split = 1;
  bool cluster = false;       // splits reduce inside a thread-block cluster (WoStreamParams::cluster)
  bool pdl = false;           // programmatic dependent launch (WoStreamParams::pdl)
  int early_stages = 0;       // wgmma: weight stages loaded before the dependency wait (-1: the ring)
  int chunks_per_stage = 1;
  size_t smem_bytes = 0;
  size_t partial_floats = 0;  // split-K workspace
  size_t tickets = 0;
  // dequantize + cuBLAS
  int64_t chunk_rows = 0;     // rows of W dequantized per cuBLAS call
  size_t chunk_bytes = 0;
  size_t gather_bytes = 0;    // act-order: X permuted once
  size_t out_bytes = 0;       // f32 staging of Y when cuBLAS cannot write its dtype directly
  // Hopper wgmma kernel: m_blocks x n_blocks (128 rows), token tile mt. stream_k: the
  // warp-specialized kernel (splits = 1; partial_floats / tickets are its stream-K slots and
  // tickets, wo_stream_k.hpp); otherwise the v1 kernel with splits and partial_floats.
  bool stream_k = false;
};

// Largest M the streaming kernel serves before dequantize+cuBLAS wins (measured: see
// docs/cuda-weight-only.md). Overridable with MIXQ_FORCE_KERNEL=stream|cublas.
int64_t stream_max_m(const DeviceCaps& caps, int bits, bool x_f32);
// ... where the Hopper wgmma kernel can take over (measured: it depends on the weight's size).
int64_t stream_max_m_wgmma(const WoLayout& L, int sm_count);

constexpr size_t kMaxPartialFloats = size_t(4) << 20;   // 16 MB split-K workspace at most
// Above, for f32 or unaligned outputs: dequantize + cuBLAS. Measured on H100 with the f32 output
// (bench/results/cuda_wo_wgmma_ws_k128.md, the kernel forced against the default on the nine
// layers, W4/W8 g128 f16): the warp-specialized kernel wins at M = 2048 on every layer
// (14336x21504 W4 1961 us against 2152), and at M = 4096 on weights with K >= 8192 and
// N * K >= 128M (28672x8192 W4 2820 against 3356; 14336x21504 3784 against 3878), losing 1-9% on
// the others (4096x6144 338 against 310). A 16-bit output goes through the kernel's TMA-store
// epilogue (session 24), which beats dequantize + cuBLAS by 4-45% on all nine layers at M = 1024,
// 2048 and 4096 (bench/results/session24/call2/ws_vs_dequant.txt): the wgmma kernel at every M.
constexpr int64_t kWgmmaMaxM = 2048;
constexpr int64_t kWgmmaBigMaxM = 4096;
constexpr size_t kMaxWgmmaPartialFloats = size_t(8) << 20;  // 32 MB for the wgmma kernel
// Rows of W dequantized per cuBLAS call: large chunks keep the GEMMs efficient (32 MB chunks cost
// ~20% at M = 4096 on 14336x21504); the buffer is per-device scratch shared by all weights.
constexpr size_t kDequantChunkBytes = size_t(256) << 20;

// The streaming kernel's split-K reduction: cluster < 0 is the planner's choice (or the
// environment's MIXQ_STREAM_CLUSTER=0|1), 0 global partials, 1 a cluster wherever the kernel image
// can launch one (forced). Prepare probes both so that its workspace and tickets serve either.
// Programmatic dependent launch of the streaming kernel where its grid leaves block slots free only
// for splits up to this many chunks (wo_plan.cpp).
constexpr int kStreamPdlMaxFreeChunks = 16;

// pdl < 0: programmatic dependent launch by the planner's rule wherever the image has it (or the environment's
// MIXQ_STREAM_PDL=0|1), 0 off, 1 on (where the image has it).
struct StreamKnobs {
  int cluster = -1;
  int pdl = -1;
};

// force: "" (automatic), "stream", "cublas" or "wgmma".
// y_direct: cuBLAS can write the output dtype itself (it equals the activation dtype, or is f32).
// wgmma_ok: the Hopper wgmma kernel can run this call (sm_90a binary on a 9.x device, 16-bit
// activations with 16-byte aligned rows); it then serves the M past the streaming kernel up to
// kWgmmaMaxM (kWgmmaBigMaxM on large GEMMs), and every M where y16.
// y16: the output is 16-bit with 16-byte aligned rows and N % 8 == 0 (the wgmma kernel's
// TMA-store epilogue runs: ws_y_rows).
WoPlan plan_weight_only(int64_t M, const WoLayout& L, int x_bytes, bool x_f32, bool gather,
                        bool y_direct, const DeviceCaps& caps, const std::string& force,
                        bool wgmma_ok = false, const StreamKnobs& knobs = {}, bool y16 = false);

// Splits of K that best fill `sm_count` single-CTA SMs with `tiles` output tiles (at most
// max_splits, at least 4 chunks per split): the wave-quantization efficiency is maximized.
int choose_splits(int64_t tiles, int sm_count, int chunks, int max_splits);

// Bytes of workspace a plan needs (partials, tickets, dequant chunk, gather), 256-aligned parts.
size_t wo_workspace_bytes(const WoPlan& p);

}  // namespace mixq::cuda
