// The dequantizing tensor-core kernel of GGUF weights at native width, for 16-bit activations at
// tens to hundreds of tokens: the planes are decoded in registers to X's type (f16 or bf16) with
// ggml's arithmetic and multiplied on f16 / bf16 mma.sync with f32 accumulation.
//
// Why not the q8 kernel (ggml_mma.cuh) there: its int32 tile must be promoted to f32 with the
// chunk's scales once per n8 token group, so its per-weight work grows with the tokens (~20
// instructions a chunk and group). Here a weight is decoded once per CTA and every further token
// costs only tensor-core work; the scales ride in the A operand. And not dequantize + cuBLAS: that
// writes 2 bytes per weight and reads them back, 3.6x the dense GEMM's time at 64 tokens.
//
// A CTA of 8 warps owns 128 weight rows (16 a warp: the A operand) and TN tokens (the B operand,
// n8 groups), and copies each 256-column step of every plane and of X to shared memory with
// cp.async into a ring of stages (the q8 kernel's plane copies, ggml_mma.cuh). The rows per CTA are
// 128, not 64, because X is re-read from L2 by every row tile: at 64 tokens X's bytes per weight
// byte are 2 * 64 / (rows * 0.56) for Q4_K, 1.8 at 128 rows.
//
// K order inside a k32 chunk: a thread's decoded words are elements 4t .. 4t + 3 and 16 + 4t ..
// 16 + 4t + 3 of rows g and g + 8 (decode_pair), not the k16 fragment's 2t, 2t + 1, 2t + 8, 2t + 9.
// A dot product does not depend on the order of k, so the chunk is multiplied as two k16 MMAs over
// a permuted k: MMA 0 takes elements 4t .. 4t + 3 as the fragment's k = 2t, 2t + 1, 2t + 8, 2t + 9
// (elements 0-15 of the chunk, sub-block scale s0), MMA 1 the elements 16 + 4t .. (s1). The B
// fragment of that order is X[token g][4t .. 4t + 3]: one 8-byte shared-memory load per MMA, the
// shared rows of X padded to 32 mod 128 bytes so the 8 tokens x 4 lanes of a half warp hit
// distinct banks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "cuda/kernels/common/mma_sm80.cuh"
#include "cuda/kernels/ggml/ggml_mma.cuh"

