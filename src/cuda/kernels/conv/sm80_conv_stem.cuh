// The few-input-channel conv kernel (layout and K order: conv_stem.hpp) on mma.sync m16n8k16.
//
// A block owns 64 output channels (blockIdx.y) and walks pixel tiles blockIdx.x, + gridDim.x, ...
// (persistent: its channels of the weight image, dequantized at prepare, are copied into shared
// memory once, before the first tile). Per tile:
//   1. the Kh patch rows are loaded from x (coalesced 32-bit words; zeros outside the image)
//      after a barrier that ends the previous tile's reads;
//   2. each warp multiplies its 16 * mf pixels by the 64 channels: per 16-wide
//      K step, A fragments are 32-bit loads from the patch at (pixel run start + column offset)
//      masked by the K table, B fragments ldmatrix loads of the dequantized weight;
//   3. bias, clamp, conversion and stores straight from the accumulators.
// conv_stem_tma_kernel (sm_90, NHWC) replaces step 1 with a TMA box a warp, a tile ahead, and
// stages step 3's NHWC outputs through the consumed box for 16-byte stores.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/common/dequant_codes.cuh"  // pack2
#include "cuda/kernels/common/int8_requant.cuh"
#include "cuda/kernels/common/mma_sm80.cuh"
#include "cuda/kernels/common/sm90_sync.cuh"  // lds32 (plain PTX, any sm_80+)
#include "cuda/kernels/conv/conv_stem.hpp"
#include "cuda/kernels/conv/sm80_conv_igemm.cuh"

namespace mixq::cuda::conv {

// Elements i and i + 1 of an output: one 4-byte (16-bit types) or 8-byte (f32) store where the
// address is aligned to it, else two.
__device__ __forceinline__ void store_io_pair(void* y, IoType t, int64_t i, float v0, float v1) {
  const int eb = t == IoType::F32 ? 4 : 2;
  char* a = static_cast<char*>(y) + i * eb;
  if (reinterpret_cast<uintptr_t>(a) % (2 * eb) == 0) {
    switch (t) {
      case IoType::F16: *reinterpret_cast<half2*>(a) = __floats2half2_rn(v0, v1); return;
      case IoType::BF16: *reinterpret_cast<__nv_bfloat162*>(a) = __floats2bfloat162_rn(v0, v1); return;
      default: *reinterpret_cast<float2*>(a) = make_float2(v0, v1); return;
    }
  }
  store_io(y, t, i, v0);
  store_io(y, t, i + 1, v1);
}

// One patch row: input row ih of image b from input column iw0 (channel 0), element e of the
// run of (iw, ci) elements. NHWC: the run is contiguous in x; NCHW: e / CI picks the plane (a
// multiply: CI is a template constant). Raw 16 bits, 0 outside the image.
template <int CI>
struct StemPatchRow {
  const uint16_t* base = nullptr;  // x at (b, ih, 0, 0) (NHWC) or (b, 0, ih, 0) (NCHW)
  int lo = 0, hi = 0;              // NHWC: the elements e inside the image are [lo, hi)
  int iw0 = 0, W = 0;
  int64_t plane = 0;               // NCHW: elements between channel planes
  bool nchw = false, inside = false;

  __device__ __forceinline__ StemPatchRow(const ConvIgemmParams& p, int b, int ih, int iw0_) {
    iw0 = iw0_;
    W = p.W;
    nchw = p.nchw;
    inside = ih >= 0 && ih < p.H;
    plane = int64_t(p.H) * p.W;
    if (!inside) return;
    const uint16_t* x = static_cast<const uint16_t*>(p.x);
    if (nchw) {
      base = x + int64_t(b) * CI * plane + int64_t(ih) * p.W;
    } else {
      base = x + (int64_t(b) * p.H + ih) * int64_t(p.W) * CI;
      lo = -iw0 * CI;
      hi = (p.W - iw0) * CI;
    }
  }

  __device__ __forceinline__ uint16_t operator()(int e) const {
    if (!inside) return 0;
    if (!nchw) return e >= lo && e < hi ? __ldg(base + int64_t(iw0) * CI + e) : uint16_t(0);
    const int px = e / CI, c = e - px * CI, iw = iw0 + px;
    return iw >= 0 && iw < W ? __ldg(base + c * plane + iw) : uint16_t(0);
  }

