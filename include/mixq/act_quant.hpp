// Run-time activation quantizers writing into caller buffers, on the device the tensors live on
// (CUDA: enqueued on ctx.stream, no host sync, no allocation, graph capturable; CPU: computed
// with the host quantizers of mixq/quantize.hpp into the same layout).
//
// Layout (the one the W8A8 / FP8 GEMMs consume):
//   x       [M][K] f16, bf16 or f32, rows contiguous (any row stride >= K).
//   q       [M][K] or [M][act_quant_row_pitch(K)] codes (FP8: f8e4m3 or u8; INT8: i8), rows
//           contiguous with row stride >= act_quant_row_pitch(K). Columns K .. pitch-1 (inside
//           the row stride) are written as zero codes, whatever q's shape says.
//   scale, offset, sums
//           [n_blocks][M] or [n_blocks][act_quant_meta_pitch(M)] (f32, f32, i32), row stride
//           >= act_quant_meta_pitch(M): value(m, kb) at [kb * stride + m], i.e. M contiguous.
//           offset and sums must have scale's stride. Rows M .. stride-1 are not written.
// Math: exactly quantize_activations_fp8_block / quantize_activations_int8_block (the CUDA codes
// are bit-identical to the host ones). The CPU versions reject non-finite activations; the CUDA
// ones cannot throw from the device and give non-finite meta (INT8) or NaN codes (FP8) for them.
#pragma once

#include <cstdint>

#include "mixq/ops.hpp"
#include "mixq/tensor.hpp"

namespace mixq {

// Codes row pitch: K rounded up to 16 bytes (a TMA / 16-byte-load row stride).
int64_t act_quant_row_pitch(int64_t K);
// Meta row pitch: M rounded up to 4 elements (16 bytes).
int64_t act_quant_meta_pitch(int64_t M);

// Per-token 1x128 FP8 (DeepSeek-V3): scale [ceil(K/128)][M].
void quantize_activations_fp8_block(const TensorView& x, const TensorView& q,
                                    const TensorView& scale, const ExecContext& ctx = {});

// Per-block INT8 with offset and code sums (mission §2), block in {32, 64, 128, 256}:
// scale/offset/sums [ceil(K/block)][M].
void quantize_activations_int8_block(const TensorView& x, int64_t block, const TensorView& q,
                                     const TensorView& scale, const TensorView& offset,
                                     const TensorView& sums, const ExecContext& ctx = {});

}  // namespace mixq
