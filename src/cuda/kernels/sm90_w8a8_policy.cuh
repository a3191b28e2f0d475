// Promotion policy of the Hopper block GEMM (sm90_block_gemm.cuh) for INT8 W8A8 per block
// (int8_gemm.hpp, block mode, K block g = 128 = one pipeline stage):
//   total[m][n] += sx*(sw*dot) + (sx*Σqx)*ow + ox*dw       (dot = the block's s8.s8 -> s32 sum)
// Row meta (sx, ox, Σqx; act_quant.hpp layout: [kb][ld_meta] M-contiguous) and column meta (sw,
// dw, ow; [kb][Np] N-contiguous) are TMA-loaded per stage as {128 rows} / {BN columns} boxes next
// to the codes. Rows past M read as zeros (TMA out-of-bounds fill), so garbage in the meta's pad
// rows never reaches a stored value.
//
// The accumulator is s32 (wgmma m64nNk32.s32.s8.s8). |dot| <= 128 * 128 * 128 = 2^21 < 2^22, so
// the int -> float conversion is the exact "magic number" one (IADD + FADD instead of the
// quarter-rate I2F), as in the sm_80 kernel, and the f32 arithmetic is in the same order as there.
// The per-column values (3 floats x BN/2 columns per thread) do not fit in registers next to the
// 2 x BN/2 accumulators, so promote() reads them from the stage's shared memory: the policy sets
// kPromoteReadsSmem and the skeleton releases the slot only after promote().
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/kernels/sm90_sync.cuh"
#include "cuda/kernels/sm90_wgmma_ops.cuh"

namespace mixq::cuda::sm90 {

template <int BN, bool kOffset>
struct Int8BlockPolicy {
  static_assert(BN % 32 == 0 && BN <= 256, "TMA box of the column meta: BN <= 256 floats");
  template <int N>
  using Mma = WgmmaS8<N>;
  struct Params {
    CUtensorMap sx, ox, sumx;  // {M, num_kb}, box {128, 1} (f32, f32, s32)
    CUtensorMap sw, dw, ow;    // {Np, num_kb}, box {BN, 1} (f32); ow unused without offsets
  };
  static constexpr bool kPromoteReadsSmem = true;
  // Two accumulator sets (2 x 64 s32) next to the 64 f32 totals and this promotion's operands
  // spill (~1 KB per thread, measured with ptxas -v): the INT8 kernel runs the serial loop.
  static constexpr bool kTwoAccumulators = false;
  static constexpr int kAMetaBytes = 3 * 128 * 4;
  static constexpr int kBMetaBytes = 3 * BN * 4;  // a 128-byte multiple for BN % 32 == 0
  static constexpr uint32_t kMetaTxBytes = 3 * 128 * 4 + (kOffset ? 3 : 2) * BN * 4;

  // Explicit shared-window load: through a generic pointer kept in a struct, the compiler emits a
  // generic LD (address-space check per load) instead of LDS.
  __device__ __forceinline__ static float lds(uint32_t addr) {
    float v;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
    return v;
  }
  __device__ __forceinline__ static float2 lds2(uint32_t addr) {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr));
    return v;
  }
  __device__ __forceinline__ static void load_meta(const Params& pp, void* a_meta, void* b_meta,
                                                   uint64_t* bar, int m0, int n0, int kb) {
    uint8_t* a = static_cast<uint8_t*>(a_meta);
    uint8_t* b = static_cast<uint8_t*>(b_meta);
    tma_load_2d(a, &pp.sx, bar, m0, kb);
    tma_load_2d(a + 512, &pp.ox, bar, m0, kb);
    tma_load_2d(a + 1024, &pp.sumx, bar, m0, kb);
    tma_load_2d(b, &pp.sw, bar, n0, kb);
    tma_load_2d(b + BN * 4, &pp.dw, bar, n0, kb);
    if constexpr (kOffset) tma_load_2d(b + 2 * BN * 4, &pp.ow, bar, n0, kb);
  }

  struct Scale {
    float sx0, sx1, ox0, ox1, u0, u1;  // rows `row`, `row + 8`: sx, ox, sx * Σqx
    uint32_t col;                      // shared address of the stage's sw[BN], dw[BN], ow[BN]
  };
  __device__ __forceinline__ static Scale read(const void* a_meta, const void* b_meta, int row,
                                               int /*n0*/, int /*kb*/) {
    const uint32_t a = smem_u32(a_meta) + 4 * row;  // sx[128], ox[128], Σqx[128]
    Scale s;
    s.sx0 = lds(a);
    s.sx1 = lds(a + 32);
    s.ox0 = lds(a + 512);
    s.ox1 = lds(a + 512 + 32);
    s.u0 = kOffset ? s.sx0 * float(__float_as_int(lds(a + 1024))) : 0.f;
    s.u1 = kOffset ? s.sx1 * float(__float_as_int(lds(a + 1024 + 32))) : 0.f;
    s.col = smem_u32(b_meta);
    return s;
  }

  // Exact for |v| < 2^22.
  __device__ __forceinline__ static float to_float(int32_t v) {
    return __int_as_float(v + 0x4B400000) - 12582912.0f;
  }

  // Accumulator layout (m64nN): registers 4j, 4j+1 are row `row`, 4j+2, 4j+3 row `row + 8`,
  // columns 8j + 2 (lane % 4) + {0, 1} of the tile.
  template <int R>
  __device__ __forceinline__ static void promote(float (&total)[R], const int32_t (&acc)[R],
                                                 const Scale& s) {
    const int c0 = 2 * (threadIdx.x % 4);
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
      const int c = 8 * j + c0;
      const float2 sw = lds2(s.col + 4 * c);
      const float2 dw = lds2(s.col + 4 * (BN + c));
      float2 ow = make_float2(0.f, 0.f);
      if constexpr (kOffset) ow = lds2(s.col + 4 * (2 * BN + c));
      const float w[2] = {sw.x, sw.y}, d[2] = {dw.x, dw.y}, o[2] = {ow.x, ow.y};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float a = h ? s.sx1 : s.sx0, cx = h ? s.ox1 : s.ox0, u = h ? s.u1 : s.u0;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int i = 4 * j + 2 * h + e;
          float v = fmaf(a, to_float(acc[i]) * w[e], total[i]);
          v = fmaf(cx, d[e], v);
          if constexpr (kOffset) v = fmaf(u, o[e], v);
          total[i] = v;
        }
      }
    }
  }
};

}  // namespace mixq::cuda::sm90
