// INT8 x INT8 tensor-core GEMM (mma.sync m16n8k32 s8.s8.s32, sm_80+; also what runs on Hopper
// until a wgmma kernel is plugged in) with the W8A8 per-block four-term scaling, or the per-tensor
// requantizing epilogue, fused: one kernel, no int32 matrix in device memory.
//
// CTA tile BM x BN, one pipeline stage = one K block of BK bytes (BK = g in the block mode), held
// in shared memory by a STAGES-deep cp.async pipeline together with the block's per-row and
// per-column meta. Rows of A and B sit in shared memory with their 16-byte chunks XOR-swizzled by
// the row so that the eight 16-byte rows one ldmatrix reads fall in eight different bank groups.
//
// Block mode: after the MMAs of a K block, each thread turns its int32 partials into floats and
// applies C += sx*(sw*dot) + (sx*Σqx)*ow + ox*dw in registers, then clears the partials. |dot| of a
// 64/128 block is <= 128*128*128 < 2^22, so the int -> float conversion is the exact "magic
// number" one (integer add of 0x4B400000, float subtract of 2^23 + 2^22): an IADD on the integer
// pipe and an FADD instead of the quarter-rate I2F.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/common/int8_params.hpp"
#include "cuda/kernels/common/int8_requant.cuh"