  // Patch word (elements e, e + 1) and the shifted copy's word (e + 1, e + 2). NHWC away from
  // the image's edges: the two aligned 32-bit words around them (x need only be 2-byte aligned,
  // so which two depends on the address) and a funnel shift; else element by element.
  __device__ __forceinline__ void words(int e, bool shifted, uint32_t* w, uint32_t* ws) const {
    if (inside && !nchw && e - 1 >= lo && e + 3 < hi) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(base + int64_t(iw0) * CI + e);
      const uint32_t* al = reinterpret_cast<const uint32_t*>(a & ~uintptr_t(3));
      const uint32_t lw = __ldg(al), hw = __ldg(al + 1);
      const uint32_t mid = __funnelshift_r(lw, hw, 16);  // (lw >> 16) | (hw << 16)
      const bool odd = (a & 2) != 0;
      *w = odd ? mid : lw;
      *ws = odd ? hw : mid;
      return;
    }
    const uint32_t v0 = (*this)(e), v1 = (*this)(e + 1);
    *w = v0 | (v1 << 16);
    *ws = shifted ? v1 | (uint32_t((*this)(e + 2)) << 16) : 0u;
  }
};

// Loads the tile's patch (kh rows of patch_pitch elements from input row ih0 + kh * dil_h,
// column iw0) into shared memory, and its shifted copy. Word w is (row kh, element e); a thread's
// next word is 2 * kStemThreads elements on, so (kh, e) and the row's source are advanced, not
// recomputed with a division (the loop is issue-bound: fetching several words before storing
// them, with a division each, measured 10-18% slower on the stem).
template <int CI>
__device__ __forceinline__ void stem_load_patch(const ConvStemParams& s, int b, int ih0, int iw0,
                                                uint32_t* patch_words, int tid) {
  const ConvIgemmParams& p = s.g;
  const int words = p.Kh * s.patch_pitch / 2;
  int kh = 0, e = 2 * tid;
  while (e >= s.patch_pitch) e -= s.patch_pitch, ++kh;
  StemPatchRow<CI> src(p, b, ih0 + kh * p.dil_h, iw0);
  for (int w = tid; w < words; w += kStemThreads) {
    uint32_t v, vs;
    src.words(e, s.shifted, &v, &vs);
    patch_words[w] = v;
    if (s.shifted) patch_words[words + w] = vs;
    e += 2 * kStemThreads;
    if (e >= s.patch_pitch) {
      while (e >= s.patch_pitch) e -= s.patch_pitch, ++kh;
      src = StemPatchRow<CI>(p, b, ih0 + kh * p.dil_h, iw0);
    }
  }
}

