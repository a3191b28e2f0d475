// Tuning: the knobs of the kernels' plans, as one typed value set through the API
// (PrepareOptions::tuning). Every field's default ("automatic") is the measured rule of the
// planner (src/cuda/dispatch/, src/cpu/kernel_policy.cpp, docs/decisions/); a field set to
// anything else overrides that one decision for every call on the prepared weight. Results agree
// within the documented tolerances whatever the knobs say; only speed changes (except
// cpu_activations, which chooses between two documented accuracy modes).
//
// From the command line (benchmarks, A/B runs): MIXQ_TUNE="key=value,key=value" is read once per
// process into default_tuning(), which is what a default-constructed PrepareOptions holds;
// `mixq bench --tune key=value,...` sets the same keys. Keys are the field names below;
// toggles take on / off / auto (or 1 / 0 / -1); cpu_activations takes auto / exact / int8.
#pragma once

#include <cstdint>
#include <string>

namespace mixq {

enum class Toggle : int8_t { Auto = -1, Off = 0, On = 1 };

struct Tuning {
  // --- weight-only, Hopper warp-specialized wgmma kernel
  int wo_token_tile = 0;       // 0: the plan's; else 16, 32, 64, 128 or 256 tokens per tile
  int wo_ctas_per_sm = 0;      // 0: the plan's; 1 or 2 CTAs per SM at token tiles of 16 and 32
  int wo_stage_k = 0;          // 0: the plan's; 64 or 128: K per ring stage at token tile 128
  int wo_max_stages = 0;       // 0: as deep a ring as shared memory holds; else a cap (>= 2)
  int wo_group_n = 0;          // 0: the plan's; N blocks per raster group
  int wo_early_stages = -2;    // -2: the plan's; -1 the whole ring, >= 0 that many weight
                               // stages loaded before waiting for the previous grid
  int wo_y_rows = -1;          // -1: the plan's; 0 direct stores; R: TMA-store rounds of R tokens
  enum class Schedule : int8_t { Auto, WholeTiles, StreamK };
  Schedule wo_schedule = Schedule::Auto;
  enum class Reduce : int8_t { Auto, Inline, Fixup };
  Reduce wo_reduce = Reduce::Auto;  // where the pieces of cut tiles are summed
  // 0 (the plan's) or 1: stream-K; 2, 4 or 8: each tile's K split over a thread-block cluster of
  // that many CTAs, the pieces summed in distributed shared memory (token tiles up to 32 and 64
  // without the fold, the plain GEMM and conv; a K of fewer iterations splits fewer ways)
  int wo_k_split = 0;
  Toggle wo_fold = Toggle::Auto;       // scale after the MMA where it applies (Off: never)
  Toggle wo_fold_half = Toggle::Auto;  // ... on the f16x2 path (int4, token tile 16)
  Toggle wo_bf16_zero = Toggle::Auto;  // bf16 integer-zero dequantization path
  Toggle wo_wgmma_pdl = Toggle::Auto;  // programmatic dependent launch of the wgmma kernel
  // W4A8: a zero point shared by every group of the weight goes into the activations' block
  // factors, so the fold adds it as it is (two FP32 instructions per sum instead of three; the
  // same bits); Off: each row's zero point is multiplied in by the fold
  Toggle wo_a8_shared_zero = Toggle::Auto;
  // the grouped wgmma kernel's 128-, 192- and 256-token tiles: a partly empty tile's MMAs cover
  // its rows rounded up to 64 tokens (192: 64 or 128; 128 and 256: 64 when it holds at most 64
  // rows); Off: all of the tile
  Toggle wo_ragged_tiles = Toggle::Auto;
  // --- weight-only, streaming kernel (few tokens) and dequantize + cuBLAS
  int wo_stream_blocks_per_sm = 0;   // 0: the kernel's residency; else 1..16
  int wo_stream_min_chunks = 0;      // 0: 4; shortest K split in 64-wide chunks (1..64)
  Toggle wo_stream_cluster = Toggle::Auto;  // splits reduced in a thread-block cluster
  Toggle wo_stream_pdl = Toggle::Auto;      // programmatic dependent launch
  int wo_dequant_chunk_mb = 0;       // 0: 256; MB of W dequantized per cuBLAS call (1..1024)
  // --- grouped (mixture-of-experts) weight-only GEMM on CUDA: docs/decisions/moe-stacked-experts.md
  // Rows per expert (of a uniform routing, or the masked buffer's max_tokens) from which the
  // Hopper wgmma kernel runs the experts instead of the streaming kernel; 0: the plan's.
  int moe_wgmma_min_rows = 0;
  // 0: the plan's; else tokens per tile: 16, 64, 128, 192 or 256 for the weight-only wgmma kernel;
  // for FP8 block and INT8 W8A8 experts 16, 32 or 64 (the few-token kernel's grouped form) or 128
  // (the block GEMM's)
  int moe_token_tile = 0;
  // FP8 block / INT8 W8A8 experts on the few-token form: K splits of a unit (1..8; 0: the plan's)
  int moe_block_splits = 0;
  // ... the tiles listed by the GEMM itself from the routing (up to 1024 experts) instead of the
  // schedule kernel; Off: the schedule kernel
  Toggle moe_own_schedule = Toggle::Auto;
  // the grouped wgmma and block GEMMs' work order: On an expert's token tiles innermost (the CTAs
  // running at once share its weight blocks), Off N blocks innermost; Auto: On for the block GEMM's
  // experts over a quarter of L2 (FP8 block / INT8 W8A8), Off for the weight-only kernel
  Toggle moe_expert_major = Toggle::Auto;
  // --- GGUF block weights (QuantizedWeight::ggml) on CUDA: docs/decisions/cuda-ggml-native.md
  // Auto / On: the native-width kernels of src/cuda/kernels/ggml/ (q8-quantized activations: the
  // dp4a GEMV up to cuda_ggml_q8_max_rows tokens; then with 16-bit X the few-token dequantizing
  // kernel up to cuda_ggml_stream_max_rows and the staged dequantizing f16/bf16 tensor-core kernel
  // up to cuda_ggml_hmma_max_rows, with f32 X the int8 tensor-core kernel up to
  // cuda_ggml_mma_max_rows (when set, it applies to 16-bit X too, ahead of the dequantizing one);
  // dequantize + cuBLAS above); Off: the canonical form's weight-only kernels (for A/B runs).
  Toggle cuda_ggml_native = Toggle::Auto;
  int cuda_ggml_q8_max_rows = 0;    // 0: the plan's (4; 3 for Q4_0 / Q4_1); else 1..16
  int cuda_ggml_mma_max_rows = 0;   // 0: the plan's (f32 X: 32; 16-bit X: none); else 1..2^30
  int cuda_ggml_hmma_max_rows = 0;  // 0: the plan's (4-bit types 128, others 96); else 1..2^30
  int cuda_ggml_stream_max_rows = 0;  // 16-bit X past the GEMV: 0 the plan's (8), -1 none, else 1..8
  // one token on the GEMV: Auto two rows a warp where a row a warp would spill a partial second
  // wave over the block slots and two fit in one; On / Off: always / never
  Toggle cuda_ggml_gemv_pairs = Toggle::Auto;
  // --- CUDA conv2d: an NCHW call on sm_90a runs the NHWC kernels between two transposes
  // (docs/decisions/conv-nchw-through-nhwc.md); Auto / On launch them with programmatic dependent
  // launch, each overlapping the previous kernel's tail; Off: plain launches (for A/B runs)
  Toggle conv_copies_pdl = Toggle::Auto;
  // --- W8A8 (FP8 block, INT8 per block)
  int w8a8_group_n = 0;                  // 0: the plan's; N tiles per raster group
  Toggle w8a8_y_tma = Toggle::Auto;      // TMA-store epilogue for 16-bit outputs
  Toggle w8a8_skinny_pdl = Toggle::Auto; // few-token kernels launched dependent on the quantizer
  // --- activation quantizers
  int act_quant_pieces = 0;        // 0: the plan's; 16-element pieces per lane (1 or 2)
  int act_quant_ctas_per_sm = 0;   // 0: as many as fit; else a cap (1..8)
  int act_quant_band = -1;         // -1: the plan's; log2 of the rows per band (0..3)
  // --- CPU backend
  // Weight-only: the accuracy mode of the activations (the one key here that
  // changes results, within the tolerance each mode documents; docs/cpu-backend.md).
  //   exact  X stays f32 (f32gemv / f32gemm): within 1e-5 of float64.
  //   int8   X quantized per segment (<= 256 columns) to int8 with scale + offset, integer dots
  //          (i8dot) for every M: ~5e-3 relative error from the activation rounding. Float
  //          codes (fp8, f16, bf16, f32) have no integer dots and stay exact.
  //   auto   int8 where the kernel set's measured threshold says it is faster (M up to
  //          cpu::auto_int8_max_rows: 8 on scalar, more on SIMD sets), exact above.
  // force_kernel (cpu_f32, cpu_i8dot) overrides it. conv2d always runs exact.
  enum class CpuActivations : int8_t { Auto, Exact, Int8 };
  CpuActivations cpu_activations = CpuActivations::Auto;
  // GGUF block weights (QuantizedWeight::ggml): Auto / On run the native-width kernels of
  // src/cpu/ggml/ (docs/cpu-backend.md), Off the canonical form's (for A/B runs).
  Toggle cpu_ggml_native = Toggle::Auto;
  // Native GGUF kernels at M <= 4: besides the L2 prefetch 16 KB ahead of the weight stream, a
  // software prefetch into L1 2 KB ahead. Auto: on for Intel cores (it helped there: Q8_0
  // 14336x4096 M = 4, 9.4 -> 8.2 ms); elsewhere on for the 32-element block types only (an AMD
  // EPYC ran Q8_0 10-20% faster with it, but the super-block types slower: Q6_K 4096x14336
  // M = 1, 3.9-4.0 ms with it, 2.0-2.3 without; docs/cpu-backend.md).
  Toggle cpu_l1_prefetch = Toggle::Auto;
  // Native GGUF kernels, one activation row, where the avx512 set was chosen: On runs the avx2
  // set's single-row tile instead (both halves of a 16-row panel in one pass), Off never. Auto:
  // on for Q4_0, Q4_K and Q6_K on non-Intel cores, where it was measured faster (AMD EPYC, 1
  // thread, M = 1: 1.12-1.32x, 1.05-1.11x and 1.13-1.18x; docs/cpu-backend.md).
  Toggle cpu_avx2_single_row = Toggle::Auto;
  // Native GGUF kernels, integer path: activation rows from which each K chunk of a panel is
  // decoded once per task into the prefill form (below: the register tiles unpack the codes
  // themselves, once per 4-row tile). 0: the plan's (33 on the avx512 set of non-Intel cores,
  // 17 on the avx2 and avx2vnni sets, else 5: past one register tile).
  int cpu_ggml_decode_min_rows = 0;

  // Parses "key=value,key=value" over `base`; throws mixq::Error (InvalidArgument) naming the
  // key or value that is wrong.
  static Tuning parse(const std::string& text);
  static Tuning parse(const std::string& text, const Tuning& base);
  // "key=value,..." of the fields that differ from the automatic defaults ("" when none).
  std::string to_string() const;
};

// The process default: MIXQ_TUNE parsed once (on first use); automatic when unset. A malformed
// MIXQ_TUNE throws mixq::Error from the first call that reads it.
const Tuning& default_tuning();

}  // namespace mixq
