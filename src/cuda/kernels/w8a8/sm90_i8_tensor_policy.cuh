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

  // The tile's column constants. Thread t of a consumer warpgroup loads column n0 + t's S_I S_W,
  // bias and code sum when the tile starts (prefetch), and they wait in its registers through the
  // K loop; store() and store_split() write them, with the float path's constants made from them
  // once a column, into the warpgroup's region of shared memory, where every pass (or every
  // reducing thread) reads them. (The passes loaded them from global memory before; a timer in
  // the kernel had 6.7 us of a 128 x 128 tile's epilogue against a 7.5 us K loop, 3x3 256->256 @14
  // at batch 32 on the H100, but moving these loads did not shorten the call: 21.0 -> 21.4 us.
  // What that epilogue waits for, if the timer's clock64 stamps split it from the K loop right,
  // is not yet known: bench/results/cuda_conv.md, "K split over a cluster".)
  struct Columns {
    double ws, bias;
    uint32_t wsum;
  };
  static constexpr int kMaxColumns = 128;
  // per warpgroup: RequantCol[128], then ws[128], bias[128] (double), then wsum[128]
  static constexpr int kTileColumnBytes = kMaxColumns * (16 + 8 + 8 + 4);
  // A warpgroup's region: RequantCol[128] (as float4), ws[128], bias[128], wsum[128].
  struct ColumnRegion {
    float4* rq;
    double *ws, *bias;
    uint32_t* wsum;
    __device__ __forceinline__ explicit ColumnRegion(uint8_t* region)
        : rq(reinterpret_cast<float4*>(region)),
          ws(reinterpret_cast<double*>(region + 16 * kMaxColumns)),
          bias(ws + kMaxColumns),
          wsum(reinterpret_cast<uint32_t*>(bias + kMaxColumns)) {}
    // thread t of the warpgroup writes column t (its prefetch), with the float path's constants
    template <int BN>
    __device__ __forceinline__ void write(const RequantTile& rt, const Columns& mine) const {
      const int t = int(threadIdx.x % 128);
      if (t < BN) {
        const RequantCol c = rt.column(mine.ws, mine.bias);
        rq[t] = make_float4(c.m, c.b, c.e1, c.e0);
        ws[t] = mine.ws;
        bias[t] = mine.bias;
        wsum[t] = mine.wsum;
      }
    }
  };

  template <int BN>
  __device__ __forceinline__ static Columns prefetch(const Params& pp, const BlockGemmParams& p,
                                                     int n0) {
    static_assert(BN <= kMaxColumns, "one column a thread");
    Columns c{0.0, 0.0, 0u};
    const int t = int(threadIdx.x % 128);
    if (t < BN) {
      const int nc = n0 + t < p.N ? n0 + t : p.N - 1;  // columns past N compute on N - 1
      c.ws = pp.wscale[nc];
      if (p.bias) c.bias = double(load_as_float(p.bias, p.bias_type, nc));
      c.wsum = uint32_t(pp.wsum[nc]);
    }
    return c;
  }
  // The taps of output pixel m whose input lies inside the image (bit t: tap t = r Kw + s).
  __device__ __forceinline__ static uint64_t valid_taps(const Im2colConv& g, int m) {
    const int wo = m % g.Wo, tq = m / g.Wo;
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

  // The code sums of column nc's taps in `tap_bits` (the taps of a pixel outside the image).
  __device__ __forceinline__ static uint32_t tap_code_sum(const Params& pp, int nc, int taps,
                                                          uint64_t tap_bits) {
    uint32_t sum = 0;
    for (; tap_bits; tap_bits &= tap_bits - 1)
      sum += uint32_t(pp.wsum_tap[int64_t(nc) * taps + __ffsll((long long)tap_bits) - 1]);
    return sum;
  }
  // A row's four codes at y (columns n .. n + 3): one 4-byte store where y's rows allow it (vec4)
  // and all four lie below N, else a byte each below N.
  __device__ __forceinline__ static void store_codes4(int8_t* y, const int8_t (&code)[4], bool vec4,
                                                      int n, int N) {
    if (vec4 && n + 3 < N) {
      *reinterpret_cast<uint32_t*>(y) =
          uint32_t(uint8_t(code[0])) | uint32_t(uint8_t(code[1])) << 8 |
          uint32_t(uint8_t(code[2])) << 16 | uint32_t(uint8_t(code[3])) << 24;
    } else {
#pragma unroll
      for (int c = 0; c < 4; ++c)
        if (n + c < N) y[c] = code[c];
    }
  }

  // The rows of one consumer warpgroup's 64 x BN outputs go through its 8 KB staging box, 32
  // columns of int32 totals at a time. Then each thread requantizes a 4 x 4 block of the pass:
  // columns 4 (lane % 8) .. + 3 (their constants narrowed once) of rows 16 s + 4 warp + lane / 8,
  // s = 0..3: one 16-byte shared load per row, one 4-byte store of four int8 codes, and sixteen
  // independent float paths (RequantTile, ~12 instructions each) that the scheduler interleaves.
  // The rare outputs that need the double expression are computed after all sixteen.
  // Measured on the H200 (ncu, 1x1 1024->256 @14, batch 32, 8 K blocks a tile): with the
  // requantization unrolled over the fragment's 64 registers (~6000 instructions per tile), 41%
  // of warp cycles waited for instruction fetch and a tile took 30 us or more; with one column a
  // lane and one row at a time, 81% of the kernel's instructions (~72 an output) were still in the
  // epilogue and a tile took 25 us.
  // Staging layout: row r (128 bytes) holds its 8 chunks of 4 columns, chunk c at c ^ (r % 8): the
  // fragment's 8-byte stores (8 rows x 4 column pairs a warp) and the 16-byte loads (4 rows x 8
  // chunks) each touch every bank the minimum number of times.
  template <int BN, int R>
  __device__ __forceinline__ static void store(const Params& pp, const BlockGemmParams& p,
                                               const float (&total)[R], int64_t m0, int n0,
                                               uint32_t* staging, int bar, const Columns& mine,
                                               uint8_t* region) {
    static_assert(R % 16 == 0, "passes of 32 columns");
    static_assert(2 * R == BN, "the fragment holds the tile's columns");
    constexpr int kRows = 4;  // rows a thread requantizes per pass (16 apart)
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    const int frow = warp * 16 + lane / 4, fpair = lane % 4;  // the fragment's row and column pair
    const int row0 = 4 * warp + lane / 8, quad = lane % 8;    // this thread's rows and 4 columns
    const uint32_t box = smem_u32(staging);
    const Requant rq(p.clamp_lo, p.clamp_hi, pp.out_scale, pp.out_zero);  // the exact path's
    const RequantTile rt(p.clamp_lo, p.clamp_hi, pp.out_scale, pp.out_zero);  // the float path's
    // The tile's column constants into the region (after the warpgroup's previous tile is done
    // with it); the first pass's barrier publishes them.
    const ColumnRegion cols(region);
    named_barrier_sync(bar, 128);
    cols.write<BN>(rt, mine);
    const float4* col_rq = cols.rq;
    const double* col_ws = cols.ws;
    const double* col_bias = cols.bias;
    const uint32_t* col_wsum = cols.wsum;
    // The box's rows inside M.
    const int rows = p.M - m0 < 64 ? int(p.M - m0) : 64;
    const int taps = p.conv.Kh * p.conv.Kw;
    const uint64_t all = taps == 64 ? ~uint64_t(0) : (uint64_t(1) << taps) - 1;
    const bool border_fix = p.conv_on && pp.in_zero != 0;
    // Z_I != 0 in a convolution: the taps of each of this thread's rows that fall outside the
    // image (their codes' sums come off the row's Z_I term), found once per tile.
    uint64_t outside[kRows];
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
      const int r = row0 + 16 * s;
      outside[s] = border_fix && r < rows ? all & ~valid_taps(p.conv, int(m0) + r) : 0;
    }
    const bool y_i8 = pp.y_i8 != 0;
    // four int8 codes as one 4-byte store where a row's columns are 4-byte aligned
    const bool vec4 = y_i8 && reinterpret_cast<uintptr_t>(p.y) % 4 == 0 && p.ldy % 4 == 0;
    // The passes run as a loop, not unrolled: a pass is about a thousand instructions, and four
    // unrolled copies (with the skeleton, 8.9k instructions, 140 KB) missed the instruction cache
    // through each tile's epilogue (H200, ncu: 43% of the warps' cycles waiting for an
    // instruction fetch). Registers cannot be indexed at run time, so each pass stages the first
    // 16 of `t` and moves the rest down.
    float t[R];
#pragma unroll
    for (int i = 0; i < R; ++i) t[i] = total[i];
#pragma unroll 1
    for (int pass = 0; pass < R / 16; ++pass) {
      const int nb = n0 + 32 * pass;
      const int j = 32 * pass + 4 * quad;  // this thread's first column in the tile
      const int n = n0 + j;                // and in y; columns past N compute on N - 1
      // the previous pass's loads are done (before the first pass: the columns are written)
      named_barrier_sync(bar, 128);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = frow + 8 * h, pr = 4 * jj + fpair;  // column pair pr: chunk pr / 2, half pr % 2
          sts64(box + uint32_t(r * 128 + (((pr >> 1) ^ (r % 8)) << 4) + (pr & 1) * 8),
                __float_as_uint(t[4 * jj + 2 * h]), __float_as_uint(t[4 * jj + 2 * h + 1]));
        }
#pragma unroll
      for (int i = 0; i + 16 < R; ++i) t[i] = t[i + 16];
      named_barrier_sync(bar, 128);
      if (nb >= p.N) break;  // the pass lies past N (the same for the whole warpgroup)
      // Output (s, c) by the reference's double expression, everything reloaded from the staged
      // total and global memory (not unrolled: registers cannot be indexed at run time): the f32
      // outputs, and the rare int8 codes within the float path's error of a rounding tie.
      auto exact = [&](int s, int c) {
        const int r = row0 + 16 * s, nc = n + c;
        if (r >= rows || nc >= p.N) return;
        const uint32_t acc = lds32(box + uint32_t(r * 128 + ((quad ^ (r % 8)) << 4) + 4 * c));
        uint32_t ws_codes = col_wsum[j + c];
        if (border_fix)
          ws_codes -= tap_code_sum(pp, nc, taps, all & ~valid_taps(p.conv, int(m0) + r));
        const int32_t a = int32_t(acc - uint32_t(pp.in_zero) * ws_codes);
        const RequantColumn col(col_ws[j + c], col_bias[j + c]);
        const int64_t i = (m0 + r) * p.ldy + nc;
        if (y_i8) static_cast<int8_t*>(p.y)[i] = rq.exact(a, col);
        else static_cast<float*>(p.y)[i] = rq.real(a, col);
      };
      uint32_t redo = 0xFFFFu;  // bit 4 s + c: outputs left to exact()
      if (y_i8) {
        redo = 0;
        RequantCol col[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const float4 v = col_rq[j + c];
          col[c] = RequantCol{v.x, v.y, v.z, v.w};
        }
        const uint4 ws4 = *reinterpret_cast<const uint4*>(col_wsum + j);
        const uint32_t wsum[4] = {ws4.x, ws4.y, ws4.z, ws4.w};
        // a = acc - Z_I sum_k wq[n] (mod 2^32, as the accumulator wraps), and for a pixel whose
        // taps cross the image border, Z_I times the codes of its outside taps added back; the
        // border work in one branch of its own so that the sixteen float paths below are one
        // straight-line block for the scheduler to interleave.
        int32_t a32[kRows][4];
#pragma unroll
        for (int s = 0; s < kRows; ++s) {
          const int r = row0 + 16 * s;
          const uint4 v = lds128(box + uint32_t(r * 128 + ((quad ^ (r % 8)) << 4)));
          const uint32_t acc[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int c = 0; c < 4; ++c) a32[s][c] = int32_t(acc[c] - uint32_t(pp.in_zero) * wsum[c]);
        }
        if (border_fix) {
#pragma unroll
          for (int s = 0; s < kRows; ++s)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
              const int nc = n + c < p.N ? n + c : p.N - 1;
              const uint32_t back = tap_code_sum(pp, nc, taps, outside[s]);
              a32[s][c] = int32_t(uint32_t(a32[s][c]) + uint32_t(pp.in_zero) * back);
            }
        }
        int8_t code[kRows][4];
#pragma unroll
        for (int s = 0; s < kRows; ++s)
#pragma unroll
          for (int c = 0; c < 4; ++c)
            if (!rt.code(a32[s][c], col[c], code[s][c])) redo |= 1u << (4 * s + c);
#pragma unroll
        for (int s = 0; s < kRows; ++s) {
          const int r = row0 + 16 * s;
          if (r >= rows) continue;
          store_codes4(static_cast<int8_t*>(p.y) + (m0 + r) * p.ldy + n, code[s], vec4, n, p.N);
        }
      }
      // (after this thread's own stores of the same outputs, which it overwrites)
