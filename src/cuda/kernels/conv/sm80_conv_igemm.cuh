// Weight-only conv2d as an implicit GEMM on mma.sync m16n8k16 (sm_80 and later).
//
// One thread block computes a [kConvBM pixels] x [kConvBN output channels] tile of y. Per K step
// (one tap, kConvBK input channels) it
//   1. gathers the activation slice A[64][32] from x (bounds-checked: padding rows/columns, pixels
//      past M and channels past Ci read as 0) and converts it to the MMA operand type;
//   2. dequantizes the weight slice B[64][32] = s * u + o' from the repacked codes in f32 and
//      rounds it once to the operand type;
//   3. runs 2 (k16) x 2 (m16) x 4 (n8) MMAs per warp from shared memory.
// Barriers separate the writes of a step from the previous step's reads and from its own reads;
// the global loads of the next step are issued before the MMAs of the current one (registers).
//
// The dequantized weight is rounded to the operand type before the MMA (unlike the linear kernels,
// which multiply exact integer codes and scale in f32), so each product carries one extra rounding
// of 2^-11 (f16) / 2^-8 (bf16) relative; f32 activations avoid it with the three-product bf16
// split (x_hi w_hi + x_hi w_lo + x_lo w_hi, ~2^-16 relative), at three MMAs per fragment.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/common/mma_sm80.cuh"
#include "cuda/kernels/conv/conv_params.hpp"

