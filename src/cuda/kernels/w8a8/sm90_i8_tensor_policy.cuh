// Policy of the Hopper block GEMM (sm90_block_gemm.cuh) for the INT8 per-tensor mode
// (int8_params.hpp: quantized CNN inference, requantized int8 or f32 output):
//   acc[m][n] = sum over all of K of xq * wq   (s32, exact: K <= 65536)
// then, per output, exactly the reference's double-precision requantization.
//
// No metadata rides with the stages: the block's wgmma s8 sums (a fresh s32 accumulator per 128-K
// stage, as the skeleton issues them) are added to the running total as integers, stored in the
// skeleton's f32 total registers by bit pattern (total starts at +0.f, whose bits are integer 0).
// An integer add per accumulator per stage instead of the block mode's I2FP, FMUL, FFMA: the
// tensor cores, not the promotion, set the pace.
//
// The epilogue (store): acc - Z_I * sum_k wq[n] (mod 2^32, as the accumulator wraps), then in
// double, each operation rounded once in the reference's order: real = clamp((S_I S_W[n]) acc +
// bias), y = clamp(rint(real / S_O) + Z_O, -128, 127) for int8 y, else (float) real. The same
// expression as the sm_80 kernels' (common/int8_requant.cuh), so every kernel gives the same bytes.
#pragma once

#include <cstdint>

#include "cuda/kernels/common/im2col_conv.hpp"
#include "cuda/kernels/common/int8_requant.cuh"
#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/common/sm90_wgmma.cuh"
#include "cuda/kernels/w8a8/sm90_block_gemm.cuh"

namespace mixq::cuda::sm90 {

struct Int8TensorPolicy {
  template <int N>
  using Mma = WgmmaS8<N>;
  struct Params {
    const int32_t* wsum = nullptr;   // [N] sum of the row's codes
    const double* wscale = nullptr;  // [N] S_I * S_W[n]
    int in_zero = 0;
    double out_scale = 1.0;
    int out_zero = 0;
    int y_i8 = 0;                    // 1: int8 codes, 0: f32 real values
    // Convolutions (BlockGemmParams::conv_on) with Z_I != 0: [N][taps] code sums per tap. The
    // im2col map zero-fills the padding, where the reference reads Z_I (the real value 0); a
    // pixel whose receptive field crosses the border subtracts Z_I times the sums of its valid
    // taps only (at most 64 taps).
    const int32_t* wsum_tap = nullptr;
  };
  static constexpr int kAMetaBytes = 0, kBMetaBytes = 0;
  static constexpr uint32_t kMetaTxBytes = 0;
  __device__ __forceinline__ static void load_meta(const Params&, void*, void*, uint64_t*, int, int, int) {}

  struct Scale {};
  __device__ __forceinline__ static Scale read(const void*, const void*, int, int, int, int) { return {}; }

  template <int S, int R>
  __device__ __forceinline__ static void promote(float (&total)[S][R], const int32_t (&acc)[S][R], const Scale&) {
#pragma unroll
    for (int sub = 0; sub < S; ++sub)
#pragma unroll
      for (int i = 0; i < R; ++i)
        total[sub][i] = __int_as_float(int(uint32_t(__float_as_int(total[sub][i])) + uint32_t(acc[sub][i])));
  }

  // The tile's outputs from the integer totals (registers 4j, 4j + 1: fragment row, columns c, c + 1
  // with c = 2 (lane % 4) + 8j; 4j + 2, 4j + 3: eight rows further). Replaces the skeleton's float
  // epilogue.
  static constexpr bool kStoresTile = true;
  // The taps of output pixel m whose input lies inside the image (bit t: tap t = r Kw + s).
  __device__ __forceinline__ static uint64_t valid_taps(const Im2colConv& g, int64_t m) {
    const int wo = int(m % g.Wo), tq = int(m / g.Wo);
    const int ho = tq % g.Ho;
    const int h0 = ho * g.stride_h - g.pad_h, w0 = wo * g.stride_w - g.pad_w;
    uint64_t mask = 0;
    for (int r = 0; r < g.Kh; ++r) {
      const int ih = h0 + r * g.dil_h;
      if (ih < 0 || ih >= g.H) continue;
      for (int s = 0; s < g.Kw; ++s) {
        const int iw = w0 + s * g.dil_w;
        if (iw >= 0 && iw < g.W) mask |= uint64_t(1) << (r * g.Kw + s);
      }
    }
    return mask;
  }

