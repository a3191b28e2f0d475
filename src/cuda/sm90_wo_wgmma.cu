// Hopper weight-only GEMM for batches past the streaming kernel (M >= 33): the INT4/INT8 weights
// are dequantized in registers straight into the A operand of wgmma (register-A form), the
// activations are the B operand in shared memory (K-major, 128-byte swizzle), so no dequantized
// weight ever goes through device memory.
//
// CTA: 2 warpgroups (256 threads), a tile of 128 weight rows (N) x MT activation rows (M),
// K walked in 64-wide chunks. Each warp owns 16 weight rows: its 16x64 packed tile (wo_layout.hpp)
// is exactly the mma.sync A fragments of 4 k16 steps, and the per-warp A operand of wgmma uses the
// same register layout, so one 16-byte shared load per lane gives a warp 64 K of A.
// Pipeline: a STAGES-deep cp.async ring carries, per chunk, the X tile (MT x 64, swizzled), the
// weight tiles (8 warps x 512 / 1024 bytes) and their (scale, offset) pairs. While the tensor
// cores run chunk i, the warps dequantize chunk i+1 into the second A register buffer.
// Split-K (for grids that would not fill the GPU) writes f32 partials reduced by a second kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>

#include "cuda/check.hpp"
#include "cuda/kernel_image.hpp"
#include "cuda/kernels/mma_sm80.cuh"
#include "cuda/kernels/sm80_wo_stream.cuh"
#include "cuda/kernels/sm90_wgmma.cuh"
#include "cuda/kernels/sm90_wgmma_dequant.cuh"
#include "cuda/wo_kernels.hpp"
#include "cuda/wo_wgmma.hpp"