// The block's 64 output channels of the dequantized weight image (conv_stem.hpp), rows of kpad
// columns, copied once (every 16-byte piece in flight at once: one memory latency), and the K
// table: for column pair (2i, 2i + 1), its offset in a patch row set (kh * pitch + j, `pitch`
// elements a patch row) and which halves are real filter columns.
// In the K order shifted by sigma (conv_stem.hpp), row column j is filter column j - sigma: the
// halves of a pair that are real filter columns are those in [sigma, Kw * Ci + sigma).
template <typename T>
__device__ __forceinline__ void stem_load_tables(const ConvStemParams& s, int n0, int pitch, T* Bs,
                                                 int2* ktab, int tid) {
  const ConvIgemmParams& p = s.g;
  const int pieces = s.kpad / 8;  // 16-byte pieces per row
  const uint16_t* src = s.w_image + int64_t(n0) * s.img_pitch;
  for (int i = tid; i < kStemBN * pieces; i += kStemThreads) {
    const int nl = i / pieces, c = i - nl * pieces;
    cp_async_16_u32(smem_addr(Bs + nl * s.b_pitch + 8 * c), src + int64_t(nl) * s.img_pitch + 8 * c);
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  const int lo = s.sigma, hi = p.Kw * p.Ci + s.sigma;
  for (int i = tid; i < s.kpad / 2; i += kStemThreads) {
    const int k = 2 * i, kh = k / s.lp, j = k - kh * s.lp;
    int2 e = make_int2(0, 0);
    if (kh < p.Kh) {
      e.x = kh * pitch + j;
      e.y = int((j >= lo && j < hi ? 0x0000FFFFu : 0u) | (j + 1 >= lo && j + 1 < hi ? 0xFFFF0000u : 0u));
    }
    ktab[i] = e;
  }
}

// Shared-memory byte offsets, from the patch the warp reads, of its fragment rows' runs (rows g
// and g + 8 of each m16 fragment; `first` = the warp's first pixel in that patch). An odd start
// reads the shifted copy (`copy_bytes` on) one element earlier.
template <int MF>
__device__ __forceinline__ void stem_row_offsets(const ConvStemParams& s, int first, int g,
                                                 int copy_bytes, uint32_t (&off)[MF][2]) {
  const int run_step = s.g.stride_w * s.g.Ci;  // elements between consecutive pixels' runs
#pragma unroll
  for (int mi = 0; mi < MF; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int start = (first + 16 * mi + 8 * h + g) * run_step;
      off[mi][h] = s.shifted && (start & 1) ? uint32_t(copy_bytes + (start - 1) * 2) : uint32_t(start * 2);
    }
}

// The warp's 16 * MF pixels times the block's 64 channels over the padded K: per 16-wide K step,
// A fragments are 32-bit loads from the patch (`patch_addr` + row offset + column offset)
// masked by the K table, B fragments ldmatrix loads of the weight.
template <typename T, int MF>
__device__ __forceinline__ void stem_mma(const ConvStemParams& s, const int2* ktab, uint32_t patch_addr,
                                         const uint32_t (&off)[MF][2], uint32_t b_lane, int n_valid,
                                         int t4, float (&acc)[MF][8][4]) {
  for (int ks = 0; ks < s.kpad / 16; ++ks) {
    const int2 c0 = ktab[8 * ks + t4], c1 = ktab[8 * ks + t4 + 4];
    Frag16x16 a[MF];
#pragma unroll
    for (int mi = 0; mi < MF; ++mi) {
      const uint32_t r0 = patch_addr + off[mi][0], r1 = patch_addr + off[mi][1];
      a[mi].r[0] = sm90::lds32(r0 + uint32_t(c0.x * 2)) & uint32_t(c0.y);
      a[mi].r[1] = sm90::lds32(r1 + uint32_t(c0.x * 2)) & uint32_t(c0.y);
      a[mi].r[2] = sm90::lds32(r0 + uint32_t(c1.x * 2)) & uint32_t(c1.y);
      a[mi].r[3] = sm90::lds32(r1 + uint32_t(c1.x * 2)) & uint32_t(c1.y);
    }
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      if (16 * np >= n_valid) break;  // uniform: channels past Co
      uint32_t r[4];
      ldmatrix_x4_u32(r, b_lane + uint32_t((16 * np * s.b_pitch + 16 * ks) * 2));
      const Frag16x8 b0{{r[0], r[1]}}, b1{{r[2], r[3]}};
#pragma unroll
      for (int mi = 0; mi < MF; ++mi) {
        MmaType<T>::mma(acc[mi][2 * np], a[mi], b0);
        MmaType<T>::mma(acc[mi][2 * np + 1], a[mi], b1);
      }
    }
  }
}

// Calls f(mi, h, px) for each accumulator row of the lane (rows g and g + 8 of each m16 fragment:
// pixel px of the tile) inside the tile's px_valid pixels.
template <int MF, class F>
__device__ __forceinline__ void stem_for_each_row(int px_warp, int px_valid, int g, F&& f) {
#pragma unroll
  for (int mi = 0; mi < MF; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int px = px_warp + 16 * mi + 8 * h + g;
      if (px < px_valid) f(mi, h, px);
    }
}

