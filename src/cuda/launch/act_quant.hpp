// Host-side entry points of the run-time activation quantizers (CUDA), and the memory layout
// the GEMMs consume. Fixed here so that the quantizers and the GEMMs agree:
//
//   q      [M][ldq] codes, ldq = act_row_pitch(K) (a multiple of 16 bytes, as TMA needs for a
//          row stride); columns K..ldq-1 are written as zero codes.
//   meta   per (row, K block) values stored block-major, M contiguous: value(m, kb) at
//          [kb * ld_meta + m], ld_meta = act_meta_pitch(M) (a multiple of 4, i.e. 16 bytes,
//          so a TMA box or a 16-byte load covers consecutive rows of one block).
//
// FP8 (DeepSeek-V3 1x128):  s = max(amax, 1e-10) / 448, q = e4m3(x / s) (RNE, saturating);
//                            meta = s (float). Same math as quantize_activations_fp8_block.
// INT8 block (mission §2):  sx = (max - min) / 255, ox = min + 128 sx,
//                            q = clamp(round((x - ox) / sx), -128, 127), sum = sum of q;
//                            meta = sx, ox (float), sum (int32). Same math as
//                            quantize_activations_int8_block (a constant block: sx = 0, ox = x).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mixq::cuda {

inline int64_t act_row_pitch(int64_t K) { return (K + 15) / 16 * 16; }

// Words a quantizer zeroes after its wait for the previous grid (its dependent GEMM's tickets in a
// caller's workspace), so that no memset precedes it.
struct ActQuantClear {
  unsigned* words = nullptr;
  int64_t count = 0;  // < 2^31
};

// The quantizers' knobs (Tuning::act_quant_*): pieces of 16 elements per lane (0: the default),
// a cap on resident CTAs per SM (0: as many as fit), log2 of the rows per band (-1: the default).
struct ActQuantTuning {
  int pieces = 0;
  int ctas_per_sm = 0;
  int band = -1;
};
inline int64_t act_meta_pitch(int64_t M) { return (M + 3) / 4 * 4; }

// x: [M][K] with row stride ldx (elements); x_type: 0 f16, 1 bf16, 2 f32 (IoType ints).
// pdl: a programmatic dependent launch (kernels/grid_dependency.cuh): it may start while the
// previous kernel of the stream runs and waits for it before it reads or writes anything; it lets
// the next dependent launch (a decode GEMM's early weight loads) start at once.
void launch_quantize_fp8_1x128(const void* x, int x_type, int64_t ldx, int64_t M, int64_t K,
                               uint8_t* q, int64_t ldq, float* scale, int64_t ld_meta,
                               cudaStream_t stream, bool pdl = false, const ActQuantTuning& tune = {},
                               const ActQuantClear& clear = {});

// W4A8 (4-bit weights x these e4m3 codes, kernels/wo/sm90_wo_ws.cuh): the same codes, and instead
// of the scales the two factors of each (row, block), float2 at [kb * ld_meta + m]:
// (512 s, -zero * (s * sum of the block's e4m3 values)). The weight kernel's MMA sums carry the
// 4-bit codes as u * 2^-9 and the fold takes the zero point off as zc times the block's sum: zero = 1
// leaves zc to the fold (weights whose groups have their own zero points); the zero point that
// every group of the weight shares (0 ... 15) puts it in the factor, and the fold adds it as it is.
// The sum is exact (a sum of e4m3 values in units of 2^-9, in integers), so it does not depend on
// the split.
void launch_quantize_fp8_w4a8(const void* x, int x_type, int64_t ldx, int64_t M, int64_t K, uint8_t* q,
                              int64_t ldq, float* factors, int64_t ld_meta, float zero, cudaStream_t stream,
                              const ActQuantTuning& tune = {});
// The factors of codes quantized elsewhere (q [M][ldq] e4m3, scale at [kb * ld_scale + m]).
void launch_w4a8_factors(const uint8_t* q, int64_t ldq, const float* scale, int64_t ld_scale, int64_t M, int64_t K,
                         float* factors, int64_t ld_meta, float zero, cudaStream_t stream);

// block: 32, 64, 128 or 256 (the GEMMs use 64 and 128).
void launch_quantize_int8_block(const void* x, int x_type, int64_t ldx, int64_t M, int64_t K,
                                int64_t block, int8_t* q, int64_t ldq, float* scale,
                                float* offset, int32_t* sums, int64_t ld_meta,
                                cudaStream_t stream, bool pdl = false, const ActQuantTuning& tune = {},
                                const ActQuantClear& clear = {});

}  // namespace mixq::cuda
