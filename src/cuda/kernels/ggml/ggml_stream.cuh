// The few-token dequantizing tensor-core kernel of GGUF weights at native width (16-bit X, 1 to
// 8 tokens, one n8 token group): the weights go from global memory straight into registers and a
// lane decodes whole chunks, so the per-weight work is the GEMV's decode plus 16-bit fragment
// forming, with no shared-memory round trip. The plan runs it from the GEMV's limit to 8 tokens.
//
// Why not the staged kernel (ggml_hmma.cuh) at few tokens: it is flat from 1 to 16 tokens at a
// third of the read ceiling (H200, ncu on Q4_0 4096x14336: 0.17 warp instructions a weight, issue
// 56 % active at 3.4 warps a scheduler). Its lanes each take one 4-byte word of a chunk (the
// fragment's k order), so the chunk's scales are decoded by all four lanes of a quad, and every
// word passes through a cp.async copy and a shared-memory load. Here lane (g, t) of a warp takes
// all 32 elements of chunk c + t of rows g and g + 8 (one 16-byte load a row for the 4-bit types,
// the GEMV's load_chunk), so a quad reads 64 contiguous bytes of each of its rows (whole sectors).
//
// K order: an m16n8k16 fragment gives lane t the k slots 2t, 2t + 1, 2t + 8, 2t + 9. In MMA j
// (0..7) of a four-chunk group, lane t puts elements 4j .. 4j + 3 of its own chunk in those slots
// (code word j of decode_codes: fragment_16's two pairs), and its B fragment is X[token][its chunk,
// 4j .. 4j + 3]. A dot product does not depend on the order of k, and each lane's A and B agree,
// so the eight MMAs sum the group's 128 columns. X comes through L1 (16-byte read-only loads: every
// warp of the SM reads the same rows), tokens past M clamped to row M - 1 and not stored.
//
// A CTA's warps share one 16-row tile and split its K range (the sums added in shared memory in
// warp order, deterministic), so the grid has N / 16 CTAs without global partials; blockIdx.y
// splits K further where that leaves the SMs' CTA slots less filled (f32 partials and the
// finalize pass, as the other kernels). Weights are formed as in the staged kernel: 16-bit
// 2^e (s (u - bias) + o), or through f32 for bf16 with 8-bit codes.
//
// What bounds it (H200, Q4_0 4096x14336, 8 tokens, 22.6 us): issue 43 % active at 3.4 warps a
// scheduler, DRAM 31 %, L1 62 % (X's 16-byte loads touch 16 lines an instruction: each quad reads
// 256 bytes of a token's row). Persistent CTAs walking (tile, split) units in one wave, so that a
// warp's ring runs on across units, measured 1.0-1.1x slower (128 registers, spills at two token
// groups); two token groups (9-16 tokens) ran 0.8-1.0x the staged kernel, so it stops at 8.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/kernels/common/mma_sm80.cuh"
#include "cuda/kernels/ggml/ggml_hmma.cuh"

