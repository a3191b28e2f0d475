// The q8 tensor-core kernel of GGUF weights at native width: int8 mma.sync with the weights as the
// 16-row A operand (no MMA row is wasted on them however few the tokens) and the q8 activations
// (GQ8) as the n8 B operand.
//
// The planes are row-major (one layout for every kernel of this folder), so a thread's A fragment
// (code words t and t + 4 of rows g and g + 8) read straight from global memory touches eight
// rows per instruction: that bound an earlier version on L1 wavefronts at 10 % of DRAM bandwidth.
// Here a CTA of 4 warps owns a 64-row tile and copies each step of its K range (8 or 16 chunks,
// mma_step_chunks) from every plane to shared memory with 16-byte cp.async (a row's run of
// chunks is contiguous, so the copies are whole sectors), together with the step's q8 activations,
// in a ring of S stages; the first stages' weights are requested before the wait on the quantizer
// (PDL). The shared rows are padded so that the eight rows of a fragment load fall in distinct
// banks, and the fragments are decoded with the same functions as the GEMV (ggml_chunk.cuh, reading
// a view of the planes whose pointers and pitches are the stage's).
//
// Each k32 chunk's int32 tile is promoted to f32 with the chunk's sub-block scales (two k16 MMAs
// where the scales are per 16) and the activations' per-32 scale, so the arithmetic is the GEMV's:
// same results within f32 rounding. blockIdx.z splits K (in whole steps), the splits' f32 partials
// summed in a fixed order by finalize_kernel (deterministic, no atomics).
#pragma once

#include "cuda/kernels/common/mma_sm80.cuh"
#include "cuda/kernels/ggml/ggml_kernels.cuh"