namespace mixq::cuda::int8k {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; when !valid nothing is read and the destination is zero-filled.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_s8(int32_t (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                       uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Exact for |v| < 2^22.
__device__ __forceinline__ float int_to_float_magic(int32_t v) {
  return __int_as_float(v + 0x4B400000) - 12582912.0f;
}

__device__ __forceinline__ float load_bias(const void* bias, int type, int n) {
  if (type == 0) return __half2float(static_cast<const __half*>(bias)[n]);
  if (type == 1) return __bfloat162float(static_cast<const __nv_bfloat16*>(bias)[n]);
  return static_cast<const float*>(bias)[n];
}

__device__ __forceinline__ void store_float(void* y, int type, int64_t off, float v) {
  if (type == 0) static_cast<__half*>(y)[off] = __float2half_rn(v);
  else if (type == 1) static_cast<__nv_bfloat16*>(y)[off] = __float2bfloat16_rn(v);
  else static_cast<float*>(y)[off] = v;
}

template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int BK_, int STAGES_, bool TENSOR_,
          bool OFFSET_, bool IM2COL_ = false>
struct Int8Cfg {
  static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int BK = BK_, STAGES = STAGES_;
  static constexpr bool kTensor = TENSOR_, kOffset = OFFSET_, kIm2col = IM2COL_;
  static constexpr int kThreads = WARPS_M * WARPS_N * 32;
  static constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;
  static constexpr int MT = WTM / 16, NT = WTN / 8;
  static constexpr int CPR = BK / 16;  // 16-byte chunks per row
  // Swizzle: chunk c of row r is stored at chunk c ^ ((r >> kSwzShift) & (CPR - 1)); eight
  // consecutive rows then cover all 128-byte bank groups (CPR = 8: one row per group; CPR = 4: two
  // rows share a 128-byte line, so the pattern changes every second row).
  static constexpr int kSwzShift = CPR == 8 ? 0 : 1;
  static constexpr int kMetaFloats = kTensor ? 0 : 3 * BM + 3 * BN;
  static constexpr int kStageBytes = BM * BK + BN * BK + kMetaFloats * 4;
  // im2col: after the stages, the CTA's output pixels (fill_pixel_table)
  static constexpr int kPixBytes = kIm2col ? 3 * BM * 4 : 0;
  static constexpr int kSmemBytes = STAGES * kStageBytes + kPixBytes;
  static_assert(CPR == 4 || CPR == 8, "BK must be 64 or 128");
  static_assert(!kIm2col || (kTensor && kThreads % CPR == 0), "im2col: per-tensor, fixed chunk per thread");
  static_assert(MT >= 1 && NT >= 2 && NT % 2 == 0, "warp tile");
  static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tile");
};

template <class C>
__device__ __forceinline__ uint32_t swz(int r, int c) {
  return uint32_t(r * C::BK + ((c ^ ((r >> C::kSwzShift) & (C::CPR - 1))) << 4));
}

__device__ __forceinline__ void st_shared_16(uint32_t dst, uint32_t v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst), "r"(v));
}

// The im2col pixel table (Int8Cfg::kPixBytes): for each of the CTA's BM output pixels, its image
// (-1 past M) and the row and column ho * stride - pad, wo * stride - pad of its receptive
// field's top-left tap (negative in the padding).
template <class C>
__device__ __forceinline__ void fill_pixel_table(const Int8GemmParams& p, int* pix, int m0, int tid) {
  const Im2colConv& g = p.conv;
  const int hw = g.Ho * g.Wo;
  for (int r = tid; r < C::BM; r += C::kThreads) {
    const int m = m0 + r;
    int img = -1, ih = 0, iw = 0;
    if (m < p.M) {
      img = m / hw;
      const int rem = m - img * hw;
      const int ho = rem / g.Wo, wo = rem - ho * g.Wo;
      ih = ho * g.stride_h - g.pad_h;
      iw = wo * g.stride_w - g.pad_w;
    }
    pix[r] = img;
    pix[C::BM + r] = ih;
    pix[2 * C::BM + r] = iw;
  }
}

// A's K block `kbi` gathered from the NHWC image (Int8GemmParams::conv): every thread owns one
// 16-byte chunk column c (kThreads is a multiple of CPR), so the tap and channel of its chunk are
// worked out once per stage; a chunk inside the image is a cp.async of 16 channels, one in the
// padding is Z_I written directly (cp.async can only zero-fill, and a zero code would be the real
// value -S_I*Z_I, not 0), one past K or past M is zero-filled (zero weight codes / not stored).
template <class C>
__device__ __forceinline__ void load_a_im2col(const Int8GemmParams& p, uint32_t sa, int kbi,
                                              const int* pix, int tid) {
  const Im2colConv& g = p.conv;
  const int c = tid % C::CPR;
  const int k = kbi * C::BK + c * 16;
  const int tap = k / g.Ci, ci = k - tap * g.Ci;
  const bool k_ok = tap < g.Kh * g.Kw;
  const int kh = tap / g.Kw, kw = tap - kh * g.Kw;
  const int dh = kh * g.dil_h, dw = kw * g.dil_w;
  const uint32_t z4 = uint32_t(uint8_t(int8_t(p.in_zero))) * 0x01010101u;
#pragma unroll
  for (int i = tid; i < C::BM * C::CPR; i += C::kThreads) {
    const int r = i / C::CPR;
    const int img = pix[r];
    const uint32_t dst = sa + swz<C>(r, c);
    if (!k_ok || img < 0) {
      cp_async_16(dst, p.a, false);
      continue;
    }
    const int ih = pix[C::BM + r] + dh, iw = pix[2 * C::BM + r] + dw;
    if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
      cp_async_16(dst, p.a + ((int64_t(img) * g.H + ih) * g.W + iw) * g.Ci + ci, true);
    else
      st_shared_16(dst, z4);
  }
}

// Issues the cp.async copies of K block `kbi` into `stage` (base shared address).
template <class C>
__device__ __forceinline__ void load_stage(const Int8GemmParams& p, uint32_t stage, int kbi,
                                           int m0, int n0, int tid, const int* pix = nullptr) {
  const int64_t k0 = int64_t(kbi) * C::BK;
  const int64_t a_cols = (p.K + 15) & ~15;  // A rows are read up to here (zero codes past K)
  const uint32_t sa = stage, sb = stage + C::BM * C::BK;
  if constexpr (C::kIm2col) {
    load_a_im2col<C>(p, sa, kbi, pix, tid);
  } else {
#pragma unroll
    for (int i = tid; i < C::BM * C::CPR; i += C::kThreads) {
      const int r = i / C::CPR, c = i % C::CPR;
      const int64_t gk = k0 + c * 16;
      const bool ok = m0 + r < p.M && gk < a_cols;
      const int8_t* src = ok ? p.a + int64_t(m0 + r) * p.lda + gk : p.a;
      cp_async_16(sa + swz<C>(r, c), src, ok);
    }
  }
#pragma unroll
  for (int i = tid; i < C::BN * C::CPR; i += C::kThreads) {
    const int r = i / C::CPR, c = i % C::CPR;
    cp_async_16(sb + swz<C>(r, c), p.b + int64_t(n0 + r) * p.ldb + k0 + c * 16, true);
  }
  if constexpr (!C::kTensor) {
    // Row meta: sx, ox, Σqx (4 rows per 16 bytes; ld_meta is a multiple of 4, so a chunk is either
    // wholly inside the buffer or wholly past it).
    const uint32_t sm = sb + C::BN * C::BK;
    constexpr int kRowChunks = C::BM / 4, kColChunks = C::BN / 4;
    for (int i = tid; i < 3 * kRowChunks + 3 * kColChunks; i += C::kThreads) {
      if (i < 3 * kRowChunks) {
        const int arr = i / kRowChunks, j = i % kRowChunks;
        const bool ok = m0 + 4 * j < p.ld_meta;
        const void* base = arr == 0 ? static_cast<const void*>(p.sx)
                           : arr == 1 ? static_cast<const void*>(p.ox)
                                      : static_cast<const void*>(p.sumx);
        const char* src = static_cast<const char*>(base) +
                          (ok ? (int64_t(kbi) * p.ld_meta + m0 + 4 * j) * 4 : 0);
        cp_async_16(sm + (arr * C::BM + 4 * j) * 4, src, ok);
      } else {
        const int ii = i - 3 * kRowChunks;
        const int arr = ii / kColChunks, j = ii % kColChunks;
        if (arr == 2 && !C::kOffset) continue;
        const float* base = arr == 0 ? p.sw : arr == 1 ? p.dw : p.ow;
        cp_async_16(sm + (3 * C::BM + arr * C::BN + 4 * j) * 4,
                    base + int64_t(kbi) * p.Np + n0 + 4 * j, true);
      }
    }
  }
}

template <class C>
__global__ void __launch_bounds__(C::kThreads, 1) sm80_int8_gemm_kernel(const Int8GemmParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / C::WARPS_N, wn = warp % C::WARPS_N;
  const int grp = lane >> 2, tig = lane & 3;

  // Grouped rasterization: 8 M tiles share each run of N tiles, so a wave of CTAs reuses the
  // same weight tiles from L2 instead of streaming the whole weight once per M tile.
  const int m_tiles = (p.M + C::BM - 1) / C::BM, n_tiles = (p.N + C::BN - 1) / C::BN;
  constexpr int kGroupM = 8;
  const int pid = blockIdx.x;
  const int group = pid / (kGroupM * n_tiles);
  const int first_m = group * kGroupM;
  const int gsize = min(m_tiles - first_m, kGroupM);
  const int mt_idx = first_m + (pid % (kGroupM * n_tiles)) % gsize;
  const int nt_idx = (pid % (kGroupM * n_tiles)) / gsize;
  const int m0 = mt_idx * C::BM, n0 = nt_idx * C::BN;

  const uint32_t smem0 = smem_u32(smem);
  const int nkb = p.n_kblocks;
  int* pix = nullptr;
  if constexpr (C::kIm2col) {
    pix = reinterpret_cast<int*>(smem + C::STAGES * C::kStageBytes);
    fill_pixel_table<C>(p, pix, m0, tid);
    __syncthreads();
  }

#pragma unroll
  for (int s = 0; s < C::STAGES - 1; ++s) {
    if (s < nkb) load_stage<C>(p, smem0 + s * C::kStageBytes, s, m0, n0, tid, pix);
    cp_async_commit();
  }

  int32_t acc[C::MT][C::NT][4];
  float facc[C::MT][C::NT][4];
#pragma unroll
  for (int i = 0; i < C::MT; ++i)
#pragma unroll
    for (int j = 0; j < C::NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc[i][j][e] = 0;
        facc[i][j][e] = 0.f;
      }

  // ldmatrix lane roles (see the m16n8k32 fragment layouts): A matrices 0..3 are (rows 0-7, k
  // 0-15), (rows 8-15, k 0-15), (rows 0-7, k 16-31), (rows 8-15, k 16-31); B matrices are
  // (n 0-7, k 0-15), (n 0-7, k 16-31), (n 8-15, k 0-15), (n 8-15, k 16-31).
  const int a_row = wm * C::WTM + (lane & 7) + ((lane >> 3) & 1) * 8, a_chunk = lane >> 4;
  const int b_row = wn * C::WTN + (lane & 7) + (lane >> 4) * 8, b_chunk = (lane >> 3) & 1;

  for (int kbi = 0; kbi < nkb; ++kbi) {
    cp_async_wait<C::STAGES - 2>();
    __syncthreads();  // block kbi landed for everyone; block kbi-1's stage is free to refill
    {
      const int nxt = kbi + C::STAGES - 1;
      if (nxt < nkb) load_stage<C>(p, smem0 + (nxt % C::STAGES) * C::kStageBytes, nxt, m0, n0, tid, pix);
      cp_async_commit();
    }
    const uint32_t stage = smem0 + (kbi % C::STAGES) * C::kStageBytes;
    const uint32_t sa = stage, sb = stage + C::BM * C::BK;
#pragma unroll
    for (int ks = 0; ks < C::BK / 32; ++ks) {
      uint32_t af[C::MT][4], bf[C::NT / 2][4];
#pragma unroll
      for (int i = 0; i < C::MT; ++i) ldmatrix_x4(af[i], sa + swz<C>(a_row + i * 16, ks * 2 + a_chunk));
#pragma unroll
      for (int j = 0; j < C::NT / 2; ++j) ldmatrix_x4(bf[j], sb + swz<C>(b_row + j * 16, ks * 2 + b_chunk));
#pragma unroll
      for (int i = 0; i < C::MT; ++i)
#pragma unroll
        for (int j = 0; j < C::NT; ++j)
          mma_s8(acc[i][j], af[i], bf[j / 2][(j & 1) * 2], bf[j / 2][(j & 1) * 2 + 1]);
    }
    if constexpr (!C::kTensor) {
      const float* meta = reinterpret_cast<const float*>(smem + (kbi % C::STAGES) * C::kStageBytes +
                                                         (C::BM + C::BN) * C::BK);
      const float* s_sx = meta;
      const float* s_ox = meta + C::BM;
      const int32_t* s_sum = reinterpret_cast<const int32_t*>(meta + 2 * C::BM);
      const float* s_sw = meta + 3 * C::BM;
      const float* s_dw = s_sw + C::BN;
      const float* s_ow = s_dw + C::BN;
      float csw[C::NT][2], cdw[C::NT][2], cow[C::NT][2];
#pragma unroll
      for (int j = 0; j < C::NT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          // The meta rows are stored in the int8_meta_col order (n0 is a multiple of 16).
          const int col = int(int8_meta_col(wn * C::WTN + j * 8 + tig * 2 + e));
          csw[j][e] = s_sw[col];
          cdw[j][e] = s_dw[col];
          cow[j][e] = C::kOffset ? s_ow[col] : 0.f;
        }
#pragma unroll
      for (int i = 0; i < C::MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = wm * C::WTM + i * 16 + h * 8 + grp;
          const float a = s_sx[row], c = s_ox[row];
          const float b = C::kOffset ? a * float(s_sum[row]) : 0.f;
#pragma unroll
          for (int j = 0; j < C::NT; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int idx = h * 2 + e;
              const float d = int_to_float_magic(acc[i][j][idx]);
              acc[i][j][idx] = 0;
              float v = fmaf(a, d * csw[j][e], facc[i][j][idx]);
              v = fmaf(c, cdw[j][e], v);
              if constexpr (C::kOffset) v = fmaf(b, cow[j][e], v);
              facc[i][j][idx] = v;
            }
        }
    }
  }
  cp_async_wait<0>();

  // Epilogue: bias, clamp, convert, store (every element guarded by M and N).
  [[maybe_unused]] const RequantOut out(p.clamp_lo, p.clamp_hi, p.out_scale, p.out_zero, p.y_type == 3);
#pragma unroll
  for (int j = 0; j < C::NT; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int n = n0 + wn * C::WTN + j * 8 + tig * 2 + e;
      if (n >= p.N) continue;
      if constexpr (C::kTensor) {
        const int32_t zsum = p.in_zero * p.wsum[n];  // wraps like the accumulator: exact mod 2^32
        const RequantOut::Column col =
            out.column(p.wscale[n], p.bias ? double(load_bias(p.bias, p.bias_type, n)) : 0.0);
#pragma unroll
        for (int i = 0; i < C::MT; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int m = m0 + wm * C::WTM + i * 16 + h * 8 + grp;
            if (m >= p.M) continue;
            const int32_t a32 = int32_t(uint32_t(acc[i][j][h * 2 + e]) - uint32_t(zsum));
            out.store(p.y, int64_t(m) * p.ldy + n, a32, col);
          }
      } else {
        const float bias = p.bias ? load_bias(p.bias, p.bias_type, n) : 0.f;
#pragma unroll
        for (int i = 0; i < C::MT; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int m = m0 + wm * C::WTM + i * 16 + h * 8 + grp;
            if (m >= p.M) continue;
            float v = facc[i][j][h * 2 + e] + bias;
            v = v < p.clamp_lo ? p.clamp_lo : v;
            v = v > p.clamp_hi ? p.clamp_hi : v;
            store_float(p.y, p.y_type, int64_t(m) * p.ldy + n, v);
          }
      }
    }
}

template <class C>
void launch_cfg(const Int8GemmParams& p, cudaStream_t stream);

}  // namespace mixq::cuda::int8k
