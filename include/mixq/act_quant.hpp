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
//
// linear(xq, w, y): the product on activations already in this layout (written by these
// quantizers, or by the caller's own kernel fused into the producer of x), for a weight prepared
// with act = Int8Block or Fp8Block. linear(xq) gives the bits of linear(x) when xq holds
// x's quantization (every backend). Its rules, beyond linear()'s:
//   - xq.kind must be w.act(); xq.block the weight's act_block (INT8), 128 (FP8).
//   - Every buffer a quantizer accepts for M rows is accepted (M = q.shape[0], K = w.K()): the
//     shapes and strides above, all tensors on the weight's device. FP8 takes no offset / sums.
//     Columns K .. pitch-1 of q do not contribute (they may hold anything), nor do meta rows
//     M .. stride-1. The codes and meta are taken as given (the sums must be the codes' sums).
//   - CUDA: the GEMMs read q and the meta through TMA / 16-byte copies, so q's base and row
//     stride (bytes) must be multiples of 16, the meta bases 16-byte aligned and their row stride
//     a multiple of 4 elements (act_quant_meta_pitch(M) is one). Memory must exist for whole
//     [M][row pitch] code rows and [n_blocks][row stride] meta rows: the sm_80 INT8 kernels read
//     them in 16-byte chunks up to there (the values past K / M are not used).
//   - Workspace: linear_workspace_size(w, M) bytes are enough (the CUDA call needs only the
//     few-token kernels' stream-K partial sums and tickets, none for larger M; the CPU call its
//     staging). Its first linear_workspace_size(w, M) bytes must not overlap xq or y. With a null
//     workspace the prepared weight's own scratch is used (no concurrent calls on one weight).
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

// Quantized activations in the layout above (non-owning views).
struct QuantizedActivations {
  ActQuant kind = ActQuant::None;  // Int8Block or Fp8Block
  int64_t block = 0;               // K block: INT8 32, 64, 128 or 256; FP8 128
  TensorView q;                    // codes: i8 (INT8), f8e4m3 or u8 (FP8)
  TensorView scale;                // f32
  TensorView offset;               // INT8: f32; FP8: empty
  TensorView sums;                 // INT8: i32; FP8: empty

  static QuantizedActivations fp8_block(const TensorView& q, const TensorView& scale) {
    return {ActQuant::Fp8Block, 128, q, scale, {}, {}};
  }
  static QuantizedActivations int8_block(int64_t block, const TensorView& q,
                                         const TensorView& scale, const TensorView& offset,
                                         const TensorView& sums) {
    return {ActQuant::Int8Block, block, q, scale, offset, sums};
  }
};

// Y[M][N] = dequant(xq) . W^T, then the epilogue (see the rules above). y F32/F16/BF16 [M][N].
void linear(const QuantizedActivations& xq, const PreparedWeight& w, const TensorView& y,
            const Epilogue& ep = {}, const ExecContext& ctx = {});

}  // namespace mixq
