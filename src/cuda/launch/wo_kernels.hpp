// Host-side entry points of the weight-only CUDA kernels (plain C++ declarations, so the backend
// and the tests can be compiled by the host compiler).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/dispatch/wo_plan.hpp"
#include "cuda/kernels/common/wo_layout.hpp"
#include "cuda/kernels/common/wo_params.hpp"

namespace mixq::cuda {

constexpr int kStreamWarps = 4;
// Runs plan (family WoStream): grid (n_blocks, splits, m_blocks) of kStreamWarps * 32 threads,
// the instantiation of plan.id (activation type, token tile, code kind, fine groups).
void launch_wo_stream(const WoStreamParams& p, const WoPlan& plan, cudaStream_t stream);
// Whether the streaming kernel's image that runs on `device` can reduce its splits in a
// thread-block cluster (WoStreamParams::cluster): sm_90 code on a 9.x device.
bool wo_stream_clusters_available(int device);

// GPU repack: canonical row-major codes ([N][row_bytes], I4/U4 packed two per byte, I8/U8/E4M3
// one per byte) -> the fragment-ordered layout of wo_layout.hpp, converting signed codes to
// unsigned (e4m3 bytes are copied as they are: signed_codes = false).
void launch_wo_repack(const uint8_t* canonical, int64_t row_bytes, bool signed_codes,
                      const WoLayout& layout, uint32_t* packed, cudaStream_t stream);

// Dequantize rows [n0, n0 + rows) of the packed weight into a row-major 16-bit (f16 or bf16) or
// f32 matrix with leading dimension ld (>= Kp); columns K..Kp-1 are written as zeros. e4m3
// layouts (layout.e4m3) decode the bytes as e4m3 values. pairs: row-major (s, o'); pairs_stream:
// the same in lane order (stream_pair_index), which the 16-bit outputs read. sm_count: the
// device's SMs (DeviceCaps; sizes the 16-bit kernel's grid).
void launch_wo_dequant(const uint32_t* packed, const void* pairs, const void* pairs_stream,
                       const WoLayout& layout, int64_t n0, int64_t rows,
                       int out_type /*0 f16, 1 bf16, 2 f32*/, void* out, int64_t ld, int sm_count,
                       cudaStream_t stream);

// dst[m][n] = clamp(src[m][n] + bias[n]) (after cuBLAS; in place when src == dst), with the
// conversion between element types (IoType ints).
void launch_epilogue(const void* src, int64_t lds, int src_type, void* dst, int64_t ldd,
                     int dst_type, int64_t M, int64_t N, const void* bias, int bias_type, float lo,
                     float hi, cudaStream_t stream);

// x_out[m][j] = x[m][perm[j]] (act-order gather before cuBLAS), same element type (2 or 4 bytes).
void launch_gather_columns(const void* x, int64_t ldx, int elem_bytes, const int32_t* perm,
                           int64_t M, int64_t K, void* out, int64_t ldo, cudaStream_t stream);

}  // namespace mixq::cuda