namespace mixq::cuda::conv {

// Shared-memory row pitch in 16-bit elements: 32 + 8 pads each row by 16 bytes, so the fragment
// reads (8 rows x 4 words per warp) hit 32 distinct banks (row r starts at bank 20 r mod 32).
constexpr int kPitch = kConvBK + 8;

__device__ __forceinline__ float load_io(const void* p, IoType t, int64_t i) {
  switch (t) {
    case IoType::F16: return __half2float(static_cast<const half*>(p)[i]);
    case IoType::BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_io(void* p, IoType t, int64_t i, float v) {
  switch (t) {
    case IoType::F16: static_cast<half*>(p)[i] = __float2half_rn(v); break;
    case IoType::BF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

template <typename T>
__device__ __forceinline__ T to_op(float v);
template <>
__device__ __forceinline__ half to_op<half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 to_op<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <typename T>
__device__ __forceinline__ float from_op(T v);
template <>
__device__ __forceinline__ float from_op<half>(half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float from_op<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

// Writes v to the operand tile(s): hi, and with kSplit the residual v - hi to lo.
template <typename T, bool kSplit>
__device__ __forceinline__ void put(T* hi, T* lo, int idx, float v) {
  const T h = to_op<T>(v);
  hi[idx] = h;
  if constexpr (kSplit) lo[idx] = to_op<T>(v - from_op<T>(h));
}

__device__ __forceinline__ uint32_t ld32(const void* p) { return *static_cast<const uint32_t*>(p); }

// Raw bits of one thread's part of a K step, loaded one step ahead (software pipelining: the
// global loads of step s + 1 are in flight while the MMAs of step s run) and converted only when
// they are written to shared memory.
struct StepRegs {
  uint4 xv[2];        // 16-byte gather: two runs of 8 channels
  uint32_t xs[16];    // element gather: f32 bits, or the 16-bit value (0 outside the image)
  uint32_t words[4];  // 16 weight codes (int4: words 0-1, int8: 0-3)
  float2 so;          // their scale pair when one pair covers the run (cb % 16 == 0)
};

// (tap, first channel) of K step `step`; csteps = ceil(Ci / kConvBK) steps per tap.
__device__ __forceinline__ void step_coords(int step, int csteps, int* tap, int* c0) {
  *tap = step / csteps;
  *c0 = (step - *tap * csteps) * kConvBK;
}

// Column j of a K step: its tap and input channel, and whether it lies inside K. `tap0` and `c0`
// are the step's (step_coords); with packed taps (kPacked) c0 is the step's first k and each
// column finds its own tap (k = tap * Ci + ci).
template <bool kPacked>
__device__ __forceinline__ bool step_column(const ConvIgemmParams& p, int tap0, int c0, int j, int* tap, int* ci) {
  if constexpr (kPacked) {
    const int k = c0 + j;
    *tap = k / p.Ci;
    *ci = k - *tap * p.Ci;
    return k < p.k_total;
  } else {
    *tap = tap0;
    *ci = c0 + j;
    return *ci < p.Ci;
  }
}

// (tap, first column) of K step `step`: the tap and its first channel, or (packed taps) 0 and
// the first k.
template <bool kPacked>
__device__ __forceinline__ void step_start(const ConvIgemmParams& p, int step, int* tap, int* c0) {
  if constexpr (kPacked) {
    *tap = 0;
    *c0 = step * kConvBK;
  } else {
    step_coords(step, (p.Ci + kConvBK - 1) / kConvBK, tap, c0);
  }
}

// Element-gather mapping of thread tid's i-th element: NHWC: a warp reads 32 consecutive channels
// of one pixel (contiguous); NCHW: 64 threads read one channel of 64 consecutive pixels
// (consecutive iw where the stride is 1).
__device__ __forceinline__ void elem_rc(bool nchw, int tid, int i, int* r, int* j) {
  if (nchw) {
    *r = tid % 64;
    *j = tid / 64 + 2 * i;
  } else {
    *r = tid / 32 + 4 * i;
    *j = tid % 32;
  }
}

// T: the MMA operand type (half or __nv_bfloat16). kSplit: f32 activations through the bf16 split.
// kPacked: packed taps (conv_params.hpp), K walked as one run of taps * Ci columns.
template <typename T, bool kSplit, bool kPacked>
__global__ void __launch_bounds__(kConvThreads) conv_igemm_kernel(const ConvIgemmParams p) {
  constexpr int kTiles = kSplit ? 2 : 1;
  __shared__ __align__(16) T As[kTiles][kConvBM * kPitch];
  __shared__ __align__(16) T Bs[kTiles][kConvBN * kPitch];
  // Per pixel row of the tile: batch index (-1 past M) and the input position of tap (0, 0).
  __shared__ int pix_b[kConvBM], pix_ih[kConvBM], pix_iw[kConvBM];

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t M = int64_t(p.B) * p.Ho * p.Wo;
  const int64_t m0 = int64_t(blockIdx.x) * kConvBM;
  const int n0 = blockIdx.y * kConvBN;

  if (tid < kConvBM) {
    const int64_t m = m0 + tid;
    if (m < M) {
      const int64_t hw = int64_t(p.Ho) * p.Wo;
      const int b = int(m / hw);
      const int r = int(m % hw);
      pix_b[tid] = b;
      pix_ih[tid] = (r / p.Wo) * p.stride_h - p.pad_h;
      pix_iw[tid] = (r % p.Wo) * p.stride_w - p.pad_w;
    } else {
      pix_b[tid] = -1;
      pix_ih[tid] = 0;
      pix_iw[tid] = 0;
    }
  }
  __syncthreads();

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  const int wm = warp / 2, wn = warp % 2;  // this warp's 32 x 32 quarter of the tile
  const int g = lane / 4, t4 = lane % 4;   // fragment row group and column pair
  const int64_t plane = int64_t(p.H) * p.W;
  const int taps = p.Kh * p.Kw;
  // the 16-byte gather serves 16-bit activations of the operand type only
  bool vec_x = false;
  if constexpr (!kSplit) vec_x = p.vec_x;
  const bool x32 = p.x_type == IoType::F32;

  // B-slice ownership: output channel n0 + tid / 2, channels [16 * (tid % 2), +16) of the step.
  const int b_row = tid / 2, b_half = tid % 2;
  const int bn = n0 + b_row;
  // cbase (below) is a multiple of 16: with cb % 16 == 0 a thread's 16 codes share one pair (of
  // one tap: not with packed taps, whose runs cross taps)
  const bool one_pair = !kPacked && p.cb % 16 == 0;

  // Global loads of one step into registers (no shared memory, no conversion).
  auto load_step = [&](int step, StepRegs& R) {
    int tap0, c0;
    step_start<kPacked>(p, step, &tap0, &c0);
    // column j's input offset from the pixel's tap-(0, 0) position, and whether it is inside K
    auto column = [&](int j, int* dh, int* dw, int* ci) {
      int tap;
      const bool in_k = step_column<kPacked>(p, tap0, c0, j, &tap, ci);
      *dh = (tap / p.Kw) * p.dil_h;
      *dw = (tap % p.Kw) * p.dil_w;
      return in_k;
    };
    if (vec_x) {
      // 64 pixels x 4 runs of 8 channels, 2 runs per thread (4 threads cover a pixel's 32
      // channels). Ci % 8 == 0, so a run starting below Ci ends at or below it (packed taps: a
      // run of 8 columns starting at a multiple of 8 stays inside one tap).
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int chunk = tid + kConvThreads * i;
        const int r = chunk / 4, q = chunk % 4;
        int dh, dw, ci;
        const bool in_k = column(8 * q, &dh, &dw, &ci);
        const int b = pix_b[r];
        const int ih = pix_ih[r] + dh, iw = pix_iw[r] + dw;
        R.xv[i] = make_uint4(0u, 0u, 0u, 0u);
        if (b >= 0 && in_k && ih >= 0 && ih < p.H && iw >= 0 && iw < p.W)
          R.xv[i] = *reinterpret_cast<const uint4*>(
              static_cast<const T*>(p.x) + ((int64_t(b) * p.H + ih) * p.W + iw) * p.Ci + ci);
      }
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        int r, j;
        elem_rc(p.nchw, tid, i, &r, &j);
        int dh, dw, ci;
        const bool in_k = column(j, &dh, &dw, &ci);
        const int b = pix_b[r];
        const int ih = pix_ih[r] + dh, iw = pix_iw[r] + dw;
        uint32_t v = 0u;  // 0 bits: +0 in f32, f16 and bf16
        if (b >= 0 && in_k && ih >= 0 && ih < p.H && iw >= 0 && iw < p.W) {
          const int64_t idx = p.nchw ? (int64_t(b) * p.Ci + ci) * plane + int64_t(ih) * p.W + iw
                                     : ((int64_t(b) * p.H + ih) * p.W + iw) * p.Ci + ci;
          v = x32 ? static_cast<const uint32_t*>(p.x)[idx] : static_cast<const uint16_t*>(p.x)[idx];
        }
        R.xs[i] = v;
      }
    }
    const int cbase = c0 + 16 * b_half;
    R.words[0] = R.words[1] = R.words[2] = R.words[3] = 0u;
    R.so = make_float2(0.f, 0.f);
    if (bn < p.Co) {
      const uint8_t* row = p.codes + int64_t(bn) * p.row_bytes;
      // multiple of 16 (packed taps: the run's first k, the row holding round_up(K, kConvBK))
      const int64_t kk = kPacked ? int64_t(cbase) : int64_t(tap0) * p.Cip + cbase;
      if (p.bits == 4) {
        const uint2 v = *reinterpret_cast<const uint2*>(row + kk / 2);
        R.words[0] = v.x;
        R.words[1] = v.y;
      } else {
        const uint4 v = *reinterpret_cast<const uint4*>(row + kk);
        R.words[0] = v.x;
        R.words[1] = v.y;
        R.words[2] = v.z;
        R.words[3] = v.w;
      }
      if (one_pair && cbase < p.Ci)
        R.so = __ldg(p.pairs + (int64_t(bn) * taps + tap0) * p.n_cb + cbase / p.cb);
    }
  };

  // Conversion of one step's registers into the shared-memory slices.
  auto store_step = [&](int step, const StepRegs& R) {
    int tap0, c0;
    step_start<kPacked>(p, step, &tap0, &c0);
    if (vec_x) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int chunk = tid + kConvThreads * i;
        const int r = chunk / 4, q = chunk % 4;
        *reinterpret_cast<uint4*>(As[0] + r * kPitch + 8 * q) = R.xv[i];  // 16-byte aligned: pitch 80 B
      }
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        int r, j;
        elem_rc(p.nchw, tid, i, &r, &j);
        float v;
        if (x32) {
          v = __uint_as_float(R.xs[i]);
        } else {
          const unsigned short h = static_cast<unsigned short>(R.xs[i]);
          v = p.x_type == IoType::F16 ? __half2float(__ushort_as_half(h))
                                      : __bfloat162float(__ushort_as_bfloat16(h));
        }
        put<T, kSplit>(As[0], As[kTiles - 1], r * kPitch + j, v);
      }
    }
    const int cbase = 16 * b_half;  // the thread's 16 columns of the step
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      int tap, ci;
      const bool in_k = step_column<kPacked>(p, tap0, c0, cbase + j, &tap, &ci);
      float w = 0.f;
      if (bn < p.Co && in_k) {
        const uint32_t u = p.bits == 4 ? (R.words[j / 8] >> (4 * (j % 8))) & 0xFu
                                       : (R.words[j / 4] >> (8 * (j % 4))) & 0xFFu;
        const float2 so = one_pair ? R.so : __ldg(p.pairs + (int64_t(bn) * taps + tap) * p.n_cb + ci / p.cb);
        w = fmaf(so.x, float(u), so.y);
      }
      put<T, kSplit>(Bs[0], Bs[kTiles - 1], b_row * kPitch + 16 * b_half + j, w);
    }
  };