// Bias, clamp, conversion and stores straight from the accumulators of the warp's pixels
// px_warp... of the tile at (b, oh, ow0). An NHWC output of the activations' type with even Co
// and a 4-byte aligned y stores a channel pair a lane from row pointers set once (the generic
// path's per-element index arithmetic and type switch were a large part of the kernel's
// instructions); NCHW, f32 or odd outputs take the generic stores.
template <typename T, int MF>
__device__ __forceinline__ void stem_epilogue(const ConvIgemmParams& p, const float (&acc)[MF][8][4],
                                              int b, int oh, int ow0, int px_warp, int px_valid,
                                              int n0, int g, int t4) {
  const int64_t pix0 = (int64_t(b) * p.Ho + oh) * p.Wo + ow0;  // NHWC row of the tile's pixel 0
  const bool pairs = !p.nchw && p.y_type == p.x_type && p.Co % 2 == 0 &&
                     reinterpret_cast<uintptr_t>(p.y) % 4 == 0;
  if (pairs) {
    uint32_t* yrow[MF][2];
#pragma unroll
    for (int mi = 0; mi < MF; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int px = px_warp + 16 * mi + 8 * h + g;
        yrow[mi][h] = px < px_valid ? reinterpret_cast<uint32_t*>(static_cast<T*>(p.y) +
                                                                  (pix0 + px) * p.Co + n0 + 2 * t4)
                                    : nullptr;
      }
#pragma unroll
    for (int ni = 0; ni < 8; ++ni) {
      const int n = n0 + 8 * ni + 2 * t4;
      if (n >= p.Co) break;  // Co even: n + 1 < Co too
      float bias0 = 0.f, bias1 = 0.f;
      if (p.bias) {
        bias0 = load_io(p.bias, p.bias_type, n);
        bias1 = load_io(p.bias, p.bias_type, n + 1);
      }
#pragma unroll
      for (int mi = 0; mi < MF; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (!yrow[mi][h]) continue;
          const float v0 = fminf(fmaxf(acc[mi][ni][2 * h] + bias0, p.clamp_lo), p.clamp_hi);
          const float v1 = fminf(fmaxf(acc[mi][ni][2 * h + 1] + bias1, p.clamp_lo), p.clamp_hi);
          yrow[mi][h][4 * ni] = pack2<T>(v0, v1);
        }
    }
    return;
  }
  const int64_t hw = int64_t(p.Ho) * p.Wo;
#pragma unroll
  for (int ni = 0; ni < 8; ++ni) {
    const int n = n0 + 8 * ni + 2 * t4;
    if (n >= p.Co) continue;
    const bool has1 = n + 1 < p.Co;
    float bias0 = 0.f, bias1 = 0.f;
    if (p.bias) {
      bias0 = load_io(p.bias, p.bias_type, n);
      if (has1) bias1 = load_io(p.bias, p.bias_type, n + 1);
    }
    // NCHW: (b, n, oh, ow0)
    const int64_t chw0 = ((int64_t(b) * p.Co + n) * p.Ho + oh) * p.Wo + ow0;
    stem_for_each_row<MF>(px_warp, px_valid, g, [&](int mi, int h, int px) {
      const float v0 = fminf(fmaxf(acc[mi][ni][2 * h] + bias0, p.clamp_lo), p.clamp_hi);
      const float v1 = fminf(fmaxf(acc[mi][ni][2 * h + 1] + bias1, p.clamp_lo), p.clamp_hi);
      if (p.nchw) {
        store_io(p.y, p.y_type, chw0 + px, v0);
        if (has1) store_io(p.y, p.y_type, chw0 + hw + px, v1);
      } else if (has1) {
        store_io_pair(p.y, p.y_type, (pix0 + px) * p.Co + n, v0, v1);
      } else {
        store_io(p.y, p.y_type, (pix0 + px) * p.Co + n, v0);
      }
    });
  }
}

// The INT8 stem's float-path constants of the block's 64 output channels (int8_requant.cuh,
// RequantCol), computed once into shared memory by the first 64 threads: they hold for every tile
// the persistent block walks. Computed per tile and column (~20 double-precision operations and
// conversions each, 16 columns a lane a tile of 32 outputs a lane), they made the INT8 stem ~2.8x
// slower than the 16-bit one on the same layer (H100, 7x7/2 3->64 @224 batch 32: 167 against
// 59 µs). The caller's barrier publishes them.
__device__ __forceinline__ void stem_requant_columns(const ConvStemParams& s, int n0,
                                                     RequantCol* cols, int tid) {
  const ConvIgemmParams& p = s.g;
  if (!s.y_i8 || tid >= kStemBN) return;
  const int n = n0 + tid;
  const RequantTile rt(p.clamp_lo, p.clamp_hi, s.out_scale, s.out_zero);
  cols[tid] = n < p.Co
                  ? rt.column(s.wscale[n], p.bias ? double(load_io(p.bias, p.bias_type, n)) : 0.0)
                  : RequantCol{0.f, 0.f, 0.f, 0.f};
}