namespace mixq::cuda {

namespace {

constexpr int kWarps = 8;          // two warpgroups of 4

template <int MT>
struct WgmmaTile {
  // MT <= 128: two CTAs per SM (~97 KB of shared memory each) so that 4 warps per scheduler
  // hide the dequantization latencies; MT = 256 needs its 128 accumulators per thread alone.
  static constexpr int kStages = MT == 64 ? 6 : 4;
  static constexpr int kCtasPerSm = MT == 256 ? 1 : 2;
  static constexpr int kXBytes = MT * kChunkK * 2;  // swizzled [MT][64] 16-bit, 1024-aligned
  template <int BITS>
  static constexpr int w_bytes() { return kWarps * 32 * (BITS == 4 ? 16 : 32); }
  // pairs: per warp 16 rows x (up to 4 groups of a 64-wide chunk) x 8 bytes
  static constexpr int kPairBytes = kWarps * kTileRows * 4 * 8;
  template <int BITS>
  static constexpr int stage_bytes() { return kXBytes + w_bytes<BITS>() + kPairBytes; }
  template <int BITS>
  static constexpr size_t smem_bytes() { return size_t(kStages) * stage_bytes<BITS>() + 1024; }
};

#if !defined(__CUDA_ARCH__) || defined(MIXQ_SM90A)  // device helpers of the sm_90a pass
template <int BYTES>
__device__ __forceinline__ void cp_async_small(uint32_t smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(smem), "l"(gmem), "n"(BYTES));
}

// Dequantized A fragments of one k16 step: w = s*u + o' (wo_layout.hpp), rounded once to T.
template <typename T, bool HALF_PAIRS>
struct Dequant;

// f16 activations with pairs exact in f16: v = 1024 + u (mantissa trick), u = v - 1024 exactly,
// w = fma(u, s, o') rounded once, all on the f16x2 pipe.
template <>
struct Dequant<half, true> {
  __device__ __forceinline__ static uint32_t pair(uint32_t v, uint32_t s2, uint32_t o2) {
    const __half2 u = __hsub2(*reinterpret_cast<const __half2*>(&v), __half2half2(__ushort_as_half(0x6400)));
    const __half2 w = __hfma2(u, *reinterpret_cast<const __half2*>(&s2), *reinterpret_cast<const __half2*>(&o2));
    return *reinterpret_cast<const uint32_t*>(&w);
  }
};

// Any other case: the biased value v is widened to f32 (exact), w = v*s + (o' - bias*s) in f32
// (the folded offset is computed in f32, its rounding is far below the output's), one rounding
// (pack2, kernels/dequant_codes.cuh).

using sm90::biased_f16;  // biased 16-bit f16 values (1024 + u) of a fragment register

#endif

template <typename T, int MT, int BITS, bool HALF_PAIRS>
__global__ void __launch_bounds__(kWarps * 32, WgmmaTile<MT>::kCtasPerSm) wo_wgmma_kernel(const WoStreamParams p) {
#if defined(MIXQ_SM90A)
  using Tile = WgmmaTile<MT>;
  constexpr int S = Tile::kStages;
  constexpr int kStageBytes = Tile::template stage_bytes<BITS>();
  constexpr int kLaneBytes = BITS == 4 ? 16 : 32;
  constexpr int kWBytes = Tile::template w_bytes<BITS>();
  constexpr int kAcc = MT / 2;

  extern __shared__ uint8_t smem_raw[];
  const uint32_t smem0 = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int n_tile0 = blockIdx.x * kWarps;  // first 16-row tile of the CTA
  const int m0 = blockIdx.z * MT;
  const int chunks = p.Kp / kChunkK;
  const int c_begin = blockIdx.y * p.chunks_per_split;
  const int c_end = min(chunks, c_begin + p.chunks_per_split);
  const int n_chunks = c_end - c_begin;
  const int n_row_tiles = (p.N + kTileRows - 1) / kTileRows;
  const int pair_size = HALF_PAIRS ? 4 : (p.pair_f32 ? 8 : 4);
  const int gs = p.group_shift;
  // pairs of one 64-wide chunk per row: 1 when the group is >= 64, else 64 / group
  const int ppc = gs >= 6 ? 1 : (1 << (6 - gs));

  auto x_stage = [&](int s) { return smem0 + uint32_t(s * kStageBytes); };
  auto w_off = [&](int s) { return uint32_t(s * kStageBytes + Tile::kXBytes); };
  auto p_off = [&](int s) { return w_off(s) + uint32_t(kWBytes); };
  // generic pointer to the aligned base: ordinary loads of the stages are ordered by the barriers
  const uint8_t* sptr = smem_raw + (smem0 - smem_addr(smem_raw));

  // Per-thread copy assignments are the same for every chunk (computed once): X row r0 + 32j,
  // 16-byte column chunk xc (its swizzled slot is the same for all j since 32j keeps r % 8).
  constexpr int kXPerThread = MT * 8 / (kWarps * 32);
  const int r0 = tid >> 3, xc = tid & 7;
  const uint32_t x_dst0 = uint32_t(r0 * 128 + ((xc ^ (r0 & 7)) << 4));
  const int64_t x_row_step = int64_t(32) * p.ldx * 2;
  const char* x_src0 = static_cast<const char*>(p.x) + (int64_t(m0 + r0) * p.ldx + xc * 8) * 2;
  const int x_rows_ok = min(kXPerThread, max(0, (p.M - m0 - r0 + 31) / 32));  // rows j < this exist
  const int nt = n_tile0 + warp;
  const bool w_ok = nt < n_row_tiles;
  const char* w_src0 = reinterpret_cast<const char*>(p.codes) + (int64_t(nt) * chunks * 32 + lane) * kLaneBytes;
  const uint32_t w_dst = uint32_t((warp * 32 + lane) * kLaneBytes);
  const char* p_src0 = static_cast<const char*>(p.pairs) +
                       int64_t(nt * kTileRows + (lane & 15)) * p.groups * pair_size;
  const uint32_t p_dst = uint32_t((warp * kTileRows + (lane & 15)) * 4 * 8);

  // One chunk into stage s: X rows m0.. (zero beyond M and K), weights, pairs.
  auto load_chunk = [&](int c, int s) {
    const int k0 = c * kChunkK;
    const uint32_t xs = x_stage(s) + x_dst0;
    const int kb = max(0, min(8, p.K - (k0 + xc * 8))) * 2;
    const char* xg = x_src0 + int64_t(k0) * 2;
#pragma unroll
    for (int j = 0; j < kXPerThread; ++j) {
      const int bytes = j < x_rows_ok ? kb : 0;
      cp_async_16_zfill(xs + uint32_t(j * 32 * 128), bytes ? xg + j * x_row_step : p.x, bytes);
    }
    if (w_ok) {
      const char* wg = w_src0 + int64_t(c) * 32 * kLaneBytes;
      const uint32_t ws = smem0 + w_off(s) + w_dst;
      cp_async_16_u32(ws, wg);
      if constexpr (BITS == 8) cp_async_16_u32(ws + 16, wg + 16);
      // lanes 0..15: row nt*16 + lane, the chunk's ppc pairs (contiguous in the row)
      if (lane < kTileRows) {
        const int g0 = k0 >> gs;
        const char* pg = p_src0 + int64_t(g0) * pair_size;
        const uint32_t ps = smem0 + p_off(s) + p_dst;
        if (ppc == 1) {
          if (pair_size == 8) cp_async_small<8>(ps, pg);
          else cp_async_small<4>(ps, pg);
        } else {
          for (int q = 0; q < ppc; ++q) {
            if (pair_size == 8) cp_async_small<8>(ps + q * 8, pg + q * 8);
            else cp_async_small<4>(ps + q * 8, pg + q * 4);
          }
        }
      }
    }
  };

  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
  uint32_t a[2][4][4];  // [buffer][k16 step][fragment register]

  const int r_lo = lane >> 2;  // rows r_lo and r_lo + 8 of the warp's tile
  // (scale, offset) of rows r_lo and r_lo + 8 for pair slot q, as two 32-bit words each:
  // half path: s2/o2 = half2(s, s) / half2(o', o'); f32 path: s and o' - 1024 s.
  auto load_pairs = [&](int s, int q, uint32_t (&s2)[2], uint32_t (&o2)[2], float (&sf)[2], float (&of)[2]) {
    const uint8_t* pp = sptr + p_off(s) + (warp * kTileRows * 4 + r_lo * 4 + q) * 8;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ph = pp + h * 8 * 4 * 8;
      if constexpr (HALF_PAIRS) {
        const __half2 pr = *reinterpret_cast<const __half2*>(ph);
        const __half2 sv = __low2half2(pr), ov = __high2half2(pr);
        s2[h] = *reinterpret_cast<const uint32_t*>(&sv);
        o2[h] = *reinterpret_cast<const uint32_t*>(&ov);
      } else {
        float sv, ov;
        if (p.pair_f32) {
          const float2 f = *reinterpret_cast<const float2*>(ph);
          sv = f.x; ov = f.y;
        } else {
          const float2 f = __half22float2(*reinterpret_cast<const __half2*>(ph));
          sv = f.x; ov = f.y;
        }
        sf[h] = sv;
        of[h] = fmaf(-1024.f, sv, ov);  // fold the mantissa-trick bias: w = (1024+u) s + (o' - 1024 s)
      }
    }
  };
  auto dequant_step = [&](const uint32_t* w, int j, const uint32_t (&s2)[2], const uint32_t (&o2)[2],
                          const float (&sf)[2], const float (&of)[2], uint32_t (&dst)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // registers 0, 2: row r; 1, 3: row r + 8
      const uint32_t v = biased_f16<BITS>(w, j, i);
      if constexpr (HALF_PAIRS) {
        dst[i] = Dequant<half, true>::pair(v, s2[i & 1], o2[i & 1]);
      } else {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&v));
        dst[i] = pack2<T>(fmaf(f.x, sf[i & 1], of[i & 1]), fmaf(f.y, sf[i & 1], of[i & 1]));
      }
    }
  };
  // Dequantizes the chunk in stage s into A buffer dst.
  auto dequant = [&](int s, uint32_t (&dst)[4][4]) {
    uint32_t w[BITS == 4 ? 4 : 8];
    {
      const uint4* wp = reinterpret_cast<const uint4*>(sptr + w_off(s) + w_dst);
      const uint4 lo = wp[0];
      w[0] = lo.x; w[1] = lo.y; w[2] = lo.z; w[3] = lo.w;
      if constexpr (BITS == 8) {
        const uint4 hi = wp[1];
        w[4] = hi.x; w[5] = hi.y; w[6] = hi.z; w[7] = hi.w;
      }
    }
    uint32_t s2[2], o2[2];
    float sf[2], of[2];
    if (ppc == 1) {  // one group spans the chunk: one pair per row
      load_pairs(s, 0, s2, o2, sf, of);
#pragma unroll
      for (int j = 0; j < 4; ++j) dequant_step(w, j, s2, o2, sf, of, dst[j]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        load_pairs(s, (j * 16) >> gs, s2, o2, sf, of);
        dequant_step(w, j, s2, o2, sf, of, dst[j]);
      }
    }
  };

  auto mma_chunk = [&](int s, const uint32_t (&src)[4][4]) {
    const uint32_t xs = x_stage(s);
#pragma unroll
    for (int i = 0; i < kAcc; ++i) sm90::reg_fence(acc[i]);
    sm90::wgmma_fence();
#pragma unroll
    for (int j = 0; j < 4; ++j)
      sm90::WgmmaRS<T, MT>::mma(acc, src[j], sm90::desc_kmajor_sw128(xs + uint32_t(j * 32)), 1);
    sm90::wgmma_commit();
#pragma unroll
    for (int i = 0; i < kAcc; ++i) sm90::reg_fence(acc[i]);
  };

  // Prologue: S - 2 chunks in flight (a stage is refilled two chunks after its MMAs were issued,
  // once every warp has waited for them).