namespace mixq::cuda::ggml {

constexpr int kMmaWarps = 4;
constexpr int kMmaRows = 16 * kMmaWarps;

// Shared-memory geometry of one stage of the 64-row tile: per plane a row of the step's bytes,
// rounded to 16 and, where that is a multiple of 32 bytes, padded by 16 more, so that the rows of
// a fragment load (stride = 4 mod 8 words, or an odd multiple of 4) hit different banks.
template <GType T>
struct MmaTile {
  static constexpr GFormat F = gformat(T);
  static constexpr int kStep = mma_step_chunks(T);
  __host__ __device__ static constexpr int pad(int b) {
    const int r = (b + 15) / 16 * 16;
    return r % 32 == 0 && r > 0 ? r + 16 : r;
  }
  static constexpr int kLoBytes = kStep * F.lo_chunk();
  static constexpr int kHiBytes = kStep * F.hi_chunk();
  static constexpr int kDBytes = F.qk == 32 ? kStep * F.d_bytes() : kStep / 8 * F.d_bytes();
  static constexpr int kScBytes = F.qk == 32 ? 0 : kStep / 8 * F.sc_bytes();
  static constexpr int kLoPitch = pad(kLoBytes), kHiPitch = pad(kHiBytes);
  static constexpr int kDPitch = pad(kDBytes), kScPitch = pad(kScBytes);
  static constexpr int kHiOff = kMmaRows * kLoPitch;
  static constexpr int kDOff = kHiOff + kMmaRows * kHiPitch;
  static constexpr int kScOff = kDOff + kMmaRows * kDPitch;
  static constexpr int kWBytes = kScOff + kMmaRows * kScPitch;
  // The step's activations, per token group and chunk: 256 code bytes (8 tokens x 32), then the 8
  // tokens' scales d, then (types with mins) their two 16-column sums of x, 32 bytes each.
  static constexpr int kXFields = F.has_min() ? 3 : 1;
  __host__ __device__ static constexpr int x_bytes(int NT) { return NT * kStep * (256 + 32 * kXFields); }
  __host__ __device__ static constexpr int stage_bytes(int NT) { return kWBytes + x_bytes(NT); }
  // Three stages (two steps in flight while one is multiplied) where they fit in ~100 KB, else two:
  // a shallower ring leaves room for more resident CTAs, whose warps hide the decode's latency
  // (measured: four stages capped an SM at 4 CTAs, 22 % occupancy, issue-latency bound).
  __host__ __device__ static constexpr int stages(int NT) {
    return 3 * stage_bytes(NT) <= 100 * 1024 ? 3 : 2;
  }
  __host__ __device__ static constexpr int smem_bytes(int NT) { return stages(NT) * stage_bytes(NT); }
};

__device__ __forceinline__ void mma_k32(const uint32_t (&a)[4], uint32_t b0, uint32_t b1, int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_k16(uint32_t a0, uint32_t a1, uint32_t b0, int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

// This thread's part of copying one plane's step (BYTES per row of a ROWS-row tile, V-byte pieces,
// THREADS threads): the same pieces every step, so their rows are clamped (rows past N repeat the
// last one; their results are never stored) and addressed once, and a step only adds its byte
// offset.
template <int BYTES, int V, int ROWS = kMmaRows, int THREADS = kMmaWarps * 32>  // V: 16 or 4
struct PlaneCopy {
  static constexpr int kPieces = BYTES / V;
  static constexpr int kTotal = ROWS * kPieces;
  static constexpr int kPer = (kTotal + THREADS - 1) / THREADS;
  const uint8_t* src[kPer];
  uint32_t dst[kPer];
  int at[kPer];  // the piece's first byte within the row's step (INT_MAX: no piece)

  __device__ __forceinline__ void init(const uint8_t* base, int64_t pitch, uint32_t smem_off,
                                       int dst_pitch, int64_t row0, int64_t N) {
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int i = int(threadIdx.x) + u * THREADS;
      const int r = i / kPieces, k = i - r * kPieces;
      const int64_t row = row0 + r < N ? row0 + r : N - 1;
      src[u] = base + row * pitch + k * V;
      dst[u] = smem_off + uint32_t(r * dst_pitch + k * V);
      at[u] = i < kTotal ? k * V : 0x7FFFFFFF;
    }
  }
  // bytes [off, off + len) of every row into the stage at shared address `stage`; pieces that
  // start past len are skipped (the plane pitches are padded to 16 bytes, so a piece that starts
  // inside a row's bytes ends inside its pitch)
  __device__ __forceinline__ void issue(uint32_t stage, int64_t off, int len) const {
#pragma unroll
    for (int u = 0; u < kPer; ++u)
      if (at[u] < len) {
        if constexpr (V == 16) cp_async_16_u32(stage + dst[u], src[u] + off);
        else cp_async_4_u32(stage + dst[u], src[u] + off);
      }
  }
};


// float(q) for |q| < 2^22 without the quarter-rate I2F: the bits 0x4B400000 + q are the float
// 1.5 * 2^23 + q, exact, and one subtraction leaves q.
__device__ __forceinline__ float small_int_to_float(int q) {
  return __fsub_rn(__int_as_float(q + 0x4B400000), 12582912.f);
}

template <GType T, int NT>
__global__ void __launch_bounds__(kMmaWarps * 32) q8_mma_kernel(const MmaParams p) {
  using G = MmaTile<T>;
  constexpr GFormat F = G::F;
  constexpr int S = G::stages(NT);
  constexpr int kStage = G::stage_bytes(NT);
  constexpr int kStep = G::kStep;
  extern __shared__ __align__(16) uint8_t smem[];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t row0 = int64_t(blockIdx.x) * kMmaRows;
  const int64_t chunks = p.K >> 5;
  const int64_t tg0 = int64_t(blockIdx.y) * NT;  // first token group of this CTA
  const int ng = int(q8_groups(p.M) - tg0 < NT ? q8_groups(p.M) - tg0 : NT);
  const int64_t cb = int64_t(blockIdx.z) * p.split_chunks;
  const int64_t ce = cb + p.split_chunks < chunks ? cb + p.split_chunks : chunks;
  const int nsteps = int((ce - cb + kStep - 1) / kStep);

  // the weight planes' copy plans (offsets within a stage)
  PlaneCopy<G::kLoBytes, 16> cp_lo;
  cp_lo.init(p.w.lo, p.w.lo_pitch, 0, G::kLoPitch, row0, p.N);
  PlaneCopy<(G::kHiBytes > 0 ? G::kHiBytes : 16), 16> cp_hi;
  if constexpr (G::F.hb > 0) cp_hi.init(p.w.hi, p.w.hi_pitch, G::kHiOff, G::kHiPitch, row0, p.N);
  PlaneCopy<G::kDBytes, (G::F.qk == 32 ? 16 : 4)> cp_d;
  cp_d.init(p.w.d, p.w.d_pitch, G::kDOff, G::kDPitch, row0, p.N);
  PlaneCopy<(G::kScBytes > 0 ? G::kScBytes : 16), 16> cp_sc;
  if constexpr (G::F.qk == 256) cp_sc.init(p.w.sc, p.w.sc_pitch, G::kScOff, G::kScPitch, row0, p.N);
  const uint32_t smem0 = smem_addr(smem);

  auto copy_weights = [&](int slot, int k) {
    const uint32_t st = smem0 + uint32_t(slot * kStage);
    const int64_t c0 = cb + int64_t(k) * kStep;
    const int n = int(ce - c0 < kStep ? ce - c0 : kStep);  // chunks present in this step
    cp_lo.issue(st, c0 * G::F.lo_chunk(), n * G::F.lo_chunk());
    if constexpr (G::F.hb > 0) cp_hi.issue(st, c0 * G::F.hi_chunk(), n * G::F.hi_chunk());
    if constexpr (G::F.qk == 32) {
      cp_d.issue(st, c0 * G::F.d_bytes(), n * G::F.d_bytes());
    } else {
      const int blocks = (n + 7) / 8;  // super-blocks present
      cp_d.issue(st, (c0 >> 3) * G::F.d_bytes(), blocks * G::F.d_bytes());
      cp_sc.issue(st, (c0 >> 3) * G::F.sc_bytes(), blocks * G::F.sc_bytes());
    }
  };

  // The step's q8 activations of this CTA's token groups, regrouped as the fragments read them:
  // codes [group][chunk][token][32 bytes] in 16-byte pieces (a token's chunk is contiguous in
  // GQ8), and the meta fields d (and the sums of x) as [field][group][chunk][token] floats in 4-byte
  // pieces, so that lane (g, t) reads tokens 2t and 2t + 1 with one 8-byte load. The last group's
  // padding tokens are zero-filled, not read. A thread's pieces are the same (chunk, token) slots
  // of every group and step.
  constexpr int kQ = kStep * 16, kMeta = kStep * 8 * G::kXFields;  // pieces per group
  constexpr int kPerQ = kQ / (kMmaWarps * 32);
  constexpr int kPerM = (kMeta + kMmaWarps * 32 - 1) / (kMmaWarps * 32);
  int q_tok[kPerQ], q_cl[kPerQ];
  int64_t q_src[kPerQ];
  uint32_t q_dst[kPerQ];
#pragma unroll
  for (int u = 0; u < kPerQ; ++u) {
    const int i = int(threadIdx.x) + u * kMmaWarps * 32;
    q_cl[u] = i >> 4;
    q_tok[u] = (i >> 1) & 7;
    q_src[u] = int64_t(q_tok[u]) * p.K + q_cl[u] * 32 + (i & 1) * 16;
    q_dst[u] = uint32_t(G::kWBytes + q_cl[u] * 256 + q_tok[u] * 32 + (i & 1) * 16);
  }
  int m_tok[kPerM], m_cl[kPerM];
  int64_t m_src[kPerM];  // in floats
  uint32_t m_dst[kPerM];
#pragma unroll
  for (int u = 0; u < kPerM; ++u) {
    const int i = int(threadIdx.x) + u * kMmaWarps * 32;
    const int f = i / (kStep * 8), r = i - f * (kStep * 8);
    m_cl[u] = i < kMeta ? r >> 3 : kStep;  // kStep: no piece
    m_tok[u] = r & 7;
    m_src[u] = (int64_t(m_tok[u]) * chunks + m_cl[u]) * 4 + f;
    m_dst[u] = uint32_t(G::kWBytes + NT * kStep * 256 + (f * NT * kStep + m_cl[u]) * 32 + m_tok[u] * 4);
  }
  auto copy_x = [&](int slot, int k) {
    const uint32_t st = smem0 + uint32_t(slot * kStage);
    const int64_t c0 = cb + int64_t(k) * kStep;
    const int n = int(ce - c0 < kStep ? ce - c0 : kStep);
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      if (j >= ng) break;
      const int64_t m0 = (tg0 + j) * 8;
#pragma unroll
      for (int u = 0; u < kPerQ; ++u) {
        if (q_cl[u] >= n) continue;
        const bool real = m0 + q_tok[u] < p.M;
        const int8_t* src = p.xq + (real ? m0 * p.K + q_src[u] + c0 * 32 : 0);
        cp_async_16_zfill(st + q_dst[u] + j * kStep * 256, src, real ? 16 : 0);
      }
#pragma unroll
      for (int u = 0; u < kPerM; ++u) {
        if (m_cl[u] >= n) continue;
        const bool real = m0 + m_tok[u] < p.M;
        const float* src = reinterpret_cast<const float*>(p.xmeta) + (real ? (m0 * chunks + c0) * 4 + m_src[u] : 0);
        cp_async_4_zfill(st + m_dst[u] + j * kStep * 32, src, real ? 4 : 0);
      }
    }
  };

  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int v = 0; v < 4; ++v) acc[j][v] = 0.f;