// The INT8 stem's epilogue (ConvStemParams::requant): the accumulators are exact integers (f32
// sums of at most 2^24 in magnitude), requantized as every INT8 per-tensor kernel does (the float
// path of int8_requant.cuh with the block's column constants `cols`, the double expression where
// it is undecided: the reference's bytes; the rare undecided outputs load S_I S_W[n] and the bias
// again). An NHWC int8 output with even Co and an even y stores a lane's channel pair as one
// 2-byte word. f32 y: the double expression.
// `stage` (the TMA form, NHWC int8 y with Co % 16 == 0 and y 16-byte aligned; else null): the
// warp's consumed patch stage, through which its 16 pixels x 64 channels of codes per m16 fragment
// leave as 16-byte stores (2-byte stores straight from the fragments wrote 8 bytes of 8 pixels an
// instruction).
// Bytes a pixel in the stage: 2-byte writes of 8 pixels x 4 lanes fall on distinct banks.
constexpr int kStemI8OutPitch = kStemBN + 16;
static_assert(16 * kStemI8OutPitch <= kStemOutBytes, "a stage holds a fragment's codes");
template <int MF>
__device__ __forceinline__ void stem_epilogue_requant(const ConvStemParams& s,
                                                      const RequantCol* cols,
                                                      const float (&acc)[MF][8][4], int b, int oh,
                                                      int ow0, int px_warp, int px_valid, int n0,
                                                      int lane, unsigned char* stage = nullptr) {
  const int g = lane / 4, t4 = lane % 4;
  const ConvIgemmParams& p = s.g;
  const int64_t hw = int64_t(p.Ho) * p.Wo;
  const int64_t pix0 = (int64_t(b) * p.Ho + oh) * p.Wo + ow0;  // the tile's pixel 0 (NHWC row)
  const int64_t chw0 = int64_t(b) * p.Co * hw + int64_t(oh) * p.Wo + ow0;  // NCHW: channel 0's
  auto bias_of = [&](int n) { return p.bias ? double(load_io(p.bias, p.bias_type, n)) : 0.0; };
  auto index = [&](int px, int n) {
    return s.y_nchw ? chw0 + int64_t(n) * hw + px : (pix0 + px) * p.Co + n;
  };
  if (!s.y_i8) {
    const Requant rq(p.clamp_lo, p.clamp_hi, s.out_scale, s.out_zero);
#pragma unroll
    for (int ni = 0; ni < 8; ++ni)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int n = n0 + 8 * ni + 2 * t4 + e;
        if (n >= p.Co) continue;
        const RequantColumn c(s.wscale[n], bias_of(n));
        stem_for_each_row<MF>(px_warp, px_valid, g, [&](int mi, int h, int px) {
          static_cast<float*>(p.y)[index(px, n)] =
              rq.real(__float2int_rn(acc[mi][ni][2 * h + e]), c);
        });
      }
    return;
  }
  const RequantTile rt(p.clamp_lo, p.clamp_hi, s.out_scale, s.out_zero);
  auto code = [&](float a, const RequantCol& c, int n) {
    const int32_t acc32 = __float2int_rn(a);
    int8_t q;
    if (!rt.code(acc32, c, q))
      q = requant_i8_double(acc32, s.wscale[n], bias_of(n), p.clamp_lo, p.clamp_hi, s.out_scale,
                            s.out_zero);
    return q;
  };
  int8_t* const y = static_cast<int8_t*>(p.y);
  if (stage) {
    const int n_valid = min(kStemBN, p.Co - n0);
#pragma unroll
    for (int mi = 0; mi < MF; ++mi) {
#pragma unroll
      for (int ni = 0; ni < 8; ++ni) {
        if (8 * ni >= n_valid) break;  // uniform: channels past Co (Co % 16 == 0: pairs inside)
        const int nl = 8 * ni + 2 * t4;
        const RequantCol c0 = cols[nl], c1 = cols[nl + 1];
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // rows past px_valid are written and never stored
          const int8_t q0 = code(acc[mi][ni][2 * h], c0, n0 + nl),
                       q1 = code(acc[mi][ni][2 * h + 1], c1, n0 + nl + 1);
          *reinterpret_cast<uint16_t*>(stage + (8 * h + g) * kStemI8OutPitch + nl) =
              uint16_t(uint8_t(q0) | (uint16_t(uint8_t(q1)) << 8));
        }
      }
      __syncwarp();
#pragma unroll
      for (int r = 0; r < 2; ++r) {  // 16 pixels x 4 pieces of 16 channels
        const int c = lane + 32 * r, px = px_warp + 16 * mi + c / 4, part = c % 4;
        if (16 * part < n_valid && px < px_valid)
          *reinterpret_cast<uint4*>(y + (pix0 + px) * p.Co + n0 + 16 * part) =
              *reinterpret_cast<const uint4*>(stage + (c / 4) * kStemI8OutPitch + 16 * part);
      }
      __syncwarp();
    }
    return;
  }
  const bool pairs = !s.y_nchw && p.Co % 2 == 0 && reinterpret_cast<uintptr_t>(y) % 2 == 0;