#pragma unroll
  for (int s = 0; s < S - 2; ++s) {
    if (s < n_chunks) load_chunk(c_begin + s, s);
    cp_async_commit();
  }
  for (int i = 0; i < n_chunks; i += 2) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // unrolled by two: A buffer index is a compile-time constant
      const int ii = i + h;
      if (ii < n_chunks) {
        cp_async_wait<S - 3>();
        __syncthreads();  // chunk ii visible to all; every warp is done with chunk ii - 2
        const int nxt = ii + S - 2;
        if (nxt < n_chunks) load_chunk(c_begin + nxt, nxt % S);
        cp_async_commit();
        dequant(ii % S, a[h]);
        mma_chunk(ii % S, a[h]);
        sm90::wgmma_wait<1>();
      }
    }
  }
  sm90::wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < kAcc; ++i) sm90::reg_fence(acc[i]);

  // Epilogue. Accumulator 4*q + e: weight row r_lo (+8 for e >= 2), token 8q + 2*(lane%4) + (e&1).
  const int n_row0 = (n_tile0 + warp) * kTileRows + r_lo;
  const int t2 = 2 * (lane & 3);
#pragma unroll
  for (int q = 0; q < MT / 8; ++q) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int n = n_row0 + ((e >> 1) << 3);
      const int m = m0 + 8 * q + t2 + (e & 1);
      if (n < p.N && m < p.M) {
        if (p.splits > 1)
          p.partial[(int64_t(blockIdx.y) * p.M + m) * p.N + n] = acc[4 * q + e];
        else
          store_io(p.y, int64_t(m) * p.ldy + n, p.y_type, epilogue(p, n, acc[4 * q + e]));
      }
    }
  }
