// Weight-streaming weight-only GEMM for small and medium M (decode): mma.sync m16n8k16 with the
// operands swapped, Y^T[N][M] = W[N][K] . X^T, so the quantized weights are the 16-row A operand
// (no MMA row is wasted on them however small M is) and the activations the 8-column B operand.
//
// Decode is memory-bound: the kernel's job is to keep the weight stream at full bandwidth.
// - Each warp owns one 16-row tile of W and streams it along its K range with 16-byte evict-first
//   loads, several tiles in flight per lane, straight into registers (no shared-memory round trip:
//   nothing else in the block reads those bytes).
// - The block's activations X[m0:m0+MT][k0:k0+kr] are staged in shared memory (zero padded) by
//   cp.async in a few pieces, the first chunks' piece waited for before the K loop and the others
//   landing while it runs, and fed to the MMAs with ldmatrix. Their sums over each run (a group,
//   or 256 K of a longer one), which the offset term needs, come from the tensor cores: one more
//   MMA per 16-wide K tile with an all-ones A operand.
// - Codes become exact small integers (u) in f16/bf16 (dequant_codes.cuh); each group's MMA sum is
//   scaled in f32 registers once per group: acc += s * sum(x*u) + o' * sum(x), with the (s, o')
//   pairs read from a lane-order copy (wo_layout.hpp: one or two 16-byte loads per lane and group).
// - On sm_90 the kernel is launched with programmatic dependent launch: it issues its first weight
//   loads, then waits for the previous kernel of the stream (grid_dependency.cuh) before it reads
//   activations or writes anything, so its launch and first DRAM round trip overlap that kernel.
// - K is split across blocks (split-K) so every SM has work. Where the splits of one output tile
//   fit the GPU as a thread-block cluster (sm_90), they reduce through distributed shared memory;
//   otherwise partial sums go to a workspace and the last block of each tile to arrive (an atomic
//   ticket) reduces them. Both add the splits in a fixed order (deterministic) and apply bias,
//   clamp and the output conversion.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "cuda/kernels/common/dequant_codes.cuh"
#include "cuda/kernels/common/grid_dependency.cuh"
#include "cuda/kernels/common/wo_layout.hpp"
#include "cuda/kernels/common/wo_params.hpp"