namespace mixq::cuda::ggml {

constexpr int kStreamWarps = 4;  // a CTA: one 16-row tile, its K range split over 4 warps
constexpr int kStreamGroup = 4;  // chunks a warp covers per group (one a lane of a quad)

// Chunk groups of four a lane keeps in flight: three for the narrow types, two where a chunk
// takes 8 or more registers a row (Q8_0 and the 5/6-bit K types) or at 6 CTAs an SM.
template <GType T>
__host__ __device__ constexpr int stream_depth() {
  constexpr GFormat F = gformat(T);
  return F.lb == 8 || F.hb > 0 || stream_ctas_per_sm(T) > 4 ? 2 : 3;
}

// Word j of a row's chunk as the A fragment's two registers (elements 4j, 4j + 1 and 4j + 2,
// 4j + 3) with the chunk half's 16-bit scale and offset pairs (s2, o2) or f32 scale and offset.
template <GType T, typename XT>
__device__ __forceinline__ void word_fragment(uint32_t w, uint32_t s2, uint32_t o2, float s, float o,
                                              uint32_t& lo, uint32_t& hi) {
  if constexpr (kForm16<T, XT>) fragment_16<T, XT>(w, s2, o2, lo, hi);
  else fragment_32<T, XT>(w, s, o, lo, hi);
}

// A view of the planes whose row 0 is row `row` (the per-chunk addresses are then one 32-bit
// chunk index times a constant: the loop spends no 64-bit arithmetic on them).
template <GType T>
__device__ __forceinline__ GPlanes row_view(const GPlanes& w, int64_t row) {
  GPlanes v = w;
  v.lo += row * w.lo_pitch;
  if constexpr (gformat(T).hb > 0) v.hi += row * w.hi_pitch;
  v.d += row * w.d_pitch;
  if constexpr (gformat(T).qk == 256) v.sc += row * w.sc_pitch;
  return v;
}

// One group of four chunks: lane t's chunk c of rows g (ra) and g + 8 (rb) decoded to 16-bit A
// fragments, times X[tokens][chunk c] (xv: four 16-byte pieces a token group), eight MMAs.
// acc[2]: the even and odd words' MMAs accumulate apart (two dependency chains of four, not one
// of eight), summed at the end.
template <GType T, typename XT, int NG>
__device__ __forceinline__ void stream_group(const RawChunk<T>& ra, const RawChunk<T>& rb, const uint4 (&xv)[NG][4],
                                             float wscale, float (&acc)[2][NG][4]) {
  uint32_t wa[8], wb[8];
  decode_codes<T>(ra, wa);
  decode_codes<T>(rb, wb);
  const ChunkScales sa = decode_scales<T>(ra), sb = decode_scales<T>(rb);
  uint32_t sa2[2] = {0, 0}, oa2[2] = {0, 0}, sb2[2] = {0, 0}, ob2[2] = {0, 0};
  if constexpr (kForm16<T, XT>) {
    sa2[0] = splat2<XT>(sa.s0 * wscale);
    sa2[1] = gformat(T).halves() ? splat2<XT>(sa.s1 * wscale) : sa2[0];
    sb2[0] = splat2<XT>(sb.s0 * wscale);
    sb2[1] = gformat(T).halves() ? splat2<XT>(sb.s1 * wscale) : sb2[0];
    if constexpr (gformat(T).has_min()) {
      oa2[0] = splat2<XT>(sa.o0 * wscale);
      oa2[1] = gformat(T).halves() ? splat2<XT>(sa.o1 * wscale) : oa2[0];
      ob2[0] = splat2<XT>(sb.o0 * wscale);
      ob2[1] = gformat(T).halves() ? splat2<XT>(sb.o1 * wscale) : ob2[0];
    }
  }
#pragma unroll
  for (int w = 0; w < 8; ++w) {
    const int h = w >> 2;  // elements 0-15 (s0, o0) or 16-31 (s1, o1)
    Frag16x16 a;
    word_fragment<T, XT>(wa[w], sa2[h], oa2[h], h ? sa.s1 : sa.s0, h ? sa.o1 : sa.o0, a.r[0], a.r[2]);
    word_fragment<T, XT>(wb[w], sb2[h], ob2[h], h ? sb.s1 : sb.s0, h ? sb.o1 : sb.o0, a.r[1], a.r[3]);
#pragma unroll
    for (int j = 0; j < NG; ++j) {
      const uint4 v = xv[j][w >> 1];
      Frag16x8 b;
      b.r[0] = (w & 1) ? v.z : v.x;
      b.r[1] = (w & 1) ? v.w : v.y;
      MmaType<XT>::mma(acc[w & 1][j], a, b);
    }
  }
}

template <GType T, typename XT, int NG>
__global__ void __launch_bounds__(kStreamWarps * 32, stream_ctas_per_sm(T)) stream_kernel(const HmmaParams p) {
  constexpr int D = stream_depth<T>();
  __shared__ float red[kStreamWarps - 1][NG][4][32];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t row0 = int64_t(blockIdx.x) * 16;
  const GPlanes va = row_view<T>(p.w, row0 + g < p.N ? row0 + g : p.N - 1);
  const GPlanes vb = row_view<T>(p.w, row0 + g + 8 < p.N ? row0 + g + 8 : p.N - 1);
  // this CTA's chunks [cb, ce) (K < 2^30: chunk indices fit 32 bits), this warp's groups of four
  // [gb, gb + n); the first nfull of them lie wholly below ce (at most the split's last is cut)
  const int chunks = int(p.K >> 5);
  const int cb = int(blockIdx.y) * int(p.split_chunks);
  const int ce = cb + int(p.split_chunks) < chunks ? cb + int(p.split_chunks) : chunks;
  const int groups = (ce - cb + kStreamGroup - 1) / kStreamGroup;
  const int gb = groups * warp / kStreamWarps, n = groups * (warp + 1) / kStreamWarps - gb;
  const int wc0 = cb + gb * kStreamGroup;  // chunk of lane t = 0 in the warp's first group
  const int nfull = min(n, max(ce - wc0, 0) / kStreamGroup);
  const int c0 = wc0 + t;

  RawChunk<T> raw[D][2];
#pragma unroll
  for (int s = 0; s < D; ++s)
    if (s < nfull) {
      load_chunk<T>(va, 0, c0 + s * kStreamGroup, raw[s][0]);
      load_chunk<T>(vb, 0, c0 + s * kStreamGroup, raw[s][1]);
    }
  grid_dependency_wait();  // X may be the previous kernel's output (a no-op without PDL)

  const XT* xrow[NG];
#pragma unroll
  for (int j = 0; j < NG; ++j) {
    const int tok = j * 8 + g < p.M ? j * 8 + g : p.M - 1;
    xrow[j] = static_cast<const XT*>(p.x) + int64_t(tok) * p.ldx;
  }
  float acc2[2][NG][4];
#pragma unroll
  for (int u = 0; u < 2; ++u)
#pragma unroll
    for (int j = 0; j < NG; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc2[u][j][e] = 0.f;

  for (int i0 = 0; i0 < nfull; i0 += D) {
#pragma unroll
    for (int s = 0; s < D; ++s) {
      const int i = i0 + s;
      if (i >= nfull) break;
      const int c = c0 + i * kStreamGroup;
      // the chunk's activations first: their L1 latency overlaps the decode
      uint4 xv[NG][4];
#pragma unroll
      for (int j = 0; j < NG; ++j) {
        const uint4* xp = reinterpret_cast<const uint4*>(xrow[j] + c * 32);
#pragma unroll
        for (int q = 0; q < 4; ++q) xv[j][q] = __ldg(xp + q);
      }
      const RawChunk<T> ra = raw[s][0], rb = raw[s][1];
      // refill the slot: group i + D is in flight while this one is multiplied
      if (i + D < nfull) {
        load_chunk<T>(va, 0, c + D * kStreamGroup, raw[s][0]);
        load_chunk<T>(vb, 0, c + D * kStreamGroup, raw[s][1]);
      }
      stream_group<T, XT, NG>(ra, rb, xv, p.wscale, acc2);
    }
  }
  if (nfull < n) {
    // the split's last group, cut by ce: lanes past it multiply zeros (zero codes, scales and X)
    const int c = c0 + nfull * kStreamGroup;
    RawChunk<T> ra{}, rb{};
    uint4 xv[NG][4];
#pragma unroll
    for (int j = 0; j < NG; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) xv[j][q] = make_uint4(0, 0, 0, 0);
    if (c < ce) {
      load_chunk<T>(va, 0, c, ra);
      load_chunk<T>(vb, 0, c, rb);
#pragma unroll
      for (int j = 0; j < NG; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) xv[j][q] = __ldg(reinterpret_cast<const uint4*>(xrow[j] + c * 32) + q);
    }
    stream_group<T, XT, NG>(ra, rb, xv, p.wscale, acc2);
  }
  float acc[NG][4];
#pragma unroll
  for (int j = 0; j < NG; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = acc2[0][j][e] + acc2[1][j][e];
  allow_dependent_launch();  // a finalize pass may start; it waits for this grid's writes

  // the warps' sums of the tile, added in warp order by warp 0
  if (warp > 0) {
#pragma unroll
    for (int j = 0; j < NG; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) red[warp - 1][j][e][lane] = acc[j][e];
  }
  __syncthreads();
  if (warp > 0) return;
#pragma unroll
  for (int v = 0; v < kStreamWarps - 1; ++v)
#pragma unroll
    for (int j = 0; j < NG; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] += red[v][j][e][lane];

#pragma unroll
  for (int j = 0; j < NG; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t row = row0 + g + (e >= 2 ? 8 : 0);
      const int tl = j * 8 + 2 * t + (e & 1);
      if (row >= p.N || tl >= p.M) continue;
      store_sum(p, blockIdx.y, tl, row, acc[j][e] * p.unscale);  // exact: a power of two
    }
}

}  // namespace mixq::cuda::ggml