namespace mixq::cuda::ggml {

constexpr int kHmmaWarps = 8;
constexpr int kHmmaRows = 16 * kHmmaWarps;
constexpr int kHmmaStep = 8;  // chunks of 32 per step (256 columns) for every type
// Shared memory a CTA may take: two CTAs an SM (16 warps to hide the decode's latency) where two
// stages fit in half of Hopper's 228 KB, else one CTA of at most 160 KB (the A100 gives a block
// 163 KB; a device with less runs the tile on another kernel: hmma_smem_bytes tells the backend).
constexpr int kHmmaTwoCtaBytes = 112 * 1024;
constexpr int kHmmaOneCtaBytes = 160 * 1024;

template <GType T, int TN>
struct HmmaTile {
  static constexpr GFormat F = gformat(T);
  __host__ __device__ static constexpr int pad(int b) {  // as MmaTile: fragment rows in distinct banks
    const int r = (b + 15) / 16 * 16;
    return r % 32 == 0 && r > 0 ? r + 16 : r;
  }
  static constexpr int kLoBytes = kHmmaStep * F.lo_chunk();
  static constexpr int kHiBytes = kHmmaStep * F.hi_chunk();
  // a step of a super-block type is one super-block: its 4-byte (scale, min) field, or the aligned
  // 4-byte word that holds its 2-byte f16 scale (cp.async copies 4 bytes at least)
  static constexpr int kDBytes = F.qk == 32 ? kHmmaStep * F.d_bytes() : 4;
  static constexpr int kScBytes = F.qk == 32 ? 0 : F.sc_bytes();
  static constexpr int kLoPitch = pad(kLoBytes), kHiPitch = pad(kHiBytes);
  static constexpr int kDPitch = pad(kDBytes), kScPitch = pad(kScBytes);
  static constexpr int kHiOff = kHmmaRows * kLoPitch;
  static constexpr int kDOff = kHiOff + kHmmaRows * kHiPitch;
  static constexpr int kScOff = kDOff + kHmmaRows * kDPitch;
  static constexpr int kXOff = kScOff + kHmmaRows * kScPitch;
  static constexpr int kXPitch = kHmmaStep * 32 * 2 + 32;  // 544 bytes: 32 mod 128
  static constexpr int kStageBytes = kXOff + TN * kXPitch;
  // the deepest ring (up to 4) that leaves two CTAs an SM, else the deepest one CTA holds under
  // the cap (measured on an H200: the 64-token tile of Q5_K / Q6_K / Q8_0, one CTA an SM, took
  // 5-12 % longer with three stages, 198-210 KB, than with two, 135-140 KB)
  __host__ __device__ static constexpr int stages() {
    for (int s = 4; s >= 2; --s)
      if (s * kStageBytes <= kHmmaTwoCtaBytes) return s;
    for (int s = 4; s >= 2; --s)
      if (s * kStageBytes <= kHmmaOneCtaBytes) return s;
    return 2;
  }
  static constexpr int kStages = stages();
  static constexpr int kSmemBytes = kStages * kStageBytes;
  static_assert(kSmemBytes <= kHmmaOneCtaBytes, "hmma stage too large");
};

// Whether a type's weights are formed in 16 bits (fragment_16): f16 always (1024 + u is exact for
// every byte), bf16 for codes below 128 (128 + u is exact there; the 8-bit codes of Q8_0 and the
// IQ4 codebook are not), else through f32 (fragment_32).
template <GType T, typename XT>
constexpr bool kForm16 = std::is_same_v<XT, half> || !(gformat(T).lb == 8 || gformat(T).iq4);

template <typename XT>
__device__ __forceinline__ uint32_t splat2(float v) { return pack2<XT>(v, v); }

// The A fragment registers of one row's code word (byte i: element i) as two XT pairs, elements
// (0, 1) and (2, 3), formed in 16 bits: a byte permute lays each code under the exponent of 1024
// (f16) or 128 (bf16), one subtraction leaves u - bias exactly, one fused multiply-add applies the
// scale pair s2 and offset pair o2 (16-bit, already in XT). Three instructions a pair, against
// nine through f32; the cost is that s and o are rounded to XT before the product.
template <GType T, typename XT>
__device__ __forceinline__ void fragment_16(uint32_t w, uint32_t s2, uint32_t o2, uint32_t& lo, uint32_t& hi) {
  constexpr GFormat F = gformat(T);
  constexpr bool kSigned = F.lb == 8 || F.iq4;  // signed bytes, biased by 128 first
  constexpr uint32_t kBias = kSigned ? 128u : uint32_t(F.bias);
  constexpr bool kHalf = std::is_same_v<XT, half>;
  constexpr uint32_t kExp = kHalf ? 0x64646464u : 0x43434343u;        // 1024 / 128
  constexpr uint32_t kMagic = ((kHalf ? 0x6400u : 0x4300u) + kBias) * 0x10001u;
  const uint32_t u = kSigned ? w ^ 0x80808080u : w;
  uint32_t r[2] = {__byte_perm(u, kExp, 0x5140), __byte_perm(u, kExp, 0x5342)};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if constexpr (kHalf) {
      const half2 q = __hsub2(*reinterpret_cast<const half2*>(&r[i]), *reinterpret_cast<const half2*>(&kMagic));
      const half2 v = F.has_min() ? __hfma2(q, *reinterpret_cast<const half2*>(&s2), *reinterpret_cast<const half2*>(&o2))
                                  : __hmul2(q, *reinterpret_cast<const half2*>(&s2));
      r[i] = *reinterpret_cast<const uint32_t*>(&v);
    } else {
      using B2 = __nv_bfloat162;
      const B2 q = __hsub2(*reinterpret_cast<const B2*>(&r[i]), *reinterpret_cast<const B2*>(&kMagic));
      const B2 v = F.has_min() ? __hfma2(q, *reinterpret_cast<const B2*>(&s2), *reinterpret_cast<const B2*>(&o2))
                               : __hmul2(q, *reinterpret_cast<const B2*>(&s2));
      r[i] = *reinterpret_cast<const uint32_t*>(&v);
    }
  }
  lo = r[0];
  hi = r[1];
}