#else
  __trap();  // built for a device without sm_90a wgmma: the host never launches this
#endif
}

// y[m][n] = epilogue(sum over splits of partial[s][m][n]), in split order (deterministic).
__global__ void splitk_reduce_kernel(const WoStreamParams p) {
  const int64_t total = int64_t(p.M) * p.N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = 0.f;
    for (int s = 0; s < p.splits; ++s) v += p.partial[s * total + i];
    const int m = int(i / p.N), n = int(i % p.N);
    store_io(p.y, int64_t(m) * p.ldy + n, p.y_type, epilogue(p, n, v));
  }
}

template <typename T, int MT, int BITS, bool HALF_PAIRS>
void launch_config(const WoStreamParams& p, dim3 grid, cudaStream_t stream) {
  auto kernel = wo_wgmma_kernel<T, MT, BITS, HALF_PAIRS>;
  const size_t smem = WgmmaTile<MT>::template smem_bytes<BITS>();
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  MIXQ_CUDA_CHECK(attr);
  kernel<<<grid, kWarps * 32, smem, stream>>>(p);
  MIXQ_CUDA_CHECK(cudaGetLastError());
}

template <typename T, bool HALF_PAIRS>
void launch_for_type(const WoStreamParams& p, int mt, int bits, dim3 grid, cudaStream_t stream) {
#define MIXQ_WGMMA_CASE(MT_)                                                               \
  case MT_:                                                                                \
    return bits == 4 ? launch_config<T, MT_, 4, HALF_PAIRS>(p, grid, stream)               \
                     : launch_config<T, MT_, 8, HALF_PAIRS>(p, grid, stream);
  switch (mt) {
    MIXQ_WGMMA_CASE(64)
    MIXQ_WGMMA_CASE(128)
    MIXQ_WGMMA_CASE(256)
  }
#undef MIXQ_WGMMA_CASE
  MIXQ_FAIL(ErrorCode::Internal, "wo_wgmma: no configuration for mt=", mt);
}

}  // namespace

