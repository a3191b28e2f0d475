// INT8 per-tensor conv2d (quantized CNN inference) as an implicit GEMM on mma.sync m16n8k32 s8.
//
// The structure of the weight-only kernel (sm80_conv_igemm.cuh): a 128-thread block computes a
// 64-pixel x 64-channel tile, one K step = one tap x 32 input channels, gathered from x into
// shared memory with every position bounds-checked; the weight slice is the repacked signed codes
// copied as they are (16 bytes per thread). One m16n8k32 MMA per (16-row, 8-column) fragment per
// step, int32 accumulators (exact). The epilogue is the linear INT8 per-tensor kernel's
// (sm80_int8_gemm.cuh): the reference's double-precision requantization, operation for operation.
#pragma once

#include <cstdint>

#include "cuda/kernels/conv/conv_params.hpp"
#include "cuda/kernels/conv/sm80_conv_igemm.cuh"
#include "cuda/kernels/common/int8_requant.cuh"
#include "cuda/kernels/w8a8/sm80_int8_gemm.cuh"

namespace mixq::cuda::conv {

// Row pitch in bytes: 32 + 16, so a warp's fragment reads (rows g, words t) fall on banks
// 12 g + t mod 32, all distinct; a multiple of 16 keeps the 16-byte weight stores aligned.
constexpr int kPitchI8 = kConvBK + 16;

__global__ void __launch_bounds__(kConvThreads) conv_igemm_i8_kernel(const ConvI8Params p) {
  __shared__ __align__(16) int8_t As[kConvBM * kPitchI8];
  __shared__ __align__(16) int8_t Bs[kConvBN * kPitchI8];
  __shared__ int pix_b[kConvBM], pix_ih[kConvBM], pix_iw[kConvBM];

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t M = int64_t(p.B) * p.Ho * p.Wo;
  const int64_t m0 = int64_t(blockIdx.x) * kConvBM;
  const int n0 = blockIdx.y * kConvBN;
  const int64_t hw = int64_t(p.Ho) * p.Wo;

  if (tid < kConvBM) {
    const int64_t m = m0 + tid;
    if (m < M) {
      const int r = int(m % hw);
      pix_b[tid] = int(m / hw);
      pix_ih[tid] = (r / p.Wo) * p.stride_h - p.pad_h;
      pix_iw[tid] = (r % p.Wo) * p.stride_w - p.pad_w;
    } else {
      pix_b[tid] = -1;
      pix_ih[tid] = 0;
      pix_iw[tid] = 0;
    }
  }
  __syncthreads();

  int32_t acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0;

  const int wm = warp / 2, wn = warp % 2;
  const int g = lane / 4, t4 = lane % 4;
  const int64_t plane = int64_t(p.H) * p.W;
  const int taps = p.Kh * p.Kw;
  const int b_row = tid / 2, b_half = tid % 2;
  const int bn = n0 + b_row;
  const int8_t zero_code = int8_t(p.in_zero);

  for (int tap = 0; tap < taps; ++tap) {
    const int kh = tap / p.Kw, kw = tap % p.Kw;
    const int dh = kh * p.dil_h, dw = kw * p.dil_w;
    for (int c0 = 0; c0 < p.Ci; c0 += kConvBK) {
      // activation slice: real channels read x inside the image and Z_I (the real value 0) in the
      // padding; channels past Ci and pixels past M read 0 (zero weights / not stored)
      if (p.vec_x) {
        // one 16-channel run per thread (2 per pixel); Ci % 16 == 0, so a run starting below Ci
        // ends at or below it
        const int r = tid / 2, q = tid % 2;
        const int ci = c0 + 16 * q;
        const int b = pix_b[r];
        const int ih = pix_ih[r] + dh, iw = pix_iw[r] + dw;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (b >= 0 && ci < p.Ci) {
          if (ih >= 0 && ih < p.H && iw >= 0 && iw < p.W) {
            v = *reinterpret_cast<const uint4*>(p.x + ((int64_t(b) * p.H + ih) * p.W + iw) * p.Ci + ci);
          } else {
            const uint32_t z4 = uint32_t(uint8_t(zero_code)) * 0x01010101u;
            v = make_uint4(z4, z4, z4, z4);
          }
        }
        *reinterpret_cast<uint4*>(As + r * kPitchI8 + 16 * q) = v;  // 16-byte aligned: pitch 48 B
      }
#pragma unroll 4
      for (int i = 0; i < 16 && !p.vec_x; ++i) {
        int r, j;
        if (p.nchw) {
          r = tid % 64;
          j = tid / 64 + 2 * i;
        } else {
          r = tid / 32 + 4 * i;
          j = tid % 32;
        }
        const int ci = c0 + j;
        const int b = pix_b[r];
        const int ih = pix_ih[r] + dh, iw = pix_iw[r] + dw;
        int8_t v = 0;
        if (b >= 0 && ci < p.Ci) {
          if (ih >= 0 && ih < p.H && iw >= 0 && iw < p.W) {
            const int64_t idx = p.nchw ? (int64_t(b) * p.Ci + ci) * plane + int64_t(ih) * p.W + iw
                                       : ((int64_t(b) * p.H + ih) * p.W + iw) * p.Ci + ci;
            v = p.x[idx];
          } else {
            v = zero_code;
          }
        }
        As[r * kPitchI8 + j] = v;
      }
      // weight slice: 16 signed codes per thread, one aligned 16-byte load and store
      {
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (bn < p.Co)
          v = *reinterpret_cast<const uint4*>(p.codes + int64_t(bn) * p.row_bytes +
                                              int64_t(tap) * p.Cip + c0 + 16 * b_half);
        *reinterpret_cast<uint4*>(Bs + b_row * kPitchI8 + 16 * b_half) = v;
      }
      __syncthreads();
      uint32_t a[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const int8_t* base = As + (wm * 32 + mi * 16 + g) * kPitchI8 + 4 * t4;
        a[mi][0] = ld32(base);
        a[mi][1] = ld32(base + 8 * kPitchI8);
        a[mi][2] = ld32(base + 16);
        a[mi][3] = ld32(base + 8 * kPitchI8 + 16);
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int8_t* base = Bs + (wn * 32 + ni * 8 + g) * kPitchI8 + 4 * t4;
        const uint32_t b0 = ld32(base), b1 = ld32(base + 16);
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) int8k::mma_s8(acc[mi][ni], a[mi], b0, b1);
      }
      __syncthreads();
    }
  }

  const RequantOut out(p.clamp_lo, p.clamp_hi, p.out_scale, p.out_zero, p.y_i8);
#pragma unroll
  for (int ni = 0; ni < 4; ++ni)
#pragma unroll
    for (int e01 = 0; e01 < 2; ++e01) {
      const int n = n0 + wn * 32 + ni * 8 + 2 * t4 + e01;
      if (n >= p.Co) continue;
      // wraps like the accumulator: exact mod 2^32
      const uint32_t zsum = uint32_t(p.in_zero) * uint32_t(p.wsum[n]);
      const RequantOut::Column col =
          out.column(p.wscale[n], p.bias ? double(load_io(p.bias, p.bias_type, n)) : 0.0);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t m = m0 + wm * 32 + mi * 16 + g + 8 * h;
          if (m >= M) continue;
          const int32_t a32 = int32_t(uint32_t(acc[mi][ni][2 * h + e01]) - zsum);
          const int64_t yi = p.nchw ? ((m / hw) * p.Co + n) * hw + m % hw : m * p.Co + n;
          out.store(p.y, yi, a32, col);
        }
    }
}

}  // namespace mixq::cuda::conv
