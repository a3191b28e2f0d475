// The weight-only plan: from the call (M, dtypes, alignment), the prepared weight's traits, the
// device's capabilities and the tuning, one pure function decides everything a launch needs —
// the kernel instantiation (KernelId) and its decomposition. Launchers (launch/) only execute it.
// Tested without a GPU (tests/unit/test_cuda_plan.cpp). The measurements behind every threshold:
// docs/decisions/wo-*.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/dispatch/device_caps.hpp"
#include "cuda/dispatch/kernel_id.hpp"
#include "cuda/kernels/common/sm90_pair_path.hpp"
#include "cuda/kernels/common/stream_k.hpp"
#include "cuda/kernels/common/wo_layout.hpp"
#include "cuda/kernels/wo/sm90_wo_ws_shape.hpp"
#include "mixq/tuning.hpp"

namespace mixq::cuda {

// What the planner knows of a prepared weight (backend/weight_only.cpp).
struct WoWeight {
  WoLayout L;
  int group_shift = 30;   // log2 of the group (30: one group per row)
  bool int_zero = false;  // o' = -zc s with zc an integer (symmetric, zero-point, e4m3)
  bool bf16_zero_pairs = false;  // the packed pairs of the bf16 integer-zero path were built
  bool gather = false;    // act-order: X is permuted (gathered) before the product
};

// One call: M rows of activations of type x (IoType: 0 f16, 1 bf16, 2 f32) into outputs of type y.
struct WoCall {
  int64_t M = 1;
  int x_type = 0, y_type = 0;
  bool x_aligned = true;  // 16-byte aligned activation rows (the wgmma kernel's TMA loads)
  bool y_tma = false;     // 16-bit output whose rows TMA can store (tma_stores_16bit_rows)
  // The convolution's implicit GEMM (conv weights: few output channels, so few 128-row weight
  // blocks): smaller token tiles while the tiles would fill fewer than a quarter of the SMs.
  bool fill_sms = false;
};

struct WoPlan {
  KernelId id;  // id.family: WoStream, WoWgmma or WoDequantCublas
  // streaming kernel: grid (n_blocks, splits, m_blocks) of 128 threads
  int x_rows = 1;             // activation rows staged per block, min(token tile, M)
  int m_blocks = 1, n_blocks = 1;
  int splits = 1, chunks_per_split = 1, chunks_per_stage = 1;
  bool cluster = false;       // the splits of a tile reduce inside a thread-block cluster
  bool pdl = false;           // programmatic dependent launch (streaming and wgmma kernels)
  size_t smem_bytes = 0;
  // wgmma kernel: the persistent grid's whole schedule (tiles, stream-K ranges, reduction,
  // TMA-store rounds, early stages, ring cap, raster group)
  StreamKSchedule sched;
  bool fixup = false;         // the stream-K fixup kernel sums the cut tiles after the grid
  // dequantize + cuBLAS
  int64_t chunk_rows = 0;     // rows of W dequantized per cuBLAS call
  // workspace parts (each 256-byte aligned, in this order)
  size_t partial_floats = 0;  // split-K / stream-K partial sums
  size_t tickets = 0;         // split-K tickets / stream-K flags (zero before a launch)
  size_t chunk_bytes = 0;     // the dequantized chunk of W
  size_t gather_bytes = 0;    // act-order: X permuted once; W4A8: X quantized (wo_a8_act_bytes)
  size_t out_bytes = 0;       // f32 staging of Y when cuBLAS cannot write its type
};

// Whether the launch reads its tickets, which must then be zero when it starts (a caller's
// workspace is cleared on the stream first; the weight's own are left zero by every launch). A
// plan owns tickets only where its launch reads them: the streaming kernel's split-K, the wgmma
// kernel's inline reduction of cut tiles. A memset is one more operation on the stream, ahead of
// a launch that at batch 1 takes a few microseconds.
inline bool wo_plan_reads_tickets(const WoPlan& p) { return p.tickets > 0; }

// force: "" (the measured rule) or a weight-only family name ("sm80_wo_stream", "sm90_wo_ws",
// "wo_dequant_cublas"); a family that cannot serve the call throws Unsupported naming why.
WoPlan plan_weight_only(const WoCall& call, const WoWeight& w, const DeviceCaps& caps,
                        const Tuning& tuning, const std::string& force);

// The plan's name: its instantiation's (KernelId::name), with ",ksplitS" before the closing '>'
// where the wgmma kernel splits each tile's K over a cluster of S CTAs (a schedule, not an
// instantiation: the same kernel).
std::string wo_plan_name(const WoPlan& p);

// Bytes of workspace a plan needs (its parts, 256-byte aligned, in WoPlan's order).
size_t wo_workspace_bytes(const WoPlan& p);
// Byte offsets of the parts after the partials: tickets, chunk, gather, staged output.
struct WoWorkspaceOffsets {
  size_t tickets, chunk, gather, out;
};
WoWorkspaceOffsets wo_workspace_offsets(const WoPlan& p);
// W4A8: the e4m3 codes of M x K activations and their block factors (launch/act_quant.hpp's
// layout: codes [M][act_row_pitch(K)], then factors [K blocks][act_meta_pitch(M)] float2,
// 256-aligned).
size_t wo_a8_act_bytes(int64_t M, int64_t K);
// ... where the factors start in that region (the codes' bytes, 256-aligned)
size_t wo_a8_factors_offset(int64_t M, int64_t K);

// An upper bound of wo_workspace_bytes over every plan with M <= max_m (any activation type, any
// forced family; outputs staged in f32 for cuBLAS only where staged_output), and of its tickets:
// what a prepared weight reserves for the calls that bring no workspace of their own. Derived from
// each kernel's sizing rule (the largest of the three kernels' totals), not by enumerating M.
struct WoWorkspaceBound {
  size_t bytes = 0;
  size_t tickets = 0;
};
WoWorkspaceBound wo_max_workspace(const WoWeight& w, const DeviceCaps& caps, const Tuning& tuning,
                                  int64_t max_m, bool staged_output);

// --- rules the planner applies (exposed for the tests and the grouped plan, moe_plan.cpp)
// 64-K chunks per stage of the wgmma kernel's shape at token tile mt.
int wgmma_chunks_per_stage(ws_detail::WsShape shape, int mt);
// Whether the wgmma kernel scales after the MMA (fold) for this weight, activation and pair path.
bool wgmma_fold(const WoWeight& w, int x_type, int mt, int cps, sm90::PairPath pp, const Tuning& t);
// W4A8: the zero point the activation factors carry (launch_quantize_fp8_w4a8's `zero`), or -1 to
// leave each row's to the fold (groups with different zero points, or Tuning::wo_a8_shared_zero Off).
int w4a8_factor_zero(const WoLayout& L, const Tuning& t);
// The wgmma kernel's pair path for activations of x_type (IoType) at token tile mt.
sm90::PairPath wgmma_pair_path(const WoWeight& w, int x_type, int mt, int cps, const Tuning& t);
// The wgmma kernel's K split over a thread-block cluster (StreamKSchedule::k_split) for tiles of
// `iterations` stages at token tile mt (with or without the fold), where the device runs clusters:
// the forced split (Tuning::wo_k_split), halved to the iterations there are, where the
// instantiation has it; else 1 (stream-K, the automatic choice).
int wgmma_k_split(int iterations, int mt, bool fold, bool clusters, const Tuning& t);
// Tokens a round of the wgmma kernel's TMA-store epilogue at token tile mt (a power of two that
// divides mt; 0: direct stores): by default 128 at tiles of 128 tokens and more (64 at 192), else
// 0; knob (Tuning::wo_y_rows) >= 0: 0, or the largest such power of two up to the knob, at least 16.
int wgmma_y_rounds(int mt, int knob);
// Ring depth of the wgmma kernel's instantiation (token tile, 4- or 8-bit layout, CTAs per SM)
// with p_stage bytes of pairs a stage and y_bytes per staging tile.
int wgmma_ring_stages(int mt, int bits, bool two_ctas, uint32_t p_stage, uint32_t y_bytes, int max_stages);

// Largest M the streaming kernel serves before dequantize + cuBLAS (no wgmma kernel), and before
// the Hopper wgmma kernel (it depends on the weight's size and tile count).
int64_t stream_max_m(bool x_f32);
int64_t stream_max_m_wgmma(const WoLayout& L, int sm_count);
// Splits of K that best fill `sm_count` single-CTA SMs with `tiles` output tiles.
int choose_splits(int64_t tiles, int sm_count, int chunks, int max_splits);

constexpr size_t kMaxPartialFloats = size_t(4) << 20;  // 16 MB split-K workspace at most
// Past this M, f32 or unaligned outputs go to dequantize + cuBLAS (16-bit outputs whose rows TMA
// can store stay on the wgmma kernel at every M); large GEMMs keep it up to kWgmmaBigMaxM.
constexpr int64_t kWgmmaMaxM = 2048;
constexpr int64_t kWgmmaBigMaxM = 4096;
// Rows of W dequantized per cuBLAS call: large chunks keep the GEMMs efficient.
constexpr size_t kDequantChunkBytes = size_t(256) << 20;
// The bytes of a chunk: Tuning::wo_dequant_chunk_mb where set, else kDequantChunkBytes.
inline size_t dequant_chunk_cap(const Tuning& t) {
  return t.wo_dequant_chunk_mb > 0 ? size_t(t.wo_dequant_chunk_mb) << 20 : kDequantChunkBytes;
}
// Rows of a chunk: the whole `granule`-row groups that `cap` bytes hold at `row_bytes` a row (at
// least one group, at most n). Whole groups keep every chunk's first output column 16-byte
// aligned: a chunk starting at an odd row sends cuBLAS to its unaligned kernels (GGUF 14336x21504
// at M = 512 on an H200: 3.4 ms in chunks of 4681 rows, 0.91-1.00 ms in chunks of 4608).
inline int64_t dequant_chunk_rows(int64_t n, size_t row_bytes, size_t cap, int64_t granule) {
  const int64_t rows = int64_t(cap / row_bytes) / granule * granule;
  return std::min(n, std::max(rows, granule));
}
// Programmatic dependent launch of the streaming kernel where its grid leaves block slots free
// only for splits up to this many chunks.
constexpr int kStreamPdlMaxFreeChunks = 16;

}  // namespace mixq::cuda
