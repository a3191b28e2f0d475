// Internal: run the GEMM of a CUDA int8-block prepared weight on activations that are already
// quantized in the act_quant.hpp layout (tests compare the GEMM alone against the reference on
// host-quantized activations; the benchmark times the GEMM without the quantizer).
#pragma once

#include <cstdint>

#include "mixq/ops.hpp"

namespace mixq::cuda {

struct Int8QuantizedActs {
  int64_t M = 0;
  const int8_t* q = nullptr;  // [M][ldq], ldq = act_row_pitch(K)
  int64_t ldq = 0;
  const float* scale = nullptr;   // [n_blocks][ld_meta]
  const float* offset = nullptr;
  const int32_t* sums = nullptr;
  int64_t ld_meta = 0;            // >= M, a multiple of 4 (act_meta_pitch)
};

void int8_block_gemm_prequantized(const PreparedWeight& w, const Int8QuantizedActs& a,
                                  const TensorView& y, const Epilogue& ep, void* stream);

}  // namespace mixq::cuda