#pragma unroll 1
      for (; redo != 0; redo &= redo - 1) {
        const int k = __ffs(int(redo)) - 1;
        exact(k >> 2, k & 3);
      }
    }
  }

  // The K split over a cluster (BlockGemmParams::k_split = S CTAs, CTA `rank` having summed its
  // share of the K blocks into `total`): each CTA writes its partial 128 x BN tile of int32 sums
  // into its own ring (free after its last stage), a cluster barrier, then CTA `rank` owns rows
  // [rank 128 / S, (rank + 1) 128 / S) of the tile: for each 4 columns of such a row a consumer
  // thread adds the S partials (16-byte loads from every CTA's shared memory), subtracts the Z_I
  // terms and requantizes as store() does. The int32 sums add exactly (mod 2^32, as one
  // accumulator would wrap), so the bytes are those of the unsplit kernel. A second cluster
  // barrier keeps every CTA's partials until all have been read.
  // Partial rows are BN int32 and 32 bytes of padding apart: a warp's 8-byte fragment stores
  // (8 rows x 32 bytes) then fall in distinct banks.
  static constexpr bool kSplitK = true;
  template <int BN, int R>
  __device__ __forceinline__ static void store_split(const Params& pp, const BlockGemmParams& p,
                                                     const float (&total)[R], int64_t tile_m0,
                                                     int n0, const Columns& mine, uint8_t* region,
                                                     uint8_t* partials, int split, int rank) {
    static_assert(2 * R == BN, "the fragment holds the tile's columns");
    constexpr int kPitch = BN * 4 + 32;
    constexpr int kSplitBarrier = 3;  // both consumer warpgroups (the staging boxes use 1 and 2)
    const int ctid = int(threadIdx.x) - 128;  // 0 .. 255 over the two consumer warpgroups
    const int cw = ctid / 128, warp = (ctid / 32) % 4, lane = ctid % 32;
    const Requant rq(p.clamp_lo, p.clamp_hi, pp.out_scale, pp.out_zero);
    const RequantTile rt(p.clamp_lo, p.clamp_hi, pp.out_scale, pp.out_zero);
    const ColumnRegion cols(region);
    cols.write<BN>(rt, mine);
    // Both warpgroups' MMAs are done with the ring before either overwrites it.
    named_barrier_sync(kSplitBarrier, 256);
    const uint32_t base = smem_u32(partials);
    const int frow = cw * 64 + warp * 16 + lane / 4, fcol = 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < R / 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        sts64(base + uint32_t((frow + 8 * h) * kPitch + (8 * j + fcol) * 4),
              __float_as_uint(total[4 * j + 2 * h]), __float_as_uint(total[4 * j + 2 * h + 1]));
    cluster_sync();  // every CTA's partials (and this warpgroup's columns) are written
    const int rows = 128 / split, row0 = rank * rows;
    const int taps = p.conv.Kh * p.conv.Kw;
    const uint64_t all = taps == 64 ? ~uint64_t(0) : (uint64_t(1) << taps) - 1;
    const bool border_fix = p.conv_on && pp.in_zero != 0;
    const bool y_i8 = pp.y_i8 != 0;
    const bool vec4 = y_i8 && reinterpret_cast<uintptr_t>(p.y) % 4 == 0 && p.ldy % 4 == 0;
    constexpr int kQuads = BN / 4;
#pragma unroll 1
    for (int item = ctid; item < rows * kQuads; item += 256) {
      const int r = row0 + item / kQuads, j = 4 * (item % kQuads);
      const int64_t m = tile_m0 + r;
      const int n = n0 + j;
      if (m >= p.M || n >= p.N) continue;
      uint32_t acc[4] = {0u, 0u, 0u, 0u};
      const uint32_t off = base + uint32_t(r * kPitch + j * 4);
      for (int c = 0; c < split; ++c) {
        const uint4 v = ld_cluster128(cluster_map_shared(off, uint32_t(c)));
        acc[0] += v.x;
        acc[1] += v.y;
        acc[2] += v.z;
        acc[3] += v.w;
      }
      const uint64_t outside = border_fix ? all & ~valid_taps(p.conv, int(m)) : 0;
      int32_t a[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int nc = n + c < p.N ? n + c : p.N - 1;
        const uint32_t codes = cols.wsum[j + c] - tap_code_sum(pp, nc, taps, outside);
        a[c] = int32_t(acc[c] - uint32_t(pp.in_zero) * codes);
      }
      if (y_i8) {
        int8_t code[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const float4 v = cols.rq[j + c];
          if (!rt.code(a[c], RequantCol{v.x, v.y, v.z, v.w}, code[c]))
            code[c] = rq.exact(a[c], RequantColumn(cols.ws[j + c], cols.bias[j + c]));
        }
        store_codes4(static_cast<int8_t*>(p.y) + m * p.ldy + n, code, vec4, n, p.N);
      } else {
        float* y = static_cast<float*>(p.y) + m * p.ldy + n;
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (n + c < p.N) y[c] = rq.real(a[c], RequantColumn(cols.ws[j + c], cols.bias[j + c]));
      }
    }
    cluster_sync();  // no CTA leaves (taking its shared memory) while a peer reads its partials
  }
};

}  // namespace mixq::cuda::sm90
