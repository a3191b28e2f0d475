// Run-time activation quantizers and the layout helpers of QuantizedActivations (mixq/ops.hpp,
// which also declares linear(const QuantizedActivations&, ...)).
//
// Two ways to quantize, one result type:
//   - into caller buffers, on the device the tensors live on (CUDA: enqueued on ctx.stream, no
//     host sync, no allocation, graph capturable; CPU: computed by the host quantizers below and
//     copied into the caller's layout);
//   - on the host, into a QuantizedActivationsBuffer that owns memory in the same layout and
//     hands it out as a QuantizedActivations view.
//
// The caller-buffer quantizers take x [M][K] f16, bf16 or f32, rows contiguous (any row stride
// >= K), and accept every q / scale / offset / sums that QuantizedActivations' layout allows
// (mixq/ops.hpp), on x's device. They write columns K .. act_quant_row_pitch(K)-1 of q (inside
// the row stride) as zero codes, whatever q's shape says, and leave meta rows M .. stride-1
// unwritten.
// Math: the caller-buffer quantizers compute exactly what the host ones do (the CUDA codes are
// bit-identical to the host ones). The CPU versions reject non-finite activations; the CUDA
// ones cannot throw from the device and give non-finite meta (INT8) or NaN codes (FP8) for them.
#pragma once

#include <cstdint>
#include <vector>

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

// Host storage for one QuantizedActivations: what the host quantizers below return. It is not a
// second representation of quantized activations, only the memory behind the one view type,
// laid out exactly as QuantizedActivations describes with the tightest pitches:
//   q       [M][row_pitch] code bytes (INT8: i8 bit patterns; FP8: e4m3), zero past column K;
//   scale, offset, sums
//           [n_blocks][meta_pitch], value(m, kb) at [kb * meta_pitch + m], zero past row M
//           (offset and sums empty for FP8).
// view() hands it to linear() and the reference kernels (it stays valid while the buffer lives
// and is not resized); the accessors read single values in the same layout.
struct QuantizedActivationsBuffer {
  ActQuant kind = ActQuant::None;  // Int8Block or Fp8Block
  int64_t M = 0, K = 0;
  int64_t block = 0;       // K block (FP8: QuantizedActivations::kFp8Block)
  int64_t row_pitch = 0;   // act_quant_row_pitch(K): bytes between code rows
  int64_t meta_pitch = 0;  // act_quant_meta_pitch(M): elements between meta rows
  std::vector<uint8_t> q;
  std::vector<float> scale;
  std::vector<float> offset;
  std::vector<int32_t> sums;

  int64_t n_blocks() const { return block > 0 ? (K + block - 1) / block : 0; }
  // q [M][K] (row stride row_pitch), meta [n_blocks][M] (row stride meta_pitch), on the CPU.
  QuantizedActivations view() const;

  uint8_t code(int64_t m, int64_t k) const { return q[size_t(m * row_pitch + k)]; }
  int8_t int8_code(int64_t m, int64_t k) const { return static_cast<int8_t>(code(m, k)); }
  float scale_of(int64_t m, int64_t kb) const { return scale[size_t(kb * meta_pitch + m)]; }
  float offset_of(int64_t m, int64_t kb) const { return offset[size_t(kb * meta_pitch + m)]; }
  int32_t sum_of(int64_t m, int64_t kb) const { return sums[size_t(kb * meta_pitch + m)]; }
};

// Host per-block INT8 quantization of an [M][K] F32/F16/BF16 CPU matrix (W8A8, mission.md §2),
// any block >= 1. Per row and block of `block` columns: scale = (max - min) / 255, offset =
// min + 128 scale (both f32), code = int8_act_code(x, offset, 1 / scale) (mixq/numeric.hpp: an
// f32 quotient, clamped, rounded half to even; every backend produces these codes bit for bit),
// so x ~= code * scale + offset; sums = the block's code sum (what the four-term formula needs).
// A constant block gets scale 0, offset x and codes 0; non-finite input is an error.
QuantizedActivationsBuffer quantize_activations_int8_block(const TensorView& x, int64_t block);

// Host per-token 1x128 FP8 quantization (DeepSeek-V3): amax over each row's 128-element group
// (floored at 1e-10 so that zero groups stay finite), scale = amax / 448, code = e4m3(x / scale)
// (RNE, saturating).
QuantizedActivationsBuffer quantize_activations_fp8_block(const TensorView& x);

}  // namespace mixq