// The same through f32 with ggml's operations (word_values: the dequantizer's exact floats), one
// rounding to XT.
template <GType T, typename XT>
__device__ __forceinline__ void fragment_32(uint32_t w, float s, float o, uint32_t& lo, uint32_t& hi) {
  float v[4];
  word_values<T>(w, s, o, v);
  lo = pack2<XT>(v[0], v[1]);
  hi = pack2<XT>(v[2], v[3]);
}

// One row's two A fragment halves of a chunk: words w0 (elements 4t..4t+3, scale s0) and w1
// (16 + 4t.., s1), each word's two registers in fragment slots (i, i + 2).
template <GType T, typename XT>
__device__ __forceinline__ void row_fragments(uint32_t w0, uint32_t w1, const ChunkScales& S, float wscale,
                                              Frag16x16& a0, Frag16x16& a1, int i) {
  if constexpr (kForm16<T, XT>) {
    fragment_16<T, XT>(w0, splat2<XT>(S.s0 * wscale), splat2<XT>(S.o0 * wscale), a0.r[i], a0.r[i + 2]);
    fragment_16<T, XT>(w1, splat2<XT>(S.s1 * wscale), splat2<XT>(S.o1 * wscale), a1.r[i], a1.r[i + 2]);
  } else {
    fragment_32<T, XT>(w0, S.s0, S.o0, a0.r[i], a0.r[i + 2]);
    fragment_32<T, XT>(w1, S.s1, S.o1, a1.r[i], a1.r[i + 2]);
  }
}