namespace {
void launch_v1(const WoStreamParams& p, int mt, int bits, dim3 grid, cudaStream_t stream);
}  // namespace

bool wo_wgmma_available(int device) {
  static PerDeviceFlag cache;
  return runs_sm90_image(cache, device, reinterpret_cast<const void*>(wo_wgmma_kernel<half, 64, 4, true>));
}

size_t wo_wgmma_smem_bytes(int mt, int bits) {
  switch (mt) {
    case 64: return bits == 4 ? WgmmaTile<64>::smem_bytes<4>() : WgmmaTile<64>::smem_bytes<8>();
    case 128: return bits == 4 ? WgmmaTile<128>::smem_bytes<4>() : WgmmaTile<128>::smem_bytes<8>();
    default: return bits == 4 ? WgmmaTile<256>::smem_bytes<4>() : WgmmaTile<256>::smem_bytes<8>();
  }
}

void launch_wo_wgmma(const WoStreamParams& p, int mt, int codes, dim3 grid, bool stream_k,
                     cudaStream_t stream) {
  int device = 0;
  MIXQ_CUDA_CHECK(cudaGetDevice(&device));
  if (stream_k) {
    MIXQ_CHECK(wo_wgmma_ws_available(device), ErrorCode::Internal,
               "wo_wgmma: the warp-specialized kernel is not in this binary for device ", device);
    launch_wo_wgmma_ws(p, mt, codes, int(grid.x), int(grid.z), stream);
    return;
  }
  MIXQ_CHECK(codes == 4 || codes == 8, ErrorCode::Internal, "wo_wgmma v1: integer codes only, got ", codes);
  const int bits = codes;
  if (mt < 64) {  // v1 has no 16/32-token tiles
    mt = 64;
    grid.z = unsigned((p.M + 63) / 64);
  }
  launch_v1(p, mt, bits, grid, stream);
  if (p.splits > 1) {
    const int64_t total = int64_t(p.M) * p.N;
    const int blocks = int(std::min<int64_t>((total + 255) / 256, 4096));
    splitk_reduce_kernel<<<blocks, 256, 0, stream>>>(p);
    MIXQ_CUDA_CHECK(cudaGetLastError());
  }
}

namespace {
void launch_v1(const WoStreamParams& p, int mt, int bits, dim3 grid, cudaStream_t stream) {
  const bool half_pairs = p.x_type == IoType::F16 && !p.pair_f32;
  if (p.x_type == IoType::F16) {
    if (half_pairs) launch_for_type<half, true>(p, mt, bits, grid, stream);
    else launch_for_type<half, false>(p, mt, bits, grid, stream);
  } else {
    MIXQ_CHECK(p.x_type == IoType::BF16, ErrorCode::Internal, "wo_wgmma: f16/bf16 activations only");
    launch_for_type<__nv_bfloat16, false>(p, mt, bits, grid, stream);
  }
}
}  // namespace

}  // namespace mixq::cuda