  // this block's K steps (all of them without a split); the bounds are uniform over the block,
  // so every thread reaches the barriers below the same number of times
  const int s_begin = int(blockIdx.z) * p.steps_per_split;
  const int s_end = min(p.k_steps, s_begin + p.steps_per_split);
  StepRegs R;
  if (s_begin < s_end) load_step(s_begin, R);
  for (int step = s_begin; step < s_end; ++step) {
    store_step(step, R);
    __syncthreads();  // the slices are complete
    if (step + 1 < s_end) load_step(step + 1, R);  // in flight during the MMAs below
#pragma unroll
    for (int ks = 0; ks < kConvBK; ks += 16) {
      Frag16x16 a[kTiles][2];
      Frag16x8 bf[kTiles][4];
#pragma unroll
      for (int s = 0; s < kTiles; ++s) {
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          const T* base = As[s] + (wm * 32 + mi * 16 + g) * kPitch + ks + 2 * t4;
          a[s][mi].r[0] = ld32(base);
          a[s][mi].r[1] = ld32(base + 8 * kPitch);
          a[s][mi].r[2] = ld32(base + 8);
          a[s][mi].r[3] = ld32(base + 8 * kPitch + 8);
        }
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const T* base = Bs[s] + (wn * 32 + ni * 8 + g) * kPitch + ks + 2 * t4;
          bf[s][ni].r[0] = ld32(base);
          bf[s][ni].r[1] = ld32(base + 8);
        }
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          MmaType<T>::mma(acc[mi][ni], a[0][mi], bf[0][ni]);
          if constexpr (kSplit) {
            MmaType<T>::mma(acc[mi][ni], a[0][mi], bf[1][ni]);  // x_hi * w_lo
            MmaType<T>::mma(acc[mi][ni], a[1][mi], bf[0][ni]);  // x_lo * w_hi
          }
        }
    }
    __syncthreads();  // the next step overwrites the slices
  }

  // --- epilogue: bias, clamp, convert, scatter in the output layout ---
  const int64_t hw = int64_t(p.Ho) * p.Wo;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t m = m0 + wm * 32 + mi * 16 + g + (e >= 2 ? 8 : 0);
        const int n = n0 + wn * 32 + ni * 8 + 2 * t4 + (e & 1);
        if (m >= M || n >= p.Co) continue;
        float v = acc[mi][ni][e];
        if (p.partial) {  // K split: raw sums, the reduction applies the epilogue
          p.partial[(int64_t(blockIdx.z) * M + m) * p.Co + n] = v;
          continue;
        }
        if (p.bias) v += load_io(p.bias, p.bias_type, n);
        v = fminf(fmaxf(v, p.clamp_lo), p.clamp_hi);
        const int64_t yi = p.nchw ? ((m / hw) * p.Co + n) * hw + m % hw : m * p.Co + n;
        store_io(p.y, p.y_type, yi, v);
      }
}

}  // namespace mixq::cuda::conv
