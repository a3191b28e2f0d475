// Where the Hopper block GEMM's quantizing epilogue (epilogue_quant.cuh) writes: the host
// launchers fill it, the kernel reads it from its parameters.
#pragma once

#include <cstdint>

#include "mixq/error.hpp"

namespace mixq::cuda::sm90 {

// Where a quantizing epilogue writes (BlockGemmParams::quant): codes [M][ld_q] (ld_q a multiple
// of 16 bytes), meta value(m, b) at [b * ld_meta + m]. kind 0: none (y is written); 1: FP8 1x128
// (scale only); 2: INT8 per block of `block` columns (scale, offset, sums).
struct QuantOut {
  int kind = 0;
  int block = 0;
  int pitch = 0;  // act_quant_row_pitch(N): columns N .. pitch - 1 get zero codes
  uint8_t* q = nullptr;
  int64_t ld_q = 0;
  float* scale = nullptr;
  float* offset = nullptr;
  int* sums = nullptr;
  int64_t ld_meta = 0;
};

// Throws InvalidArgument unless q describes a quantized output of M x N (or is kind 0):
// INT8 blocks of 32, 64 or 128 (whole blocks in a 128-wide tile), pitch = N rounded up to 16,
// code rows a multiple of 16 bytes apart from a 16-byte aligned base (a TMA store's map), meta
// rows of at least M.
inline void check_quant_out(const QuantOut& q, int64_t M, int64_t N, const char* op) {
  if (q.kind == 0) return;
  MIXQ_CHECK_ARG(q.kind == 1 || (q.kind == 2 && (q.block == 32 || q.block == 64 || q.block == 128)),
                 op, ": quantized output kind ", q.kind, " block ", q.block,
                 " (FP8 1x128, or INT8 blocks of 32, 64, 128)");
  MIXQ_CHECK_ARG(q.pitch == (N + 15) / 16 * 16 && q.ld_q >= q.pitch && q.ld_q % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(q.q) % 16 == 0 &&
                     q.ld_meta >= M && q.q != nullptr && q.scale != nullptr &&
                     (q.kind == 1 || (q.offset != nullptr && q.sums != nullptr)),
                 op, ": quantized output of ", M, " x ", N, ": pitch ", q.pitch, ", ld_q ", q.ld_q,
                 ", ld_meta ", q.ld_meta, " or a null buffer");
}

}  // namespace mixq::cuda::sm90
