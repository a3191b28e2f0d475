// Host entry points of the native GGUF kernels (src/cuda/kernels/ggml/): plain C++ declarations
// for the backend (src/cuda/backend/ggml_native.cpp) and the tests.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/ggml/ggml_gpu_format.hpp"

namespace mixq::cuda::ggml {

// Largest M of the q8 GEMV (its widest token instance).
constexpr int kGemvMaxRows = 16;

// The token instance (MR) that a call of M rows (1..kGemvMaxRows) runs.
int gemv_token_tile(int M);

// The tensor-core kernel's plan for M tokens: n8 token groups per CTA (1, 2, 4 or 8: up to 8, 16,
// 32, 64 tokens; more tokens take more CTAs) and the K split, in whole steps of the type's
// mma_step_chunks, that gives the grid about four 64-row CTAs per SM with at least three steps
// each (the ring's depth).
int mma_token_tiles(int M);
struct MmaSplit {
  int splits = 1;
  int64_t split_chunks = 0;
};
MmaSplit mma_split(GType t, int M, int64_t N, int64_t K, int sm_count);

// The dequantizing tensor-core kernel's plan for M tokens of 16-bit X: its token tile (32 or 64
// tokens a CTA) and the K split, in whole 256-column steps, that fills the SMs' CTA slots with
// the fewest waves (each split at least three steps, the ring's depth).
struct HmmaPlan {
  int token_tile = 64;
  int splits = 1;
  int64_t split_chunks = 0;
};
HmmaPlan hmma_plan(GType t, int M, int64_t N, int64_t K, int sm_count);
// The few-token kernel (ggml_stream.cuh, 16-bit X, 1 to kStreamMaxRows tokens): the K split,
// in whole groups of four chunks, that best fills the SMs' CTA slots (one 16-row tile a CTA, its K
// range over four warps; each warp at least two groups a split).
constexpr int kStreamMaxRows = 8;
struct StreamPlan {
  int splits = 1;
  int64_t split_chunks = 0;
};
StreamPlan stream_plan(GType t, int64_t N, int64_t K, int sm_count);
// Dynamic shared memory of the kernel's token tile (16, 32 or 64) for type t: up to 160 KB, more
// than some devices give a block.
int hmma_smem_bytes(GType t, int token_tile);

// Bytes of the q8 activations of M tokens (GQ8: codes, then meta at q8_meta_offset(M, K)).
size_t q8_bytes(int64_t M, int64_t K);
size_t q8_meta_offset(int64_t M, int64_t K);

// X [M][K] (x_type 0 f16, 1 bf16, 2 f32; row stride ldx elements) -> out (GQ8); pdl: launched
// dependent on the stream's previous kernel (sm_90), which it waits for before reading X.
void launch_quantize_x(const void* x, int x_type, int64_t ldx, int M, int64_t K, const GQ8& out,
                       int sm_count, bool pdl, cudaStream_t stream);
// Y = X Wᵀ on the integer path, 1 <= p.M <= kGemvMaxRows; p.pdl: launched dependent on the
// quantizer just before it on the stream; sm_count: the device's SMs (one token's rows per warp).
void launch_q8_gemv(GType t, const GemvParams& p, int sm_count, cudaStream_t stream);
// Y = X Wᵀ on the tensor cores (p.splits, p.split_chunks from mma_split; with splits > 1,
// p.partial holds splits * M * N floats and a finalize pass, PDL-chained, writes y).
void launch_q8_mma(GType t, const MmaParams& p, cudaStream_t stream);
// Y = X Wᵀ with X itself (p.x, x_type 0 f16 / 1 bf16) on f16 / bf16 tensor cores, the weights
// decoded as the dequantizer decodes them (p.splits, p.split_chunks from hmma_plan; with
// splits > 1, p.partial holds splits * M * N floats and a finalize pass writes y).
void launch_hmma(GType t, const HmmaParams& p, int x_type, cudaStream_t stream);
// The same product on the few-token kernel, 1 <= p.M <= kStreamMaxRows (p.splits, p.split_chunks
// from stream_plan; with splits > 1, p.partial holds splits * M * N floats and a finalize pass
// writes y); p.pdl: launched dependent on the stream's previous kernel (sm_90).
void launch_stream(GType t, const HmmaParams& p, int x_type, cudaStream_t stream);
// Rows [n0, n0 + rows) of W -> out [rows][ld] (out_type 0 f16, 1 bf16, 2 f32; ld a multiple of 8
// elements, out 16-byte aligned).
void launch_dequant(GType t, const GPlanes& w, int64_t n0, int64_t rows, int64_t K, int out_type,
                    void* out, int64_t ld, int sm_count, cudaStream_t stream);

}  // namespace mixq::cuda::ggml