#pragma unroll
  for (int ni = 0; ni < 8; ++ni) {
    const int n = n0 + 8 * ni + 2 * t4;
    if (n >= p.Co) continue;
    const bool has1 = n + 1 < p.Co;
    const RequantCol c0 = cols[n - n0], c1 = cols[n + 1 - n0];  // (past Co: unused)
    stem_for_each_row<MF>(px_warp, px_valid, g, [&](int mi, int h, int px) {
      const int8_t q0 = code(acc[mi][ni][2 * h], c0, n);
      if (pairs) {  // has1: Co even
        const int8_t q1 = code(acc[mi][ni][2 * h + 1], c1, n + 1);
        *reinterpret_cast<uint16_t*>(y + index(px, n)) =
            uint16_t(uint8_t(q0) | (uint16_t(uint8_t(q1)) << 8));
        return;
      }
      y[index(px, n)] = q0;
      if (has1) y[index(px, n + 1)] = code(acc[mi][ni][2 * h + 1], c1, n + 1);
    });
  }
}

// The TMA form's NHWC stores where y has the activations' type, Co % 8 == 0 and y is 16-byte
// aligned: per m16 fragment the warp's 16 pixels x 64 channels go through `stage` (its consumed
// patch stage, kStemOutPitch elements a pixel) and leave as 16-byte stores, 8 lanes a pixel's
// 128 bytes (the fragment-order stores write 4 bytes a lane, 8 half-used sectors an instruction).
template <typename T, int MF>
__device__ __forceinline__ void stem_epilogue_staged(const ConvIgemmParams& p, const float (&acc)[MF][8][4],
                                                     int b, int oh, int ow0, int px_warp, int px_valid,
                                                     int n0, int n_valid, int lane, unsigned char* stage) {
  const int g = lane / 4, t4 = lane % 4;
  const int64_t pix0 = (int64_t(b) * p.Ho + oh) * p.Wo + ow0 + px_warp;  // the warp's first pixel
  uint32_t* words = reinterpret_cast<uint32_t*>(stage);
#pragma unroll
  for (int mi = 0; mi < MF; ++mi) {
#pragma unroll
    for (int ni = 0; ni < 8; ++ni) {
      if (8 * ni >= n_valid) break;  // uniform: channels past Co
      const int n = n0 + 8 * ni + 2 * t4;
      const float bias0 = p.bias ? load_io(p.bias, p.bias_type, n) : 0.f;
      const float bias1 = p.bias ? load_io(p.bias, p.bias_type, n + 1) : 0.f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float v0 = fminf(fmaxf(acc[mi][ni][2 * h] + bias0, p.clamp_lo), p.clamp_hi);
        const float v1 = fminf(fmaxf(acc[mi][ni][2 * h + 1] + bias1, p.clamp_lo), p.clamp_hi);
        words[((8 * h + g) * kStemOutPitch + 8 * ni + 2 * t4) / 2] = pack2<T>(v0, v1);
      }
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < 4; ++r) {  // 16 pixels x 8 pieces of 8 channels
      const int c = lane + 32 * r, px = c / 8, part = c % 8;
      if (8 * part < n_valid && px_warp + 16 * mi + px < px_valid) {
        const uint4 v = *reinterpret_cast<const uint4*>(stage + (px * kStemOutPitch + 8 * part) * 2);
        *reinterpret_cast<uint4*>(static_cast<T*>(p.y) + (pix0 + 16 * mi + px) * p.Co + n0 + 8 * part) = v;
      }
    }
    __syncwarp();
  }
}

// Tile `tile` of the persistent walk: image b, output row oh, first output column ow0.
__device__ __forceinline__ void stem_tile_origin(const ConvStemParams& s, int64_t tile, int* b, int* oh,
                                                 int* ow0) {
  const int64_t row = tile / s.tiles_per_row;
  *ow0 = int(tile - row * s.tiles_per_row) * s.tile_w;
  *b = int(row / s.g.Ho);
  *oh = int(row - int64_t(*b) * s.g.Ho);
}