  // The weights of the first S - 1 steps are requested before the wait on the quantizer (PDL);
  // all of them form the first cp.async group, then one (possibly empty) group per step.
  for (int s = 0; s < S - 1; ++s)
    if (s < nsteps) copy_weights(s, s);
  grid_dependency_wait();
  for (int s = 0; s < S - 1; ++s)
    if (s < nsteps) copy_x(s, s);
#pragma unroll
  for (int s = 0; s < S - 1; ++s) cp_async_commit();

  const int ra_row = warp * 16 + g, rb_row = ra_row + 8;
  for (int k = 0; k < nsteps; ++k) {
    cp_async_wait<S - 2>();  // step k has landed (its group is the (k+1)-th or the first)
    __syncthreads();               // ... for every thread, and slot (k - 1) % S is free again
    if (k + S - 1 < nsteps) {
      copy_weights((k + S - 1) % S, k + S - 1);
      copy_x((k + S - 1) % S, k + S - 1);
    }
    cp_async_commit();

    const uint8_t* st = smem + (k % S) * kStage;
    GPlanes v;  // the stage as a view of the planes: rows are the tile's, chunks the step's
    v.lo = st;
    v.hi = st + G::kHiOff;
    v.d = st + G::kDOff;
    v.sc = st + G::kScOff;
    v.lo_pitch = G::kLoPitch;
    v.hi_pitch = G::kHiPitch;
    v.d_pitch = G::kDPitch;
    v.sc_pitch = G::kScPitch;
    const uint8_t* xq = st + G::kWBytes;
    const float* xd = reinterpret_cast<const float*>(xq + NT * kStep * 256);  // [field][group][chunk][token]
    const int64_t c0 = cb + int64_t(k) * kStep;
    const int n = int(ce - c0 < kStep ? ce - c0 : kStep);
#pragma unroll
    for (int cl = 0; cl < kStep; ++cl) {
      if (cl >= n) break;
      RawPair<T> ra, rb;
      load_pair<T>(v, ra_row, cl, t, ra, PlainLoad{});
      load_pair<T>(v, rb_row, cl, t, rb, PlainLoad{});
      uint32_t a[4];
      decode_pair<T>(ra, t, a[0], a[2]);
      decode_pair<T>(rb, t, a[1], a[3]);
      if constexpr (F.bias != 0) {
        // u - bias as a signed byte, folded into the A operand (u + 128 - bias stays below 256):
        // the product needs no per-token correction by the code sums
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = (a[i] + uint32_t(0x80 - F.bias) * 0x01010101u) ^ 0x80808080u;
      }
      const ChunkScales SA = decode_scales<T>(ra.d, ra.sc);
      const ChunkScales SB = decode_scales<T>(rb.d, rb.sc);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if (j >= ng) break;
        const uint2 bw = *reinterpret_cast<const uint2*>(xq + (j * kStep + cl) * 256 + g * 32 + t * 8);
        const int mi = (j * kStep + cl) * 8 + 2 * t;  // tokens 2t, 2t + 1 of group j, chunk cl
        const float2 dx = *reinterpret_cast<const float2*>(xd + mi);
        if constexpr (F.halves()) {
          int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
          mma_k16(a[0], a[1], bw.x, lo);
          mma_k16(a[2], a[3], bw.y, hi);
          acc[j][0] = fmaf(dx.x, SA.s0 * small_int_to_float(lo[0]) + SA.s1 * small_int_to_float(hi[0]), acc[j][0]);
          acc[j][1] = fmaf(dx.y, SA.s0 * small_int_to_float(lo[1]) + SA.s1 * small_int_to_float(hi[1]), acc[j][1]);
          acc[j][2] = fmaf(dx.x, SB.s0 * small_int_to_float(lo[2]) + SB.s1 * small_int_to_float(hi[2]), acc[j][2]);
          acc[j][3] = fmaf(dx.y, SB.s0 * small_int_to_float(lo[3]) + SB.s1 * small_int_to_float(hi[3]), acc[j][3]);
          if constexpr (F.has_min()) {
            const float2 f0 = *reinterpret_cast<const float2*>(xd + NT * kStep * 8 + mi);
            const float2 f1 = *reinterpret_cast<const float2*>(xd + 2 * NT * kStep * 8 + mi);
            acc[j][0] += SA.o0 * f0.x + SA.o1 * f1.x;
            acc[j][1] += SA.o0 * f0.y + SA.o1 * f1.y;
            acc[j][2] += SB.o0 * f0.x + SB.o1 * f1.x;
            acc[j][3] += SB.o0 * f0.y + SB.o1 * f1.y;
          }
        } else {
          int q[4] = {0, 0, 0, 0};
          mma_k32(a, bw.x, bw.y, q);
          acc[j][0] = fmaf(dx.x, SA.s0 * small_int_to_float(q[0]), acc[j][0]);
          acc[j][1] = fmaf(dx.y, SA.s0 * small_int_to_float(q[1]), acc[j][1]);
          acc[j][2] = fmaf(dx.x, SB.s0 * small_int_to_float(q[2]), acc[j][2]);
          acc[j][3] = fmaf(dx.y, SB.s0 * small_int_to_float(q[3]), acc[j][3]);
          if constexpr (F.has_min()) {
            const float2 f0 = *reinterpret_cast<const float2*>(xd + NT * kStep * 8 + mi);
            const float2 f1 = *reinterpret_cast<const float2*>(xd + 2 * NT * kStep * 8 + mi);
            acc[j][0] += SA.o0 * (f0.x + f1.x);
            acc[j][1] += SA.o0 * (f0.y + f1.y);
            acc[j][2] += SB.o0 * (f0.x + f1.x);
            acc[j][3] += SB.o0 * (f0.y + f1.y);
          }
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy outstanding at exit (the trailing groups are empty)
  allow_dependent_launch();  // the finalize pass may start; it waits for this grid's writes

  // epilogue: the whole sum (bias, clamp, the output type) or this split's f32 partial
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const int64_t row = row0 + warp * 16 + g + (v >= 2 ? 8 : 0);
      const int64_t tok = (tg0 + j) * 8 + 2 * t + (v & 1);
      if (row >= p.N || tok >= p.M) continue;
      store_sum(p, blockIdx.z, tok, row, acc[j][v]);
    }
}

}  // namespace mixq::cuda::ggml