namespace mixq::cuda {

__device__ __forceinline__ float load_io(const void* p, int64_t i, IoType t) {
  switch (t) {
    case IoType::F16: return __half2float(static_cast<const half*>(p)[i]);
    case IoType::BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_io(void* p, int64_t i, IoType t, float v) {
  switch (t) {
    case IoType::F16: static_cast<half*>(p)[i] = __float2half_rn(v); break;
    case IoType::BF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v;
  }
}

__device__ __forceinline__ float epilogue(const WoStreamParams& p, int n, float acc) {
  float v = acc + (p.bias ? load_io(p.bias, n, p.bias_type) : 0.f);
  return fminf(fmaxf(v, p.clamp_lo), p.clamp_hi);
}

template <typename T>
__device__ __forceinline__ T to_mma(float f);
template <>
__device__ __forceinline__ half to_mma<half>(float f) { return __float2half_rn(f); }
template <>
__device__ __forceinline__ __nv_bfloat16 to_mma<__nv_bfloat16>(float f) { return __float2bfloat16_rn(f); }
template <typename T>
__device__ __forceinline__ float from_mma(T v);
template <>
__device__ __forceinline__ float from_mma<half>(half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float from_mma<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

// Shared-memory layout of one block: the staged activation rows (only as many as the call has,
// x_rows <= MT, so decode with M = 1 stages one row, not eight) plus one chunk-wide zero row that
// the ldmatrix lanes of absent tokens point at (their addresses do not advance with the chunk,
// so it costs 144 bytes, not a whole row: a full-length zero row pushed long splits at M >= 2
// into a second stage). Rows are padded by 16 bytes so the 8 row addresses of an ldmatrix fall in
// different banks. After the K loop the same memory holds the block's output tile for the cluster
// reduction ([token][row]). The weights never pass through shared memory; the host planner
// (wo_plan.cpp) sizes it.
struct StreamSmem {
  static constexpr int kPad = 8;  // elements
  static constexpr int kZeroRow = kChunkK + kPad;  // elements
  static __host__ __device__ int row_stride(int kr) { return kr + kPad; }
  static __host__ __device__ size_t x_bytes(int x_rows, int kr) {
    return (size_t(x_rows) * row_stride(kr) + kZeroRow) * 2;
  }
};

// At most this many blocks share the reduction of one tile's splits (the earlier ones wait for the
// last: fewer waiting blocks keep the grid's slots for the blocks still streaming).
constexpr int kStreamMaxReducers = 4;

// A stage's activations arrive in kStreamXPieces pieces of whole chunks, one cp.async group each:
// the K loop waits for the piece of its next chunk (wait_x_piece), so only the first piece's copy
// stands between the weight loads already in flight and the first MMA. (Staged at once with plain
// loads, then summed in shared memory, they cost 9.3 us of a 62 us call on 28672x8192 W4 at M = 8,
// 1.7 at M = 1; now 2.0 at M = 8: docs/decisions/wo-stream-splits-cluster-pdl.md.)
constexpr int kStreamXPieces = 4;
constexpr int kStreamXMinPieceChunks = 8;

// Issues the copies of X[m0:m0+rows][ks:ke) into xs (row stride ldxs), piece q holding chunks
// [q * piece_chunks, (q + 1) * piece_chunks) of the stage, and always commits kStreamXPieces
// cp.async groups (empty ones past the last piece) so that the wait counts are constants. Where
// X cannot be copied in aligned 16-byte pieces (k_perm gathers, f32 activations split into hi and
// lo, odd strides) it is staged with plain loads and converted here, before the block's barrier.
template <typename MmaT, bool SPLIT_X>
__device__ __forceinline__ void stage_activations(const WoStreamParams& p, MmaT* xs, MmaT* xs_lo,
                                                  int ldxs, int m0, int rows, int ks, int ke,
                                                  int piece_chunks) {
  const int kr = ke - ks;
  const bool vec = !SPLIT_X && p.k_perm == nullptr && p.x_type != IoType::F32 &&
                   (p.ldx % 8) == 0 && (p.K % 8) == 0 && (p.x_shift % 8) == 0 &&
                   (reinterpret_cast<uintptr_t>(p.x) % 16) == 0;
  if (vec) {
    const MmaT* x = static_cast<const MmaT*>(p.x);
    const uint32_t xs_addr = smem_addr(xs);
    const int piece_k = piece_chunks * kChunkK;
#pragma unroll
    for (int q = 0; q < kStreamXPieces; ++q) {
      const int ka = q * piece_k, kb = min(ka + piece_k, kr);
      const int per_row = max(kb - ka, 0) / 8;  // 16-byte copies per row of this piece
      for (int i = threadIdx.x; i < rows * per_row; i += blockDim.x) {
        const int m = i / per_row, kk = ka + (i - m * per_row) * 8;
        const int gm = m0 + m, gk = ks + kk;
        // K % 8 == 0 and x_shift % 8 == 0: a copy is all in or all out
        const bool in = gm < p.M && gk >= p.x_shift && gk < p.K;
        cp_async_16_zfill(xs_addr + uint32_t(m * ldxs + kk) * 2,
                          in ? x + int64_t(gm) * p.ldx + (gk - p.x_shift) : x, in ? 16 : 0);
      }
      cp_async_commit();
    }
    return;
  }
  for (int i = threadIdx.x; i < rows * kr; i += blockDim.x) {
    const int m = i / kr, kk = i % kr;
    const int gm = m0 + m, gk = ks + kk;
    float v = 0.f;
    if (gm < p.M && gk < p.K) {
      const int src = p.k_perm ? p.k_perm[gk] : gk - p.x_shift;
      if (src >= 0) v = load_io(p.x, int64_t(gm) * p.ldx + src, p.x_type);
    }
    const MmaT hi = to_mma<MmaT>(v);
    xs[m * ldxs + kk] = hi;
    if constexpr (SPLIT_X) xs_lo[m * ldxs + kk] = to_mma<MmaT>(v - from_mma<MmaT>(hi));
  }
#pragma unroll
  for (int q = 0; q < kStreamXPieces; ++q) cp_async_commit();  // empty groups: uniform waits
}

// Waits for this thread's copies of piece q, then for the whole block's (named barrier 1: every
// warp of the block calls this once per piece, those without rows included).
__device__ __forceinline__ void wait_x_piece(int q) {
  static_assert(kStreamXPieces == 4, "one wait_group immediate per piece");
  if (q == 0) cp_async_wait<3>();
  else if (q == 1) cp_async_wait<2>();
  else if (q == 2) cp_async_wait<1>();
  else cp_async_wait<0>();
  asm volatile("bar.sync 1, %0;\n" ::"r"(blockDim.x) : "memory");
}

// BITS is the code kind of wo_layout.hpp: kCodesU4 (4), kCodesU8 (8) or kCodesE4M3 (8-bit storage,
// e4m3 values, no bias); everything but the conversion treats e4m3 like 8-bit codes.
// RT 16-row tiles of W per warp: the B fragments (activations) and the per-chunk bookkeeping are
// shared by RT tiles, and their MMAs are independent of each other (more instruction-level
// parallelism per warp). Shared with the host planner through wo_row_tiles().
// FINE: groups shorter than a chunk (16 or 32), folded after every 16-wide K tile; otherwise the
// fold test runs once per chunk.
// The work of one block, at block coordinates `block` of a grid gridDim.x blocks wide: the body
// of wo_stream_kernel below, and of the grouped (mixture-of-experts) kernel of kernels/moe/, which
// maps its blocks to (expert, token tile) and hands each one its expert's parameters.
template <typename MmaT, int MT, int BITS, bool SPLIT_X, bool FINE, int WARPS>
__device__ __forceinline__ void wo_stream_block(const WoStreamParams& p, const uint3 block,
                                                const unsigned grid_x) {
  constexpr int RT = wo_row_tiles(MT, BITS == 4 ? 4 : 8, SPLIT_X);
  constexpr int NT8 = MT / 8;                        // MMA column tiles of 8 tokens
  constexpr int kWordsPerLane = BITS == 4 ? 4 : 8;   // 32-bit words per lane per chunk and tile
  constexpr int kLoadsPerChunk = kWordsPerLane / 4;  // 16-byte copies per lane per chunk and tile
  // Weight chunks per warp held in registers: while one is multiplied, the next kDepth - 1 are in
  // flight (loaded straight from global memory: no shared-memory round trip, whose cp.async + LDS
  // traffic made the previous version MIO-bound). The chunk loop is unrolled kDepth times so the
  // buffers keep static register indices; kDepth = 2 keeps the body small for the instruction cache.
  constexpr int kDepth = wo_stream_depth(BITS == 4 ? 4 : 8, RT);
  // Independent MMA accumulator chains: with a single (row tile, token tile) pair, even and odd K
  // tiles accumulate separately so consecutive MMAs do not wait on each other.
  constexpr int kChains = NT8 * RT == 1 ? 2 : 1;
  constexpr float kBias = BiasedCodes<MmaT, BITS>::kBias;
  constexpr float kHiScale = BiasedCodes<MmaT, BITS>::kHiScale;
  // Biased sums grow with kBias * sum(x): fold them into the f32 accumulator at least every
  // 2^kStreamMaxRunShift elements so their rounding stays negligible. Each fold (flush) applies
  // the offset term to the activation sum of its own run, so a group longer than a run is folded
  // piece by piece.

  // With programmatic dependent launch (sm_90, WoStreamParams::pdl) the next kernel of the stream
  // may start once every block of this grid has started: a decode kernel's weight loads then
  // overlap this grid's tail. Its blocks only take the slots this grid's finished blocks free.
  allow_dependent_launch();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int split = block.y;
  const int k0 = split * p.chunks_per_split * kChunkK;
  const int k_end = min(k0 + p.chunks_per_split * kChunkK, p.Kp);
  const int m0 = block.z * MT;
  const int rows = min(p.x_rows, p.M - m0);  // activation rows this block stages
  const int kr_max = p.chunks_per_stage * kChunkK;
  const int ldxs = StreamSmem::row_stride(kr_max);
  MmaT* xs = reinterpret_cast<MmaT*>(smem_raw);
  MmaT* xs_lo = SPLIT_X ? xs + size_t(p.x_rows) * ldxs + StreamSmem::kZeroRow : nullptr;

  // the zero row (index x_rows) is never overwritten by staging
  for (int i = threadIdx.x; i < StreamSmem::kZeroRow; i += blockDim.x) {
    xs[size_t(p.x_rows) * ldxs + i] = to_mma<MmaT>(0.f);
    if constexpr (SPLIT_X) xs_lo[size_t(p.x_rows) * ldxs + i] = to_mma<MmaT>(0.f);
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt0 = (block.x * WARPS + warp) * RT;  // first 16-row tile of W owned by this warp
  const int n_tiles = (p.N + kTileRows - 1) / kTileRows;
  const bool active = nt0 < n_tiles;
  const int chunks_per_row = p.Kp / kChunkK;
  // Row tiles past the end of W (when n_tiles is not a multiple of RT) re-read the warp's first
  // tile; their results are never stored. This lane's words of tile rt are at wbase + toff[rt]
  // (uint4 units; one 64-bit pointer and RT 32-bit offsets instead of RT pointers: registers).
  const uint4* wbase = p.codes + (int64_t(nt0) * chunks_per_row * 32 + lane) * kLoadsPerChunk;
  int toff[RT];
  int r0[RT];  // this lane's rows in tile rt: r0 and r0 + 8
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) {
    const int nt = nt0 + rt < n_tiles ? nt0 + rt : nt0;
    toff[rt] = (nt - nt0) * chunks_per_row * 32 * kLoadsPerChunk;
    r0[rt] = nt * kTileRows + lane / 4;
  }
  // ldmatrix.x4 row addresses: lanes 0-7 / 8-15 / 16-23 / 24-31 address k offsets 0 / 8 / 16 / 24
  // (two 16-wide K tiles) of the 8 token rows; tokens the block does not have read the zero row.
  const int lm_k = (lane >> 3) * 8;
  int lm_off[NT8];
  uint32_t lm_step[NT8];  // bytes per chunk: 0 for the zero row
#pragma unroll
  for (int j = 0; j < NT8; ++j) {
    const int r = j * 8 + (lane & 7);
    lm_off[j] = (r < rows ? r : p.x_rows) * ldxs + lm_k;
    lm_step[j] = r < rows ? kChunkK * 2 : 0;
  }

  // xsum[j]: the activation sums of the current run, from the all-ones MMA: element 0 / 1 hold
  // token columns (lane % 4) * 2 and + 1 of token tile j, the columns this lane's accumulators
  // fold (2 and 3 repeat them for rows r + 8)
  float acc[RT][NT8][4], accg[kChains][RT][NT8][4], xsum[NT8][4];
#pragma unroll
  for (int j = 0; j < NT8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) xsum[j][e] = 0.f;
#pragma unroll
  for (int rt = 0; rt < RT; ++rt)
#pragma unroll
    for (int j = 0; j < NT8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc[rt][j][e] = 0.f;
#pragma unroll
        for (int ch = 0; ch < kChains; ++ch) accg[ch][rt][j][e] = 0.f;
      }

  const int run_shift = min(p.group_shift, kStreamMaxRunShift);
  const int run_step = 1 << run_shift;  // K between flushes
  const uint64_t policy = evict_first_policy();
  uint32_t buf[kDepth][RT][kWordsPerLane];  // the register ring of weight chunks

  for (int ks = k0; ks < k_end; ks += kr_max) {
    const int ke = min(ks + kr_max, k_end);
    const int g_first = ks >> p.group_shift;
    const int c_first = ks / kChunkK;
    const int chunks = (ke - ks) / kChunkK;
    // The next chunk to load (of row tile 0; hoisted: the loop does no 64-bit index math).
    const uint4* src = wbase + int64_t(c_first) * 32 * kLoadsPerChunk;
    auto load_chunk = [&](uint32_t (&w)[RT][kWordsPerLane]) {
#pragma unroll
      for (int rt = 0; rt < RT; ++rt) {
#pragma unroll
        for (int l = 0; l < kLoadsPerChunk; ++l) {
          const uint4 v = ld_stream_u4(src + toff[rt] + l, policy);
          w[rt][4 * l + 0] = v.x;
          w[rt][4 * l + 1] = v.y;
          w[rt][4 * l + 2] = v.z;
          w[rt][4 * l + 3] = v.w;
        }
      }
      src += 32 * kLoadsPerChunk;
    };
    // The first chunks of this stage are requested before the activations are staged, so the two
    // DRAM round trips overlap (small layers are latency-bound, and this is one round trip of it).
    if (active) {
#pragma unroll
      for (int d = 0; d < kDepth; ++d)
        if (d < chunks) load_chunk(buf[d]);
    }
    // Everything before this point reads only the prepared weight; the activations (and the
    // workspace and output, after it) may be written by the previous kernel of the stream.
    grid_dependency_wait();
    // pieces of at least kStreamXMinPieceChunks: a short split's activations come at once (its
    // copies are a round trip either way; each piece costs the block a barrier)
    const int piece_chunks = max(kStreamXMinPieceChunks, (chunks + kStreamXPieces - 1) / kStreamXPieces);
    const int pieces = (chunks + piece_chunks - 1) / piece_chunks;
    stage_activations<MmaT, SPLIT_X>(p, xs, xs_lo, ldxs, m0, rows, ks, ke, piece_chunks);

    if (!active) {  // no rows of W: only the block's piece barriers
      for (int q = 0; q < pieces; ++q) wait_x_piece(q);
    } else {
      // global k where the current run's sum must be folded in (run end, group end or stage end)
      int flush_at = min((ks / run_step + 1) * run_step, ke);
      // (scale, offset) pairs of rows r0 and r0 + 8 of the RT tiles (float2 or half2), in the lane
      // order of wo_layout.hpp (stream_pair_index): 2 * RT contiguous pairs per lane and group,
      // 64 pairs per quad of tiles and group. The flush that folds group g prefetches group
      // g + 1's into L1 and reads them there one group later, so their latency (a DRAM miss)
      // hides under a whole group of weight streaming without holding registers (they limit
      // residency).
      const int psize = p.pair_f32 ? 8 : 4;
      const int group_bytes = 64 * psize;  // one quad's pairs of one group
      const char* pbase = static_cast<const char*>(p.pairs_stream) +
                          ((int64_t(nt0 / 4) * p.groups * 8 + lane / 4) * 8 + (nt0 % 4) * 2) * psize;
      auto prefetch_pairs = [&](int gi) {
        prefetch_l1(pbase + int64_t(gi) * group_bytes);  // 2 * RT pairs: within one 128-byte line
      };
      prefetch_pairs(g_first);
      auto flush = [&](int gi) {
        float2 pr[2 * RT];  // pr[2 rt]: row r0[rt], pr[2 rt + 1]: row r0[rt] + 8
        const char* q = pbase + int64_t(gi) * group_bytes;
        if (p.pair_f32) {
#pragma unroll
          for (int i = 0; i < RT; ++i) {
            const uint4 v = __ldg(reinterpret_cast<const uint4*>(q) + i);
            pr[2 * i] = make_float2(__uint_as_float(v.x), __uint_as_float(v.y));
            pr[2 * i + 1] = make_float2(__uint_as_float(v.z), __uint_as_float(v.w));
          }
        } else if constexpr (RT >= 2) {
#pragma unroll
          for (int i = 0; i < RT / 2; ++i) {
            const uint4 v = __ldg(reinterpret_cast<const uint4*>(q) + i);
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) pr[4 * i + e] = __half22float2(*reinterpret_cast<const half2*>(&w[e]));
          }
        } else {
          const uint2 v = __ldg(reinterpret_cast<const uint2*>(q));
          pr[0] = __half22float2(*reinterpret_cast<const half2*>(&v.x));
          pr[1] = __half22float2(*reinterpret_cast<const half2*>(&v.y));
        }
        // the next flush folds the next group (or, within a long group, this one again)
        const int g_next = min(flush_at + run_step, ke) - 1;
        if ((g_next >> p.group_shift) != gi) prefetch_pairs(g_next >> p.group_shift);
#pragma unroll
        for (int j = 0; j < NT8; ++j) {
          // this run's activation sums of the lane's two token columns (absent tokens: zero rows)
          const float xa = xsum[j][0], xb = xsum[j][1];
#pragma unroll
          for (int e = 0; e < 4; ++e) xsum[j][e] = 0.f;
#pragma unroll
          for (int rt = 0; rt < RT; ++rt) {
            float g[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              g[e] = accg[0][rt][j][e];
#pragma unroll
              for (int ch = 1; ch < kChains; ++ch) g[e] += accg[ch][rt][j][e];
#pragma unroll
              for (int ch = 0; ch < kChains; ++ch) accg[ch][rt][j][e] = 0.f;
            }
            // the MMA summed x * (u + kBias): s*g + (o' - kBias*s)*sum(x) = sum(x * (s*u + o'));
            // rows r + 8 summed x * (u + kBias / kHiScale) / kHiScale, hence their scale s * kHiScale
            const float sa = pr[2 * rt].x, sb = pr[2 * rt + 1].x * kHiScale;
            const float oa = fmaf(-kBias, sa, pr[2 * rt].y), ob = fmaf(-kBias, sb, pr[2 * rt + 1].y);
            acc[rt][j][0] = fmaf(sa, g[0], fmaf(oa, xa, acc[rt][j][0]));
            acc[rt][j][1] = fmaf(sa, g[1], fmaf(oa, xb, acc[rt][j][1]));
            acc[rt][j][2] = fmaf(sb, g[2], fmaf(ob, xa, acc[rt][j][2]));
            acc[rt][j][3] = fmaf(sb, g[3], fmaf(ob, xb, acc[rt][j][3]));
          }
        }
      };

      uint32_t lm_addr[NT8], lm_lo_addr[NT8];
#pragma unroll
      for (int j = 0; j < NT8; ++j) {
        lm_addr[j] = smem_addr(xs + lm_off[j]);
        if constexpr (SPLIT_X) lm_lo_addr[j] = smem_addr(xs_lo + lm_off[j]);
      }
      int kg = ks;  // global k at the start of the current chunk
      constexpr uint32_t kOne2 = std::is_same_v<MmaT, half> ? 0x3C003C00u : 0x3F803F80u;  // (1, 1)
      const Frag16x16 kOnes{{kOne2, kOne2, kOne2, kOne2}};

      // One chunk (16 rows x 64 K per row tile): 4 K tiles of 16, their B fragments from the
      // staged activations, the A fragments converted from the chunk's words.
      auto multiply_chunk = [&](const uint32_t (&words)[RT][kWordsPerLane]) {
#pragma unroll
        for (int tp = 0; tp < 2; ++tp) {  // pairs of 16-wide K tiles
          uint32_t bx[NT8][4], bl[NT8][4];
#pragma unroll
          for (int j = 0; j < NT8; ++j) {
            ldmatrix_x4_u32(bx[j], lm_addr[j] + tp * 64);
            if constexpr (SPLIT_X) ldmatrix_x4_u32(bl[j], lm_lo_addr[j] + tp * 64);
          }
#pragma unroll
          for (int th = 0; th < 2; ++th) {
            const int t = tp * 2 + th;
            const int ch = kChains == 2 ? th : 0;  // even/odd tiles on separate chains (unrolled)
#pragma unroll
            for (int rt = 0; rt < RT; ++rt) {
              Frag16x16 a;
              BiasedCodes<MmaT, BITS>::convert(&words[rt][BITS == 4 ? t : 2 * t], a);
#pragma unroll
              for (int j = 0; j < NT8; ++j) {
                Frag16x8 b{{bx[j][2 * th], bx[j][2 * th + 1]}};
                MmaType<MmaT>::mma(accg[ch][rt][j], a, b);
                if constexpr (SPLIT_X) {
                  Frag16x8 bb{{bl[j][2 * th], bl[j][2 * th + 1]}};
                  MmaType<MmaT>::mma(accg[ch][rt][j], a, bb);
                }
              }
            }
            // the run's activation sums: all-ones A times this tile's B (one MMA per token tile;
            // the tensor cores are idle at decode, and the sums need no pass over shared memory)
#pragma unroll
            for (int j = 0; j < NT8; ++j) {
              Frag16x8 b{{bx[j][2 * th], bx[j][2 * th + 1]}};
              MmaType<MmaT>::mma(xsum[j], kOnes, b);
              if constexpr (SPLIT_X) {
                Frag16x8 bb{{bl[j][2 * th], bl[j][2 * th + 1]}};
                MmaType<MmaT>::mma(xsum[j], kOnes, bb);
              }
            }
            if (FINE && kg + t * 16 + 16 == flush_at) {
              flush((flush_at - 1) >> p.group_shift);
              flush_at = min(flush_at + run_step, ke);
            }
          }
        }
      };

      // Chunk c lives in buf[c % kDepth]; once multiplied, its registers take chunk c + kDepth.
      // The first chunk of each activation piece waits for that piece (the block's copies).
      int piece = 0, next_piece_at = 0;
      for (int c0 = 0; c0 < chunks; c0 += kDepth) {
#pragma unroll
        for (int d = 0; d < kDepth; ++d) {
          if (c0 + d < chunks) {
            if (c0 + d == next_piece_at) {
              wait_x_piece(piece++);
              next_piece_at += piece_chunks;
            }
            multiply_chunk(buf[d]);
            if (c0 + d + kDepth < chunks) load_chunk(buf[d]);
#pragma unroll
            for (int j = 0; j < NT8; ++j) {
              lm_addr[j] += lm_step[j];
              if constexpr (SPLIT_X) lm_lo_addr[j] += lm_step[j];
            }
            kg += kChunkK;
            if (!FINE && kg == flush_at) {
              flush((flush_at - 1) >> p.group_shift);
              flush_at = min(flush_at + run_step, ke);
            }
          }
        }
      }
    }
    __syncthreads();  // the next stage overwrites the activation tile (and the epilogue reuses it)
  }

  // ---- epilogue: direct, or split-K across a cluster (sm_90) or through global partials ----
  auto for_each_output = [&](auto&& f) {
#pragma unroll
    for (int rt = 0; rt < RT; ++rt) {
      if (nt0 + rt >= n_tiles) continue;
#pragma unroll
      for (int j = 0; j < NT8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int n = r0[rt] + (e >= 2 ? 8 : 0);
          const int m = m0 + j * 8 + (lane % 4) * 2 + (e & 1);
          if (n < p.N && m < p.M) f(m, n, acc[rt][j][e]);
        }
    }
  };
  if (p.splits == 1) {
    if (active)
      for_each_output([&](int m, int n, float v) {
        store_io(p.y, int64_t(m) * p.ldy + n, p.y_type, epilogue(p, n, v));
      });
    return;
  }
  const int n_first = block.x * WARPS * RT * kTileRows;
  const int tile_rows = min(WARPS * RT * kTileRows, p.N - n_first);
  const int cols = min(MT, p.M - m0);
  if (p.cluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // The splits of this tile are the cluster's blocks (cluster rank = split). Each writes its
    // sums into its own shared memory; after the cluster barrier (release / acquire: the writes
    // are visible cluster-wide) block r reduces the r-th slice of the tile, reading the splits'
    // values over distributed shared memory in split order, and a second barrier keeps every
    // block's shared memory alive until the others have read it. A DSMEM load costs about as
    // much as an L2 hit, but nothing else remains of the global path's tail: no partial stores,
    // __threadfence, ticket atomic or L2 round trip of the last block.
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    float* tile = reinterpret_cast<float*>(smem_raw);  // [cols][tile_rows]
    if (active)
      for_each_output([&](int m, int n, float v) { tile[(m - m0) * tile_rows + (n - n_first)] = v; });
    cluster.sync();
    const int S = p.splits, rank = int(cluster.block_rank());
    const int total = tile_rows * cols, per = (total + S - 1) / S;
    const int i_end = min(total, (rank + 1) * per);
    for (int i = rank * per + int(threadIdx.x); i < i_end; i += blockDim.x) {
      float v[kStreamMaxClusterSplits];
#pragma unroll
      for (int q = 0; q < kStreamMaxClusterSplits; ++q)
        v[q] = q < S ? *cluster.map_shared_rank(tile + i, q) : 0.f;
      float sum = 0.f;
#pragma unroll
      for (int q = 0; q < kStreamMaxClusterSplits; ++q)
        if (q < S) sum += v[q];
      const int m = m0 + i / tile_rows, n = n_first + i % tile_rows;
      store_io(p.y, int64_t(m) * p.ldy + n, p.y_type, epilogue(p, n, sum));
    }
    cluster.sync();
#else
    __trap();  // the host launches clusters only on an sm_90 image (wo_stream_clusters_available)
#endif
    return;
  }
  if (active) {
    float* part = p.partial + int64_t(split) * p.M * p.N;
    for_each_output([&](int m, int n, float v) { __stcg(part + int64_t(m) * p.N + n, v); });
  }
  __threadfence();  // make this block's partials visible before taking a ticket
  __syncthreads();
  // The reduction is the kernel's tail (every other block is done), so it is latency-bound. Where
  // the tile's rows allow 16-byte partial loads, the last `reducers` blocks to arrive split it
  // (each thread one float4 of outputs and all splits' loads in flight: one L2 round trip); the
  // earlier of them wait for the last arrival (all of the grid's blocks are resident: the planner
  // sizes the split so). One reducer summed 128 KB alone at M = 8 on 28672x8192 in eight rounds
  // of loads: the reduction and partial stores cost 10.5 us of the call, now 3.4
  // (docs/decisions/wo-stream-splits-cluster-pdl.md). The additions stay in split order either way (deterministic).
  const int total = tile_rows * cols;
  const bool vec4 = (p.N % 4) == 0;  // tile_rows too: n_first is a multiple of 64
  const int reducers =
      vec4 ? min(min(p.splits, kStreamMaxReducers), max(1, (total / 4 + int(blockDim.x) - 1) / int(blockDim.x))) : 1;
  __shared__ int reducer;  // this block's share of the reduction, or < 0: none
  unsigned* ticket = p.tickets + block.x + grid_x * block.z;
  if (threadIdx.x == 0) {
    const unsigned t = atomicAdd(ticket, 1u);
    reducer = int(t) - (p.splits - reducers);
    if (reducer >= 0 && t != unsigned(p.splits - 1)) {
      unsigned seen;
      do {
        __nanosleep(64);
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(ticket) : "memory");
      } while (seen < unsigned(p.splits));
    }
  }
  __syncthreads();
  if (reducer < 0) return;
  __threadfence();
  const int64_t split_stride = int64_t(p.M) * p.N;
  if (vec4) {
    // outputs [i * 4, i * 4 + 4) of the tile ([cols][tile_rows]): one token, four rows
    const int items = total / 4, per = (items + reducers - 1) / reducers;
    const int i_end = min(items, (reducer + 1) * per);
    for (int i = reducer * per + int(threadIdx.x); i < i_end; i += blockDim.x) {
      const int m = m0 + i * 4 / tile_rows, n = n_first + i * 4 % tile_rows;
      const float* src = p.partial + int64_t(m) * p.N + n;
      float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
      constexpr int kSp = BITS == 4 ? 16 : 8;  // W8 kernels run at 96 registers
      for (int sp = 0; sp < p.splits; sp += kSp) {
        float4 v[kSp];
#pragma unroll
        for (int q = 0; q < kSp; ++q)
          v[q] = sp + q < p.splits ? __ldcg(reinterpret_cast<const float4*>(src + (sp + q) * split_stride))
                                   : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int q = 0; q < kSp; ++q) {
          if (sp + q >= p.splits) break;
          sum.x += v[q].x;
          sum.y += v[q].y;
          sum.z += v[q].z;
          sum.w += v[q].w;
        }
      }
      const float o[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) store_io(p.y, int64_t(m) * p.ldy + n + e, p.y_type, epilogue(p, n + e, o[e]));
    }
  } else {
    // Scalar path (N not a multiple of 4, one reducer): each thread sums R outputs at once and loads
    // SP splits of them before adding, i.e. one L2 round trip per SP splits: R = 4, SP = 8, or R = 2,
    // SP = 16 when the tile has at most two outputs per thread.
    auto reduce = [&](auto r_tag, auto sp_tag) {
      constexpr int kR = decltype(r_tag)::value, kSp = decltype(sp_tag)::value;
      for (int i0 = threadIdx.x; i0 < total; i0 += blockDim.x * kR) {
        float s[kR];
        int64_t off[kR];
        bool ok[kR];
#pragma unroll
        for (int u = 0; u < kR; ++u) {
          const int i = i0 + u * blockDim.x;
          ok[u] = i < total;
          off[u] = ok[u] ? int64_t(m0 + i / tile_rows) * p.N + n_first + i % tile_rows : 0;
          s[u] = 0.f;
        }
        int sp = 0;
        for (; sp + kSp <= p.splits; sp += kSp) {
          float v[kSp][kR];
#pragma unroll
          for (int q = 0; q < kSp; ++q)
#pragma unroll
            for (int u = 0; u < kR; ++u) v[q][u] = ok[u] ? __ldcg(p.partial + (sp + q) * split_stride + off[u]) : 0.f;
#pragma unroll
          for (int q = 0; q < kSp; ++q)
#pragma unroll
            for (int u = 0; u < kR; ++u) s[u] += v[q][u];
        }
        for (; sp < p.splits; ++sp)
#pragma unroll
          for (int u = 0; u < kR; ++u)
            if (ok[u]) s[u] += __ldcg(p.partial + sp * split_stride + off[u]);
#pragma unroll
        for (int u = 0; u < kR; ++u) {
          if (!ok[u]) continue;
          const int i = i0 + u * blockDim.x;
          const int m = m0 + i / tile_rows, n = n_first + i % tile_rows;
          store_io(p.y, int64_t(m) * p.ldy + n, p.y_type, epilogue(p, n, s[u]));
        }
      }
    };
    if (total <= 2 * int(blockDim.x)) reduce(std::integral_constant<int, 2>{}, std::integral_constant<int, 16>{});
    else reduce(std::integral_constant<int, 4>{}, std::integral_constant<int, 8>{});
  }
  // The last reducer to finish leaves the ticket zero for the next launch (graph replays included).
  if (threadIdx.x == 0 && (reducers == 1 || atomicAdd(ticket, 1u) == unsigned(p.splits + reducers - 1)))
    *ticket = 0;
}

template <typename MmaT, int MT, int BITS, bool SPLIT_X, bool FINE, int WARPS>
__global__ void __launch_bounds__(WARPS * 32, wo_stream_min_blocks(MT, BITS == 4 ? 4 : 8))
    wo_stream_kernel(const WoStreamParams p) {
  wo_stream_block<MmaT, MT, BITS, SPLIT_X, FINE, WARPS>(p, blockIdx, gridDim.x);
}

}  // namespace mixq::cuda