template <int MF>
__device__ __forceinline__ void stem_zero(float (&acc)[MF][8][4]) {
#pragma unroll
  for (int mi = 0; mi < MF; ++mi)
#pragma unroll
    for (int ni = 0; ni < 8; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;
}

// ldmatrix x4 of channel pair np: lane's row n = 16 np + 8 (q / 2) + lane % 8, k half q % 2
__device__ __forceinline__ uint32_t stem_b_lane(const ConvStemParams& s, uint32_t b_addr, int lane) {
  const int q = lane / 8;
  return b_addr + uint32_t(((8 * (q / 2) + lane % 8) * s.b_pitch + 8 * (q % 2)) * 2);
}

template <typename T, int CI, int MF, bool RQ = false>
__global__ void __launch_bounds__(kStemThreads, 4) conv_stem_kernel(const ConvStemParams s) {
  extern __shared__ __align__(16) unsigned char stem_smem[];
  const ConvIgemmParams& p = s.g;
  T* Bs = reinterpret_cast<T*>(stem_smem);                               // [64][b_pitch]
  int2* ktab = reinterpret_cast<int2*>(Bs + kStemBN * s.b_pitch);         // [kpad / 2]
  uint16_t* patch = reinterpret_cast<uint16_t*>(ktab + s.kpad / 2);       // [1|2][Kh][pitch]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t4 = lane % 4;
  const int n0 = blockIdx.y * kStemBN;
  stem_load_tables(s, n0, s.patch_pitch, Bs, ktab, tid);
  __shared__ RequantCol rq_cols[RQ ? kStemBN : 1];  // the INT8 stem's column constants
  if constexpr (RQ)
    stem_requant_columns(s, n0, rq_cols, tid);  // published by the loop's first barrier

  const uint32_t patch_addr = smem_addr(patch);
  const uint32_t b_lane = stem_b_lane(s, smem_addr(Bs), lane);
  const int n_valid = min(kStemBN, p.Co - n0);
  const int px_warp = warp * 16 * MF;  // the warp's first pixel of a tile
  uint32_t off[MF][2];
  stem_row_offsets<MF>(s, px_warp, g, p.Kh * s.patch_pitch * 2, off);

  for (int64_t tile = blockIdx.x; tile < s.pixel_tiles; tile += gridDim.x) {
    int b, oh, ow0;
    stem_tile_origin(s, tile, &b, &oh, &ow0);
    __syncthreads();  // the previous tile's patch reads are done (and, first, the tables written)
    stem_load_patch<CI>(s, b, oh * p.stride_h - p.pad_h, ow0 * p.stride_w - p.pad_w,
                        reinterpret_cast<uint32_t*>(patch), tid);
    __syncthreads();

    float acc[MF][8][4];
    stem_zero<MF>(acc);
    const int px_valid = min(s.tile_w, p.Wo - ow0);
    if (px_warp < px_valid) stem_mma<T, MF>(s, ktab, patch_addr, off, b_lane, n_valid, t4, acc);
    if constexpr (RQ)
      stem_epilogue_requant<MF>(s, rq_cols, acc, b, oh, ow0, px_warp, px_valid, n0, lane);
    else
      stem_epilogue<T, MF>(p, acc, b, oh, ow0, px_warp, px_valid, n0, g, t4);
  }
}

// The TMA form (conv_stem.hpp; sm_90): as conv_stem_kernel, but each warp brings its own patch
// box by TMA into one of two stages, the next tile's while it multiplies this one, behind an
// mbarrier of its own, so warps never wait on each other after the tables are in.
template <typename T, int CI, int MF, bool RQ = false>
__global__ void __launch_bounds__(kStemThreads, 4)
    conv_stem_tma_kernel(const ConvStemParams s, const __grid_constant__ CUtensorMap xmap) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char stem_smem[];
  const ConvIgemmParams& p = s.g;
  T* Bs = reinterpret_cast<T*>(stem_smem);                        // [64][b_pitch]
  int2* ktab = reinterpret_cast<int2*>(Bs + kStemBN * s.b_pitch);  // [kpad / 2]
  uint64_t* bars = reinterpret_cast<uint64_t*>(ktab + s.kpad / 2); // [warp][stage]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t4 = lane % 4;
  const int n0 = blockIdx.y * kStemBN;
  const uint32_t bar = sm90::smem_u32(bars + warp * kStemStages);
  if (lane == 0) {
    if (warp == 0) sm90::tma_prefetch_desc(&xmap);
    for (int st = 0; st < kStemStages; ++st) sm90::mbar_init(bar + 8 * st, 1);
    sm90::fence_barrier_init();
  }
  stem_load_tables(s, n0, s.box_w, Bs, ktab, tid);
  __shared__ RequantCol rq_cols[RQ ? kStemBN : 1];  // the INT8 stem's column constants
  if constexpr (RQ) stem_requant_columns(s, n0, rq_cols, tid);
  __syncthreads();  // tables, barriers (and the INT8 stem's column constants)

  const uint32_t stage0 = smem_addr(stem_smem) + uint32_t(s.patch_offset) +
                          uint32_t(warp * kStemStages * s.stage_bytes);
  const uint32_t b_lane = stem_b_lane(s, smem_addr(Bs), lane);
  const int n_valid = min(kStemBN, p.Co - n0);
  const int px_warp = warp * 16 * MF;
  uint32_t off[MF][2];  // from the warp's first run (even runs: no shifted copy)
  stem_row_offsets<MF>(s, 0, g, 0, off);
  const uint32_t tx_bytes = uint32_t(p.Kh * s.box_w * 2);
  const bool staged = !RQ && !p.nchw && p.y_type == p.x_type && p.Co % 8 == 0 &&
                      reinterpret_cast<uintptr_t>(p.y) % 16 == 0;
  // the INT8 stem's int8 NHWC codes through the stage (stem_epilogue_requant)
  const bool staged_i8 =
      RQ && s.y_i8 && !s.y_nchw && p.Co % 16 == 0 && reinterpret_cast<uintptr_t>(p.y) % 16 == 0;

  // The warp's first run in tile `tile` starts at element c0 of input row ih0 of image b; its box
  // starts at the 16-byte boundary at or below (c0 & ~7: floor also for the left padding)
  auto origin = [&](int64_t tile, int* b, int* oh, int* ow0, int* c0) {
    stem_tile_origin(s, tile, b, oh, ow0);
    *c0 = ((*ow0 + px_warp) * p.stride_w - p.pad_w) * CI;
  };
  // lane 0: tile `tile`'s box (Kh rows; zeros outside the image) into stage st
  auto issue = [&](int64_t tile, int st) {
    int b, oh, ow0, c0;
    origin(tile, &b, &oh, &ow0, &c0);
    const uint32_t sb = bar + 8 * st;
    sm90::fence_proxy_async_shared();  // the staged stores' generic accesses before the copy's
    sm90::mbar_arrive_expect_tx(sb, tx_bytes);
    sm90::tma_load_3d(stage0 + uint32_t(st * s.stage_bytes), &xmap, sb, c0 & ~7,
                      oh * p.stride_h - p.pad_h, b);
  };
  if (lane == 0 && blockIdx.x < s.pixel_tiles) issue(blockIdx.x, 0);

  int i = 0;
  for (int64_t tile = blockIdx.x; tile < s.pixel_tiles; tile += gridDim.x, ++i) {
    const int st = i & 1;
    // the next tile's box into the other stage, read (and written by the staged stores) by this
    // warp's lanes a tile ago (the __syncwarp after them ordered those accesses before this)
    if (lane == 0 && tile + gridDim.x < s.pixel_tiles) issue(tile + gridDim.x, st ^ 1);
    int b, oh, ow0, c0;
    origin(tile, &b, &oh, &ow0, &c0);
    float acc[MF][8][4];
    stem_zero<MF>(acc);
    const int px_valid = min(s.tile_w, p.Wo - ow0);
    // the first run is delta = c0 & 7 elements into the box; pairs start sigma before each run
    // (delta - sigma is even)
    const uint32_t patch = stage0 + uint32_t(st * s.stage_bytes) + uint32_t(((c0 & 7) - s.sigma) * 2);
    sm90::mbar_wait(bar + 8 * st, uint32_t(i >> 1) & 1u);
    if (px_warp < px_valid) stem_mma<T, MF>(s, ktab, patch, off, b_lane, n_valid, t4, acc);
    __syncwarp();
    if constexpr (RQ) {
      stem_epilogue_requant<MF>(
          s, rq_cols, acc, b, oh, ow0, px_warp, px_valid, n0, lane,
          staged_i8 ? stem_smem + s.patch_offset + (warp * kStemStages + st) * s.stage_bytes
                    : nullptr);
    } else if (staged) {
      stem_epilogue_staged<T, MF>(p, acc, b, oh, ow0, px_warp, px_valid, n0, n_valid, lane,
                                  stem_smem + s.patch_offset + (warp * kStemStages + st) * s.stage_bytes);
    } else {
      stem_epilogue<T, MF>(p, acc, b, oh, ow0, px_warp, px_valid, n0, g, t4);
    }
  }
#endif
}

}  // namespace mixq::cuda::conv