  // The rows of one consumer warpgroup's 64 x BN outputs go through its 8 KB staging box, 32
  // columns of int32 totals at a time, and a loop (not unrolled) requantizes them: each thread one
  // column of four rows a step, 32 consecutive outputs a warp (coalesced stores). Unrolled over
  // the fragment's 64 registers, the requantization was ~6000 instructions executed once per
  // tile: on the H200 the warps spent 41% of their cycles waiting for instruction fetch, and
  // every tile took 30 us or more whatever its K (ncu, 1x1 1024->256 @14, batch 32).
  // Staging layout: row r's 16 pairs of columns, pair u at (u ^ (r % 8)): a fragment's stores
  // (four rows per pair column) spread over 16 banks, a row's loads over all 32.
  template <int R>
  __device__ __forceinline__ static void store(const Params& pp, const BlockGemmParams& p,
                                               const float (&total)[R], int64_t m0, int n0,
                                               uint32_t* staging, int bar) {
    static_assert(R % 16 == 0, "passes of 32 columns");
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    const int frow = warp * 16 + lane / 4, fpair = lane % 4;  // the fragment's row and column pair
    const Requant rq(p.clamp_lo, p.clamp_hi, pp.out_scale, pp.out_zero);
    const int taps = p.conv.Kh * p.conv.Kw;
    const uint64_t all = taps == 64 ? ~uint64_t(0) : (uint64_t(1) << taps) - 1;
    const bool border_fix = p.conv_on && pp.in_zero != 0;
#pragma unroll
    for (int pass = 0; pass < R / 16; ++pass) {
      named_barrier_sync(bar, 128);  // the previous pass's (or tile's) loads are done
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = frow + 8 * h, u = (fpair + 4 * jj) ^ (r % 8);
          const int j = 4 * pass + jj;
          const uint2 v = make_uint2(__float_as_uint(total[4 * j + 2 * h]), __float_as_uint(total[4 * j + 2 * h + 1]));
          *reinterpret_cast<uint2*>(staging + r * 32 + 2 * u) = v;
        }
      named_barrier_sync(bar, 128);
      const int n = n0 + 32 * pass + lane;
      if (n >= p.N) continue;  // the whole pass's loads of this lane; the barriers stay uniform
      const double ws = pp.wscale[n];
      const double bias = p.bias ? double(load_io(p.bias, p.bias_type, n)) : 0.0;
      const uint32_t wsum = uint32_t(pp.wsum[n]);
#pragma unroll 1
      for (int r = warp; r < 64; r += 4) {
        const int64_t m = m0 + r;
        if (m >= p.M) break;
        const uint32_t acc = staging[r * 32 + 2 * ((lane / 2) ^ (r % 8)) + lane % 2];
        uint32_t ws_codes = wsum;
        if (border_fix) {
          const uint64_t valid = valid_taps(p.conv, m);
          if (valid != all) {
            ws_codes = 0;
            for (uint64_t v = valid; v; v &= v - 1)
              ws_codes += uint32_t(pp.wsum_tap[int64_t(n) * taps + __ffsll((long long)v) - 1]);
          }
        }
        const int32_t a32 = int32_t(acc - uint32_t(pp.in_zero) * ws_codes);  // wraps like the accumulator
        rq.store(p.y, m * p.ldy + n, pp.y_i8 != 0, a32, ws, bias);
      }
    }
  }
};

}  // namespace mixq::cuda::sm90
