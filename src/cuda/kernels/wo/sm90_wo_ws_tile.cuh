// The warp-specialized Hopper weight-only kernel's tile (sm90_wo_wgmma_ws.cu): its shape per token
// tile, the shared-memory ring and staging layout (shared with the host, which sizes the launch
// and decides whether the TMA-store epilogue fits), and the epilogue's staging writes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cuda/kernels/common/dequant_codes.cuh"
#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/common/sm90_wgmma_dequant.cuh"
#include "cuda/kernels/common/wo_layout.hpp"
#include "cuda/kernels/common/wo_params.hpp"
#include "cuda/kernels/common/stream_k.hpp"
#include "cuda/kernels/wo/sm90_wo_ws_shape.hpp"

namespace mixq::cuda {

namespace ws_detail {

// The TMA-store epilogue's staging writes: a consumer thread's MT / 2 sums (accumulator 4q + e:
// weight row r (+8 for e >= 2), token 8q + 2 (lane % 4) + (e & 1)) plus the rows' bias, clamped
// and converted to Y, as the transposed 8x8 matrices of MT / 16 stmatrix.x4: matrix i of the q-th
// (q even) holds token block q + i / 2, rows 8 (i & 1) .. + 7. row_addr is where this lane's row
// of the first one goes; token block q + 2 is 16 token rows (2048 bytes) further.
// The staging tile holds y_rows tokens (a power of two, 16 ... MT): flush(t) is called when the
// tokens before t fill it, and returns once it may be rewritten.
template <typename Y, int MT, class Flush>
__device__ __forceinline__ void ws_stage_outputs(uint32_t row_addr, const float (&r)[MT / 2], float b0, float b8,
                                                 float lo, float hi, int y_rows, Flush&& flush) {
#pragma unroll
  for (int q = 0; q < MT / 8; q += 2) {
    if (q > 0 && ((8 * q) & (y_rows - 1)) == 0) flush(8 * q);
    uint32_t v[4];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const float* a4 = &r[4 * (q + u)];
      v[2 * u] = pack2<Y>(fminf(fmaxf(a4[0] + b0, lo), hi), fminf(fmaxf(a4[1] + b0, lo), hi));
      v[2 * u + 1] = pack2<Y>(fminf(fmaxf(a4[2] + b8, lo), hi), fminf(fmaxf(a4[3] + b8, lo), hi));
    }
    sm90::stmatrix_x4_trans(row_addr + uint32_t((8 * q) & (y_rows - 1)) * 128u, v[0], v[1], v[2], v[3]);
  }
}

}  // namespace ws_detail

}  // namespace mixq::cuda