template <GType T, typename XT, int TN>
__global__ void __launch_bounds__(kHmmaWarps * 32) hmma_kernel(const HmmaParams p) {
  using G = HmmaTile<T, TN>;
  constexpr GFormat F = G::F;
  constexpr int S = G::kStages;
  constexpr int kStage = G::kStageBytes;
  constexpr int NG = TN / 8;
  constexpr int kThreads = kHmmaWarps * 32;
  extern __shared__ __align__(16) uint8_t smem[];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  // token tiles of one row tile are adjacent in launch order: they run together and the later
  // ones read the weights from L2
  const int64_t ntt = (p.M + TN - 1) / TN;
  const int64_t rt = int64_t(blockIdx.x) / ntt, tt = int64_t(blockIdx.x) - rt * ntt;
  const int64_t row0 = rt * kHmmaRows, m0 = tt * TN;
  const int ntok = int(p.M - m0 < TN ? p.M - m0 : TN);
  const int64_t chunks = p.K >> 5;
  const int64_t cb = int64_t(blockIdx.z) * p.split_chunks;  // a multiple of kHmmaStep
  const int64_t ce = cb + p.split_chunks < chunks ? cb + p.split_chunks : chunks;
  const int nsteps = int((ce - cb + kHmmaStep - 1) / kHmmaStep);

  PlaneCopy<G::kLoBytes, 16, kHmmaRows, kThreads> cp_lo;
  cp_lo.init(p.w.lo, p.w.lo_pitch, 0, G::kLoPitch, row0, p.N);
  PlaneCopy<(G::kHiBytes > 0 ? G::kHiBytes : 16), 16, kHmmaRows, kThreads> cp_hi;
  if constexpr (F.hb > 0) cp_hi.init(p.w.hi, p.w.hi_pitch, G::kHiOff, G::kHiPitch, row0, p.N);
  PlaneCopy<G::kDBytes, (F.qk == 32 ? 16 : 4), kHmmaRows, kThreads> cp_d;
  cp_d.init(p.w.d, p.w.d_pitch, G::kDOff, G::kDPitch, row0, p.N);
  PlaneCopy<(G::kScBytes > 0 ? G::kScBytes : 16), (G::kScBytes >= 16 ? 16 : 4), kHmmaRows, kThreads> cp_sc;
  if constexpr (F.qk == 256) cp_sc.init(p.w.sc, p.w.sc_pitch, G::kScOff, G::kScPitch, row0, p.N);
  const uint32_t smem0 = smem_addr(smem);

  auto copy_weights = [&](int slot, int k) {
    const uint32_t st = smem0 + uint32_t(slot * kStage);
    const int64_t c0 = cb + int64_t(k) * kHmmaStep;
    const int n = int(ce - c0 < kHmmaStep ? ce - c0 : kHmmaStep);  // chunks present in this step
    cp_lo.issue(st, c0 * G::F.lo_chunk(), n * G::F.lo_chunk());
    if constexpr (G::F.hb > 0) cp_hi.issue(st, c0 * G::F.hi_chunk(), n * G::F.hi_chunk());
    if constexpr (G::F.qk == 32) {
      cp_d.issue(st, c0 * G::F.d_bytes(), n * G::F.d_bytes());
    } else {
      const int64_t sb = c0 >> 3;  // the step's super-block
      cp_d.issue(st, G::F.d_bytes() == 4 ? sb * 4 : (sb & ~int64_t(1)) * 2, 4);
      cp_sc.issue(st, sb * G::F.sc_bytes(), G::F.sc_bytes());
    }
  };

  // X: TN tokens x 32 pieces of 16 bytes a step; a thread's pieces are the same (token, piece)
  // slots every step. Tokens past M are zero-filled, not read.
  constexpr int kXPer = TN * 32 / kThreads;
  const uint8_t* xbase = static_cast<const uint8_t*>(p.x);
  int64_t x_src[kXPer];
  uint32_t x_dst[kXPer];
  int x_chunk[kXPer];
  bool x_real[kXPer];
#pragma unroll
  for (int u = 0; u < kXPer; ++u) {
    const int i = int(threadIdx.x) + u * kThreads;
    const int tok = i >> 5, pc = i & 31;
    x_real[u] = tok < ntok;
    x_src[u] = ((m0 + (x_real[u] ? tok : 0)) * p.ldx + pc * 8) * 2;
    x_dst[u] = uint32_t(G::kXOff + tok * G::kXPitch + pc * 16);
    x_chunk[u] = pc >> 2;
  }
  auto copy_x = [&](int slot, int k) {
    const uint32_t st = smem0 + uint32_t(slot * kStage);
    const int64_t c0 = cb + int64_t(k) * kHmmaStep;
    const int n = int(ce - c0 < kHmmaStep ? ce - c0 : kHmmaStep);
#pragma unroll
    for (int u = 0; u < kXPer; ++u) {
      if (x_chunk[u] >= n) continue;
      cp_async_16_zfill(st + x_dst[u], xbase + x_src[u] + c0 * 64, x_real[u] ? 16 : 0);
    }
  };

  float acc[NG][4];
#pragma unroll
  for (int j = 0; j < NG; ++j)
#pragma unroll
    for (int v = 0; v < 4; ++v) acc[j][v] = 0.f;

  // The first S - 1 steps form the first cp.async group (the weights requested before the wait on
  // a preceding kernel when launched with PDL), then one (possibly empty) group per step.
  for (int s = 0; s < S - 1; ++s)
    if (s < nsteps) copy_weights(s, s);
  grid_dependency_wait();
  for (int s = 0; s < S - 1; ++s)
    if (s < nsteps) copy_x(s, s);
#pragma unroll
  for (int s = 0; s < S - 1; ++s) cp_async_commit();

  const int ra_row = warp * 16 + g, rb_row = ra_row + 8;
  for (int k = 0; k < nsteps; ++k) {
    cp_async_wait<S - 2>();  // step k has landed
    __syncthreads();         // ... for every thread, and slot (k - 1) % S is free again
    if (k + S - 1 < nsteps) {
      copy_weights((k + S - 1) % S, k + S - 1);
      copy_x((k + S - 1) % S, k + S - 1);
    }
    cp_async_commit();

    const uint8_t* st = smem + (k % S) * kStage;
    const int64_t c0 = cb + int64_t(k) * kHmmaStep;
    const int n = int(ce - c0 < kHmmaStep ? ce - c0 : kHmmaStep);
    GPlanes v;  // the stage as a view of the planes: rows are the tile's, chunks the step's
    v.lo = st;
    v.hi = st + G::kHiOff;
    v.d = st + G::kDOff + (F.qk == 256 && F.d_bytes() == 2 ? ((c0 >> 3) & 1) * 2 : 0);
    v.sc = st + G::kScOff;
    v.lo_pitch = G::kLoPitch;
    v.hi_pitch = G::kHiPitch;
    v.d_pitch = G::kDPitch;
    v.sc_pitch = G::kScPitch;
    const uint8_t* xs = st + G::kXOff + g * G::kXPitch + t * 8;
#pragma unroll 2
    for (int cl = 0; cl < kHmmaStep; ++cl) {
      if (cl >= n) break;
      RawPair<T> ra, rb;
      load_pair<T>(v, ra_row, cl, t, ra, PlainLoad{});
      load_pair<T>(v, rb_row, cl, t, rb, PlainLoad{});
      uint32_t wa0, wa1, wb0, wb1;
      decode_pair<T>(ra, t, wa0, wa1);
      decode_pair<T>(rb, t, wb0, wb1);
      const ChunkScales SA = decode_scales<T>(ra.d, ra.sc);
      const ChunkScales SB = decode_scales<T>(rb.d, rb.sc);
      Frag16x16 a0, a1;  // the chunk's elements 0-15 (MMA 0) and 16-31 (MMA 1), permuted k
      row_fragments<T, XT>(wa0, wa1, SA, p.wscale, a0, a1, 0);  // row g
      row_fragments<T, XT>(wb0, wb1, SB, p.wscale, a0, a1, 1);  // row g + 8
#pragma unroll
      for (int j = 0; j < NG; ++j) {
        if (j * 8 >= ntok) break;
        const uint8_t* xr = xs + j * 8 * G::kXPitch + cl * 64;
        const uint2 x0 = *reinterpret_cast<const uint2*>(xr);
        const uint2 x1 = *reinterpret_cast<const uint2*>(xr + 32);
        Frag16x8 b0, b1;
        b0.r[0] = x0.x;
        b0.r[1] = x0.y;
        b1.r[0] = x1.x;
        b1.r[1] = x1.y;
        MmaType<XT>::mma(acc[j], a0, b0);
        MmaType<XT>::mma(acc[j], a1, b1);
      }
    }
  }
  cp_async_wait<0>();        // no copy outstanding at exit (the trailing groups are empty)
  allow_dependent_launch();  // the finalize pass may start; it waits for this grid's writes

  // epilogue: the whole sum (bias, clamp, the output type) or this split's f32 partial
#pragma unroll
  for (int j = 0; j < NG; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t row = row0 + warp * 16 + g + (e >= 2 ? 8 : 0);
      const int tl = j * 8 + 2 * t + (e & 1);
      if (row >= p.N || tl >= ntok) continue;
      const int64_t tok = m0 + tl;
      store_sum(p, blockIdx.z, tok, row, acc[j][e] * p.unscale);  // exact: a power of two
    }
}

}  // namespace mixq::cuda::ggml
