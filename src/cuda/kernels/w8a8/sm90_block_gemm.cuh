// Hopper block-scaled 8-bit GEMM skeleton: Y[M][N] = sum over 128-wide K blocks of
// promote(A_blk . B_blk^T), A [M][K] and B [N][K] K-major 8-bit codes.
//
// One CTA = 3 warpgroups, persistent over 128 x BN output tiles:
//   warpgroup 0 (producer) drops to a few registers; one thread issues the TMA loads of each K
//     block (A 128x128, B BNx128, both 128-byte swizzled, plus the policy's per-block metadata)
//     into a kStages-deep shared-memory ring, gated by per-slot full/empty mbarriers.
//   warpgroups 1, 2 (consumers) take the registers back and each owns 64 kSub rows of the tile
//     (kSub m64 sub-tiles): per K block, four wgmma m64nBNk32 per sub-tile into a fresh
//     accumulator, then the policy folds that partial
//     sum into the f32 running total with the block's scales (Policy::promote). The tensor-core
//     accumulator never spans two K blocks: FP8 products accumulate there at reduced precision,
//     and each block has its own scales anyway. With two accumulator sets (kAccSets = 2) block
//     kb + 1's MMAs are in flight while block kb is promoted; with one (wider tiles, whose
//     accumulators and totals leave no room for a second set) each warpgroup promotes while the
//     other one's MMAs run.
// Tiles are visited in groups of `group_n` N-tiles, N-fastest inside a group, so the CTAs that
// run at the same time share B tiles (weights) and A rows in L2.
// Epilogue: 16-bit outputs that TMA can address (p.y_tma, set by the launcher) are staged in
// shared memory by stmatrix and written by TMA stores (store_tile_tma); f32 or unaligned outputs
// are stored straight from the registers (store_tile), both in sm90_block_store.cuh; the kQuantOut
// instances (128-wide tiles) write the outputs as the next layer's FP8 / INT8 block-quantized
// activations instead (store_tile_quantized).
//
// kCluster = 2: CTAs run in pairs (a thread block cluster along M). The pair owns a 256 x BN unit
// (rank r computes rows 128 r ... 128 r + 127 of it) and both halves need the same B tile: each CTA
// TMA-loads half of B's rows and multicasts it into both CTAs' slots, so every weight byte leaves
// L2 once per pair (a quarter less L2 -> SM traffic at 128 x 128 tiles). Measured on the H100
// (docs/decisions/fp8-block-gemm.md) pairs were no faster than single CTAs, so they are an option, not the default. A
// slot can be refilled only when the consumers of BOTH CTAs are done with it (the peer's producer
// writes into it too), so each consumer warp arrives on the empty barriers of both CTAs, and each
// barrier counts 8 x kCluster arrivals.
//
// Policy (see Fp8BlockScaledPolicy in sm90_promotion.cuh) provides:
//   template <int N> using Mma      wgmma wrapper (WgmmaE4M3<N>, WgmmaS8<N>)
//   Params                          its tensor maps / pointers (kernel parameter, grid constant)
//   kAMetaBytes, kBMetaBytes        per-stage smem for the block's metadata (128-byte multiples)
//   kMetaTxBytes                    bytes its TMA loads deliver per stage
//   load_meta(pp, a_meta, b_meta, bar, m0, n0, kb)   producer side (TMA on `bar`)
//   Scale read(a_meta, b_meta, row, n0, kb)          consumer side, before the MMA
//   promote(total, acc, scale)                       after the MMA, in registers; total and acc
//                                                    are [kSub][BN / 2] (sub-tile s: rows + 64 s)
//   kPromoteReadsSmem (optional)                     promote() reads the slot's metadata
//   kRank1 (optional) with rank1_stages(num_kb), kRank1TxBytes, load_rank1(pp, a_slot, b_slot,
//     bar, m0, n0, i) and rank1(total, a_slot, b_slot, row): a policy whose result has a part
//     that is its own small GEMM (INT8's dot-independent terms) gets rank1_stages() extra ring
//     stages at the start of every tile, loaded into the code slots; rank1() issues and commits
//     their MMAs into the totals, and the skeleton waits for them before the slot goes back.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/common/epilogue_quant.cuh"
#include "cuda/kernels/common/grid_dependency.cuh"
#include "cuda/kernels/common/sm90_sync.cuh"
#include "cuda/kernels/common/sm90_wgmma.cuh"
#include "cuda/kernels/w8a8/sm90_block_params.cuh"
#include "cuda/kernels/w8a8/sm90_block_store.cuh"

namespace mixq::cuda::sm90 {

// Policy::kTileColumnBytes (optional, default 0; with kStoresTile): shared memory per consumer
// warpgroup for the policy's per-tile column constants. The policy loads them into registers at
// the tile's start (Policy::prefetch, before the K loop, so that their latency from a cold L2
// hides behind it) and its store() moves them into this region for its passes.
template <class Policy>
__host__ __device__ constexpr auto policy_tile_column_bytes(int)
    -> decltype(int(Policy::kTileColumnBytes)) {
  return Policy::kTileColumnBytes;
}
template <class Policy>
__host__ __device__ constexpr int policy_tile_column_bytes(long) {
  return 0;
}

// kSub: m64 sub-tiles per consumer warpgroup (the tile is 128 kSub rows). Two sub-tiles give each
// thread 4 rows instead of 2 for every column it holds, halving the per-column work and loads of
// a promotion that has per-column values (INT8), at the price of B being read by two wgmma.
template <int BN, int kStages, class Policy, int kCluster = 1, int kSub = 1>
struct BlockGemmShape {
  static_assert(kCluster == 1 || kCluster == 2, "clusters of 1 or 2 CTAs along M");
  static_assert(kSub == 1 || kSub == 2, "one or two m64 sub-tiles per consumer warpgroup");
  static_assert(BN % (8 * kCluster) == 0, "each CTA's share of B is whole 8-row swizzle atoms");
  static constexpr int kBM = 128 * kSub, kBK = 128, kThreads = 384;
  static constexpr int kABytes = kBM * kBK, kBBytes = BN * kBK;  // both 1024-byte multiples
  static constexpr int kBRowsPerCta = BN / kCluster;  // rows of B each CTA loads (and multicasts)
  static constexpr int kStageBytes =
      kABytes + kBBytes + Policy::kAMetaBytes + Policy::kBMetaBytes;
  // The epilogue's staging, one box per consumer warpgroup: two each would cost the 6-stage
  // 128 x 128 rings a stage (30 KB of the 227 KB are left beside them).
  static constexpr int kYBytes = 2 * kYBoxBytes;
  // Policy::kTileColumnBytes (policy_tile_column_bytes): the policy's per-tile column constants,
  // one region per consumer warpgroup, after the ring's barriers.
  static constexpr int kColumnBytes = 2 * policy_tile_column_bytes<Policy>(0);
  static constexpr int kSmemBytes =
      1024 + kYBytes + kStages * kStageBytes + 2 * kStages * 8 + kColumnBytes;
};

// Unit t -> (M unit, N tile).
__host__ __device__ inline void tile_coords(int t, const BlockGemmParams& p, int& mb, int& nb) {
  const int per_group = p.group_n * p.num_mu;
  const int g = t / per_group;
  const int first = g * p.group_n;
  const int gn = p.num_n - first < p.group_n ? p.num_n - first : p.group_n;
  const int in = t - g * per_group;
  mb = in / gn;
  nb = first + in % gn;
}

// A CTA's work unit: the output tile's first row, the end of the rows it may write (M, or its
// expert's last row + 1), its N tile and expert.
struct BlockUnit {
  int m0, m_end, nb, expert;
};

// The units a CTA walks: for (t = unit_first; t < unit_count; t += unit_stride) unit_of(t).
// Plain: the raster of tile_coords over clusters. Grouped: the device-side tile list x N tiles,
// N innermost, so that the CTAs running at once share the token tile in L2 and each expert's
// weights are read once per token tile; units past the list's end are none.
template <bool kGrouped, int kCluster>
__device__ __forceinline__ int unit_first() {
  return kGrouped ? int(blockIdx.x) : int(blockIdx.x) / kCluster;
}
template <bool kGrouped, int kCluster>
__device__ __forceinline__ int unit_stride() {
  return kGrouped ? int(gridDim.x) : int(gridDim.x) / kCluster;
}
template <bool kGrouped>
__device__ __forceinline__ int unit_count(const BlockGemmParams& p) {
  return kGrouped ? *p.group.n_tiles * p.num_n : p.num_tiles;
}
template <bool kGrouped, int kBM, int kCluster>
__device__ __forceinline__ BlockUnit unit_of(const BlockGemmParams& p, int t, int rank) {
  if constexpr (kGrouped) {
    int nb;
    const MoeTile tile = moe_unit_of_item(t, p.num_n, *p.group.n_tiles, kBM, p.group.expert_major != 0,
                                          [&](int ti) { return p.group.tiles[ti]; }, nb);
    return {tile.row0 + tile.m_block * kBM, tile.row0 + tile.rows, nb, tile.expert};
  } else {
    int mu, nb;
    tile_coords(t, p, mu, nb);
    return {(mu * kCluster + rank) * kBM, p.M, nb, 0};
  }
}

// Policy::kPromoteReadsSmem (optional, default false): promote() reads the stage's metadata from
// shared memory, so the consumers release the slot after it rather than right after the MMAs.
template <class Policy>
__device__ constexpr auto promote_reads_smem(int) -> decltype(bool(Policy::kPromoteReadsSmem)) {
  return Policy::kPromoteReadsSmem;
}
template <class Policy>
__device__ constexpr bool promote_reads_smem(long) { return false; }
template <class Policy>
__host__ __device__ constexpr auto has_rank1(int) -> decltype(bool(Policy::kRank1)) {
  return Policy::kRank1;
}
template <class Policy>
__host__ __device__ constexpr bool has_rank1(long) { return false; }
// Policy::kBlocks (optional, default 1): scale blocks per 128-K stage. With 2 (INT8 g = 64) each
// stage's MMAs form two commit groups of two k32 steps, promoted separately.
template <class Policy>
__host__ __device__ constexpr auto policy_blocks(int) -> decltype(int(Policy::kBlocks)) {
  return Policy::kBlocks;
}
template <class Policy>
__host__ __device__ constexpr int policy_blocks(long) { return 1; }

// Policy::kStoresTile (optional, default false): the policy writes the tile's outputs itself
// (Policy::store<BN>(pp, p, total, m0, n0, staging, bar, columns, region): the warpgroup's first
// row, the tile's first column, the warpgroup's 8 KB staging box and named barrier, what
// Policy::prefetch loaded at the tile's start and the warpgroup's kTileColumnBytes of shared
// memory; e.g. INT8 per-tensor requantization from integer totals) instead of the skeleton's
// bias / clamp / convert epilogue.
template <class Policy>
__host__ __device__ constexpr auto policy_stores_tile(int) -> decltype(bool(Policy::kStoresTile)) {
  return Policy::kStoresTile;
}
template <class Policy>
__host__ __device__ constexpr bool policy_stores_tile(long) { return false; }

// Policy::kSplitK (optional, default false): the policy can sum a tile's K split over a cluster
// (Policy::store_split, BlockGemmParams::k_split).
template <class Policy>
__host__ __device__ constexpr auto policy_splits_k(int) -> decltype(bool(Policy::kSplitK)) {
  return Policy::kSplitK;
}
template <class Policy>
__host__ __device__ constexpr bool policy_splits_k(long) {
  return false;
}

// The storing policy's per-tile prefetch (Policy::prefetch<BN>(pp, p, n0)), or nothing.
struct NoColumns {};
template <class Policy, int BN, class PP>
__device__ __forceinline__ auto tile_prefetch(const PP& pp, const BlockGemmParams& p, int n0) {
  if constexpr (policy_tile_column_bytes<Policy>(0) > 0)
    return Policy::template prefetch<BN>(pp, p, n0);
  else
    return NoColumns{};
}

// A consumer warp is done with a ring slot: one arrival on the slot's empty barrier in every CTA
// of the cluster (lane r arrives at rank r). __syncwarp first: every lane's reads of the slot
// happen before the arrivals.
template <int kCluster>
__device__ __forceinline__ void release_slot(uint32_t empty_bar, int lane) {
  __syncwarp();
  if constexpr (kCluster == 1) {
    if (lane == 0) mbar_arrive(empty_bar);
  } else {
    if (lane < kCluster) mbar_arrive_cluster(cluster_map_shared(empty_bar, uint32_t(lane)));
  }
}

// kAccSets: 2 = block kb + 1's MMAs are issued before block kb is promoted (two accumulator sets);
// 1 = each warpgroup waits for its own MMAs (wgmma.wait_group 0) before it promotes, and the
// tensor cores stay busy with the other consumer warpgroup's MMAs meanwhile.
// kGrouped: the mixture-of-experts form (BlockGemmGroup; single CTAs, one m64 sub-tile, policies
// with load_meta_expert (and load_rank1_expert) and the skeleton's epilogue).
// kQuantOut: the quantizing epilogue (p.quant; 128-wide plain tiles) instead of y. An instance of
// its own, so that the kernels writing y compile exactly as without it.
template <int BN, int kStages, class Policy, int kCluster, int kSub = 1, int kAccSets = 2,
          bool kGrouped = false, bool kQuantOut = false>
__global__ void __launch_bounds__(384, 1)
    sm90_block_gemm_kernel(const __grid_constant__ CUtensorMap tm_a,
                           const __grid_constant__ CUtensorMap tm_b,
                           const __grid_constant__ CUtensorMap tm_y,  // p.y_tma: Y; p.quant: codes
                           const __grid_constant__ typename Policy::Params pp,
                           const BlockGemmParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Shape = BlockGemmShape<BN, kStages, Policy, kCluster, kSub>;
  using Mma = typename Policy::template Mma<BN>;
  using Acc = typename Mma::Acc;
  constexpr int R = Mma::kRegs;  // accumulator registers per thread: BN / 2
  static_assert(BN % kYBox == 0, "the TMA-store epilogue stores whole 64-column boxes");
  static_assert(!kGrouped || (kCluster == 1 && kSub == 1 && !policy_stores_tile<Policy>(0)),
                "the grouped form: single CTAs, one sub-tile, the skeleton's epilogue");
  static_assert(!kQuantOut || (BN == 128 && !kGrouped && !policy_stores_tile<Policy>(0)),
                "quantized outputs: 128-wide plain tiles with the skeleton's epilogue");

  extern __shared__ uint8_t smem_raw[];
  // 1024-byte alignment: the 128-byte swizzle pattern repeats every 8 rows of 128 bytes.
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                             ~uintptr_t(1023));
  uint8_t* y_tiles = smem;  // consumer warpgroup cw's staging box at cw kYBoxBytes
  uint8_t* a_tiles = y_tiles + Shape::kYBytes;
  uint8_t* b_tiles = a_tiles + kStages * Shape::kABytes;
  uint8_t* a_meta = b_tiles + kStages * Shape::kBBytes;
  uint8_t* b_meta = a_meta + kStages * Policy::kAMetaBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(b_meta + kStages * Policy::kBMetaBytes);
  uint64_t* empty = full + kStages;
  // the policy's column regions (kTileColumnBytes), 16-byte aligned
  [[maybe_unused]] uint8_t* column_smem = reinterpret_cast<uint8_t*>(empty + kStages);

  const int warpgroup = threadIdx.x / 128;
  const int rank = kCluster > 1 ? int(cluster_ctarank()) : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);  // the producer's arrive.expect_tx (+ the TMA bytes of all CTAs)
      mbar_init(&empty[s], 8 * kCluster);  // one arrival per consumer warp of the cluster
    }
    fence_barrier_init();
  }
  // The peer's barriers must be initialised before this CTA multicasts into them or arrives there.
  if constexpr (kCluster > 1) cluster_sync();
  else __syncthreads();
  // Grouped: the tile list (and A, quantized just before) are the previous kernels' outputs; the
  // launch may be a dependent one of the schedule kernel (the set-up above overlapped it).
  if constexpr (kGrouped) grid_dependency_wait();
  // K split over a cluster: one unit per cluster, this CTA's share of its K blocks.
  constexpr bool kCanSplit = policy_splits_k<Policy>(0) && kCluster == 1 && !kGrouped && !kQuantOut;
  const int split = kCanSplit ? p.k_split : 1;
  const int split_rank = split > 1 ? int(blockIdx.x) % split : 0;
  const int kb_begin = split_rank * p.num_kb / split, kb_end = (split_rank + 1) * p.num_kb / split;
  const int first_unit = split > 1 ? int(blockIdx.x) / split : unit_first<kGrouped, kCluster>();
  const int unit_step = split > 1 ? int(gridDim.x) / split : unit_stride<kGrouped, kCluster>();

  if (warpgroup == 0) {
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      tma_prefetch_desc(&tm_a);
      if constexpr (!kGrouped) tma_prefetch_desc(&tm_b);  // grouped: the experts' descriptors
      int stage = 0;
      uint32_t phase = 0;
      const int units = unit_count<kGrouped>(p);
      for (int t = first_unit; t < units; t += unit_step) {
        const BlockUnit u = unit_of<kGrouped, Shape::kBM, kCluster>(p, t, rank);
        const int m0 = u.m0, n0 = u.nb * BN;
        const CUtensorMap* b_map = &tm_b;
        // grouped: the unit's expert's descriptors
        const CUtensorMap* maps = p.group.maps + u.expert * p.group.maps_per_expert;
        if constexpr (kGrouped) b_map = maps + p.group.b_map;
        if constexpr (has_rank1<Policy>(0)) {
          // Each CTA loads its own rank-1 stages (no multicast); the slot protocol is unchanged.
          for (int i = 0; i < Policy::rank1_stages(p.num_kb); ++i) {
            mbar_wait(&empty[stage], phase ^ 1);
            mbar_arrive_expect_tx(&full[stage], Policy::kRank1TxBytes);
            if constexpr (kGrouped)
              Policy::load_rank1_expert(pp, a_tiles + stage * Shape::kABytes,
                                        b_tiles + stage * Shape::kBBytes, &full[stage], m0, n0, i,
                                        maps + p.group.r1_map);
            else
              Policy::load_rank1(pp, a_tiles + stage * Shape::kABytes,
                                 b_tiles + stage * Shape::kBBytes, &full[stage], m0, n0, i);
            if (++stage == kStages) {
              stage = 0;
              phase ^= 1;
            }
          }
        }
        for (int kb = kb_begin; kb < kb_end; ++kb) {
          mbar_wait(&empty[stage], phase ^ 1);
          mbar_arrive_expect_tx(&full[stage],
                                Shape::kABytes + Shape::kBBytes + Policy::kMetaTxBytes);
          if (p.conv_on) {
            const Im2colConv& cv = p.conv;
            const int wo = m0 % cv.Wo, tq = m0 / cv.Wo;
            const int ho = tq % cv.Ho, img = tq / cv.Ho;
            const int k0 = kb * 128, tap = k0 / cv.Ck, ci = k0 - tap * cv.Ck;
            const int r = tap / cv.Kw, s = tap - r * cv.Kw;
            tma_load_im2col_4d(smem_u32(a_tiles + stage * Shape::kABytes), &tm_a, smem_u32(&full[stage]), ci,
                               wo * cv.stride_w - cv.pad_w, ho * cv.stride_h - cv.pad_h, img,
                               uint16_t(s * cv.dil_w), uint16_t(r * cv.dil_h));
          } else {
            tma_load_2d(a_tiles + stage * Shape::kABytes, &tm_a, &full[stage], kb * 128, m0);
          }
          if constexpr (kCluster == 1) {
            tma_load_2d(b_tiles + stage * Shape::kBBytes, b_map, &full[stage], kb * 128, n0);
          } else {
            // This CTA's share of B's rows, written into the same slot of every CTA of the pair.
            const int r0 = rank * Shape::kBRowsPerCta;
            tma_load_2d_multicast(smem_u32(b_tiles + stage * Shape::kBBytes + r0 * 128), &tm_b,
                                  smem_u32(&full[stage]), kb * 128, n0 + r0,
                                  uint16_t((1u << kCluster) - 1));
          }
          if constexpr (kGrouped)
            Policy::load_meta_expert(pp, a_meta + stage * Policy::kAMetaBytes,
                                     b_meta + stage * Policy::kBMetaBytes, &full[stage], m0, n0, kb,
                                     maps + p.group.meta_map);
          else
            Policy::load_meta(pp, a_meta + stage * Policy::kAMetaBytes,
                              b_meta + stage * Policy::kBMetaBytes, &full[stage], m0, n0, kb);
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    setmaxnreg_inc<232>();
    const int cw = warpgroup - 1;  // which half of the tile (64 kSub rows)
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    // This thread's rows: row + 64 s + {0, 8} for sub-tile s.
    const int row = cw * 64 * kSub + warp * 16 + lane / 4;
    const int col = 2 * (lane % 4);  // and columns 8j + col, 8j + col + 1
    float total[kSub][R];
    // Two accumulator sets: the MMAs of K block kb + 1 run on the tensor cores while this warp
    // group folds block kb into `total` (wgmma.wait_group 1 leaves the newer group in flight).
    // With one set, both consumer warpgroups issue their MMAs together, wait for them together
    // and promote together, and the tensor cores idle through every promotion.
    // Two sets need 3 x R x kSub registers of the 232: 192 for both policies (FP8, INT8) at their
    // 128-wide tiles. The 192-wide FP8 tile has registers for one set (kAccSets = 1).
    // kAccSets == 0 ("waves", two sub-tiles): one accumulator set of one sub-tile, reused. A
    // warpgroup issues sub-tile 0's MMAs of a K block, waits for them, promotes them, then sub-tile
    // 1's; the other warpgroup's MMAs keep the tensor cores busy meanwhile. This is what fits a
    // 256 x 128 tile (two sub-tiles of 64 accumulators each in the totals, one set of 64 in
    // flight: 192 of the 232 registers), whose A + B bytes per MAC from L2 are 8% below the
    // 128 x 192 tile's and 25% below 128 x 128's (48 KB per 256 x 128 x 128 block).
    static_assert(kAccSets == 0 || kAccSets == 1 || kAccSets == 2, "zero (waves), one or two sets");
    static_assert(kAccSets > 0 || (kSub == 2 && !kGrouped), "waves: two sub-tiles, plain GEMM");
    static_assert((kAccSets == 0 ? (1 + kSub) * R : (kAccSets + 1) * R * kSub) <= 192,
                  "the accumulator sets and the totals must fit in registers");
    Acc acc0[kSub][R], acc1[kSub][R];
    // TMA-store epilogue: this warpgroup's staging box, the thread that issues its stores (and
    // alone tracks their bulk groups) and the warpgroup's named barrier.
    const uint32_t y_box = smem_u32(y_tiles) + uint32_t(cw) * kYBoxBytes;
    const bool y_issuer = threadIdx.x % 128 == 0;
    const int y_bar = kYBarrier0 + cw;
    if ((p.y_tma || kQuantOut) && y_issuer) tma_prefetch_desc(&tm_y);
    RingPos in(kStages);  // the next slot to consume
    const uint32_t empty0 = smem_u32(empty);  // this CTA's empty barriers (release_slot maps them)
    using Scale = decltype(Policy::read(nullptr, nullptr, 0, 0, 0, 0));
    // The row of the stage's A metadata that holds this thread's row: grouped, the metadata box
    // starts at the unit's first row rounded down to a multiple of 4 (Policy::load_meta_expert).
    int meta_row = row;
    // Scale blocks per stage: the consumers walk K blocks of 128 / kBlocks; a stage's blocks are
    // its halves (kBlocks = 2), each its own commit group into its own accumulator set.
    constexpr int kBlocks = policy_blocks<Policy>(0);
    static_assert(kBlocks == 1 || (kBlocks == 2 && kAccSets == 2),
                  "two blocks per stage run with two accumulator sets (one per half)");
    static_assert(kAccSets > 0 || (kBlocks == 1 && !has_rank1<Policy>(0)),
                  "waves: one block per stage, no rank-1 stages");
    constexpr int kSteps = 4 / kBlocks;  // k32 MMA steps per block
    const int num_blocks = (kb_end - kb_begin) * kBlocks;
    // Issues block `blk`'s MMAs into `acc` (fresh accumulator) and commits them as one group,
    // after waiting for its stage when it is the stage's first block, and reads its scales.
    // half = blk % kBlocks, passed as a constant by every call. Returns the stage.
    auto issue = [&](Acc(&acc)[kSub][R], Scale& scale, int n0, int blk, int half) {
      const int stage = in.stage;
      if (half == 0) {
        mbar_wait(&full[stage], in.phase);
        __syncwarp();  // the spin loop may leave the warp diverged; wgmma needs it converged
      }
      scale = Policy::read(a_meta + stage * Policy::kAMetaBytes,
                           b_meta + stage * Policy::kBMetaBytes, meta_row, n0, blk / kBlocks, half);
      // Low descriptor words only (32-bit adds; the high word is a constant): the 64-bit
      // descriptor arithmetic cost ~10 integer instructions per K block on the issue-bound INT8
      // path. Stepping K inside the 128-byte rows moves the start address only: the swizzle is a
      // function of the absolute address, so the hardware finds the permuted chunks itself.
      const uint32_t da = desc_lo_kmajor_sw128(
          smem_u32(a_tiles + stage * Shape::kABytes + cw * 64 * kSub * 128));
      const uint32_t db = desc_lo_kmajor_sw128(smem_u32(b_tiles + stage * Shape::kBBytes));
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < kSteps; ++k)
#pragma unroll
        for (int sub = 0; sub < kSub; ++sub) {  // sub-tile rows are 64 x 128 bytes further on
          const uint32_t kk = 2 * (kSteps * half + k);  // 32 bytes of K = 2 descriptor units
          Mma::mma(acc[sub], desc_from_lo_sw128(da + sub * (64 * 128 / 16) + kk),
                   desc_from_lo_sw128(db + kk), k);
        }
      wgmma_commit();
      if (half == kBlocks - 1) in.advance();
      return stage;
    };
    // Waves (kAccSets == 0): sub-tile `sub` of K block `kb` into `acc` (fresh), one commit group;
    // waits for the stage unless the loop did, reads the rows' scales, moves the ring on after
    // the last sub-tile; returns the stage. Descriptors: bases broadcast once (uniform) + adds.
    uint32_t da0 = 0, db0 = 0;
    if constexpr (kAccSets == 0) {
      da0 = __shfl_sync(~0u, desc_lo_kmajor_sw128(smem_u32(a_tiles + cw * kSub * 8192)), 0);
      db0 = __shfl_sync(~0u, desc_lo_kmajor_sw128(smem_u32(b_tiles)), 0);
    }
    auto issue_sub = [&](Acc(&acc)[R], Scale& scale, int n0, int kb, int sub, bool stage_ready) {
      const int stage = in.stage;
      if (sub == 0 && !stage_ready) mbar_wait(&full[stage], in.phase);
      __syncwarp();  // a spin loop may leave the warp diverged; wgmma needs it converged
      scale = Policy::read(a_meta + stage * Policy::kAMetaBytes,
                           b_meta + stage * Policy::kBMetaBytes, meta_row + 64 * sub, n0, kb, 0);
      const uint32_t da = da0 + uint32_t(stage * Shape::kABytes + sub * 64 * 128) / 16;
      const uint32_t db = db0 + uint32_t(stage * Shape::kBBytes) / 16;
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < kSteps; ++k)
        Mma::mma(acc, desc_from_lo_sw128(da + 2 * k), desc_from_lo_sw128(db + 2 * k), k);
      wgmma_commit();
      if (sub == kSub - 1) in.advance();
      return stage;
    };
    // After the wait that completed `acc`'s group: fold it into the total, release its slot once
    // the stage's last block is retired.
    // The slot is free once the MMAs have read it, unless promote() still reads its metadata; then
    // it is released one block later, before the next promote(): a release (__syncwarp + arrive)
    // placed after promote() makes ptxas serialize the wgmma pipeline (C7514), and costs a ring
    // slot that the 6-deep ring can spare.
    constexpr bool kDeferRelease = promote_reads_smem<Policy>(0);
    int held = -1;  // kDeferRelease: the slot whose metadata the last promote() read
    // (generic: instantiated only where called, so a waves tile, whose policy promotes one
    // sub-tile at a time, never compiles its kSub-wide promote)
    auto retire = [&](auto& acc, const Scale& scale, int stage, int half) {
#pragma unroll
      for (int sub = 0; sub < kSub; ++sub)
#pragma unroll
        for (int i = 0; i < R; ++i) reg_fence(acc[sub][i]);
      const bool last = half == kBlocks - 1;
      if constexpr (kDeferRelease) {
        if (held >= 0) release_slot<kCluster>(empty0 + 8 * held, lane);
        held = last ? stage : -1;
      } else {
        if (last) release_slot<kCluster>(empty0 + 8 * stage, lane);
      }
      Policy::promote(total, acc, scale);
    };
    const int units = unit_count<kGrouped>(p);
    for (int t = first_unit; t < units; t += unit_step) {
      const BlockUnit u = unit_of<kGrouped, Shape::kBM, kCluster>(p, t, rank);
      const int n0 = u.nb * BN;
      if constexpr (kGrouped) {
        meta_row = row + (u.m0 & 3);
        if (int64_t(u.m0) + cw * 64 >= u.m_end) {
          // This warpgroup's 64 rows lie past the unit's expert (an expert's last tile with at
          // most 64 rows: every tile at decode): nothing to compute or store, so no MMAs or
          // promotion that would take tensor-core and issue time from the other warpgroup. It
          // still retires each of the unit's stages, after the stage's full barrier (so that its
          // arrivals count for the stage's current fill, never the next one).
          if constexpr (kDeferRelease) {
            if (held >= 0) release_slot<kCluster>(empty0 + 8 * held, lane);
            held = -1;
          }
          int stages = p.num_kb;
          if constexpr (has_rank1<Policy>(0)) stages += Policy::rank1_stages(p.num_kb);
          for (int i = 0; i < stages; ++i) {
            mbar_wait(&full[in.stage], in.phase);
            release_slot<kCluster>(empty0 + 8 * in.stage, lane);
            in.advance();
          }
          continue;
        }
      }
#pragma unroll
      for (int sub = 0; sub < kSub; ++sub)
#pragma unroll
        for (int i = 0; i < R; ++i) total[sub][i] = 0.f;
      // A storing policy's column constants for this tile, loaded now (they arrive in the K loop).
      [[maybe_unused]] const auto columns = tile_prefetch<Policy, BN>(pp, p, n0);
      if constexpr (has_rank1<Policy>(0)) {
        // The slot the previous tile's last promote() read goes back first: the producer fills
        // this tile's rank-1 stages in ring order, and with more of them than free slots it would
        // wait for that slot while the consumers wait for the rank-1 stage behind it (a deadlock
        // from 6 rank-1 stages, K > 5 x 1024, on a CTA's second tile). No MMA is in flight here.
        if constexpr (kDeferRelease) {
          if (held >= 0) release_slot<kCluster>(empty0 + 8 * held, lane);
          held = -1;
        }
        // The tile's rank-1 stages, MMAs straight into the totals; each group completes before its
        // slot is released (the MMAs read the slot) and before promote() touches the totals.
        for (int i = 0; i < Policy::rank1_stages(p.num_kb); ++i) {
          const int stage = in.stage;
          mbar_wait(&full[stage], in.phase);
          __syncwarp();
          Policy::rank1(total, a_tiles + stage * Shape::kABytes, b_tiles + stage * Shape::kBBytes,
                        meta_row);
          wgmma_wait<0>();
#pragma unroll
          for (int sub = 0; sub < kSub; ++sub)
#pragma unroll
            for (int r = 0; r < R; ++r) reg_fence(total[sub][r]);
          release_slot<kCluster>(empty0 + 8 * stage, lane);
          in.advance();
        }
      }
      Scale s0, s1;
      if constexpr (kAccSets == 0) {
        static_assert(!kDeferRelease, "waves: the scales are read before the MMAs");
        bool ready = false;  // the next block's stage has landed (waited for under the MMAs)
        for (int kb = 0; kb < num_blocks; ++kb) {
#pragma unroll
          for (int sub = 0; sub < kSub; ++sub) {
            const int st = issue_sub(acc0[0], s0, n0, kb, sub, ready);
            // The next block's full barrier, waited for under this block's last MMAs, not between
            // a promotion and the next MMAs (docs/decisions/fp8-block-gemm.md).
            ready = sub == kSub - 1 && kb + 1 < num_blocks;
            if (ready) mbar_wait(&full[in.stage], in.phase);
            wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < R; ++i) reg_fence(acc0[0][i]);
            // the slot is free once the last sub-tile's MMAs have read it
            if (sub == kSub - 1) release_slot<kCluster>(empty0 + 8 * st, lane);
            Policy::promote(*reinterpret_cast<float(*)[1][R]>(&total[sub]),
                            *reinterpret_cast<const Acc(*)[1][R]>(&acc0[0]), s0);
          }
        }
      } else if constexpr (kAccSets == 1) {
        // The other consumer warpgroup's MMAs keep the tensor cores busy while this one promotes.
        // (Waiting for the next slot and reading its scales before this block's wait, so that
        // only the promotion lies between the blocks, measured no faster: docs/decisions/fp8-block-gemm.md.)
        for (int kb = 0; kb < num_blocks; ++kb) {
          const int st = issue(acc0, s0, n0, kb, 0);
          wgmma_wait<0>();
          retire(acc0, s0, st, 0);
        }
      } else {
      constexpr int h1 = kBlocks - 1;  // acc1's half: 0, or the second of two
      int st0 = issue(acc0, s0, n0, 0, 0), st1;
      int kb = 0;
      // Steady state, straight-line so ptxas can see which group each wait retires: acc0 holds
      // block kb in flight on entry. kb is even here, so with two blocks per stage acc0 always
      // holds a stage's first half and acc1 its second.
      for (; kb + 2 < num_blocks; kb += 2) {
        st1 = issue(acc1, s1, n0, kb + 1, h1);
        wgmma_wait<1>();
        retire(acc0, s0, st0, 0);
        st0 = issue(acc0, s0, n0, kb + 2, 0);
        wgmma_wait<1>();
        retire(acc1, s1, st1, h1);
      }
      // One or two blocks left (kb in flight in acc0); always two with two blocks per stage.
      if (kb + 1 < num_blocks) {
        st1 = issue(acc1, s1, n0, kb + 1, h1);
        wgmma_wait<1>();
        retire(acc0, s0, st0, 0);
        wgmma_wait<0>();
        retire(acc1, s1, st1, h1);
      } else {
        wgmma_wait<0>();
        retire(acc0, s0, st0, 0);
      }
      }  // kAccSets == 2
      const int c0 = n0 + col;
      if constexpr (policy_stores_tile<Policy>(0)) {
        static_assert(kSub == 1 || !policy_stores_tile<Policy>(0), "one staging box per warpgroup");
        uint8_t* region = column_smem + cw * policy_tile_column_bytes<Policy>(0);
        if constexpr (kCanSplit) {
          if (split > 1) {
            // The ring is free: this CTA's last stage has been read by both warpgroups' MMAs
            // (store_split waits for the other warpgroup before it writes there).
            Policy::template store_split<BN>(pp, p, total[0], int64_t(u.m0), n0, columns, region,
                                             a_tiles, split, split_rank);
            continue;
          }
        }
        Policy::template store<BN>(pp, p, total[0], int64_t(u.m0) + cw * 64, n0,
                                   reinterpret_cast<uint32_t*>(y_tiles + cw * kYBoxBytes), y_bar,
                                   columns, region);
      } else if constexpr (kGrouped) {
        // The unit's expert's bias row; a sub-tile past the expert's rows stores nothing. TMA
        // clips a box at the matrix's end only: a sub-tile that ends inside its expert's rows
        // would overwrite the next expert's, so it takes the clipped direct stores.
        const void* bias = p.bias;
        if (bias)
          bias = static_cast<const char*>(bias) +
                 int64_t(u.expert) * p.group.bias_stride * (p.bias_type == 2 ? 4 : 2);
        const int64_t m0 = int64_t(u.m0) + cw * 64;
        if (m0 < u.m_end) {
          if (p.y_tma && m0 + 64 <= u.m_end) {
            if (p.y_type == 0)
              store_tile_tma<0>(p, &tm_y, total[0], int(m0), n0, c0, y_box, warp, lane, y_issuer,
                                y_bar, bias);
            else
              store_tile_tma<1>(p, &tm_y, total[0], int(m0), n0, c0, y_box, warp, lane, y_issuer,
                                y_bar, bias);
          } else {
            const int64_t r0 = int64_t(u.m0) + row;
            if (p.y_type == 0) store_tile<0>(p, total[0], r0, c0, u.m_end, bias);
            else if (p.y_type == 1) store_tile<1>(p, total[0], r0, c0, u.m_end, bias);
            else store_tile<2>(p, total[0], r0, c0, u.m_end, bias);
          }
        }
      } else if constexpr (kQuantOut) {
#pragma unroll
        for (int sub = 0; sub < kSub; ++sub) {
          const int m0 = u.m0 + cw * 64 * kSub + 64 * sub;  // the sub-tile's first row
          if (m0 >= p.M) continue;  // (the same for the whole warpgroup)
          store_tile_quantized(p.quant, &tm_y, total[sub], int64_t(u.m0) + row + 64 * sub, m0,
                               n0, c0, p.N, p.M, p.bias, p.bias_type, p.clamp_lo, p.clamp_hi,
                               y_box, warp, lane, y_issuer, y_bar);
        }
      } else if (p.y_tma) {
#pragma unroll
        for (int sub = 0; sub < kSub; ++sub) {
          // The sub-tile's first row; a sub-tile entirely past M (the last M tile, or the second
          // CTA of a pair past M) stores nothing (the condition is the same for the warpgroup).
          const int64_t m0 = int64_t(u.m0) + cw * 64 * kSub + 64 * sub;
          if (m0 >= p.M) continue;
          if (p.y_type == 0)
            store_tile_tma<0>(p, &tm_y, total[sub], int(m0), n0, c0, y_box, warp, lane, y_issuer,
                              y_bar, p.bias);
          else
            store_tile_tma<1>(p, &tm_y, total[sub], int(m0), n0, c0, y_box, warp, lane, y_issuer,
                              y_bar, p.bias);
        }
      } else {
#pragma unroll
        for (int sub = 0; sub < kSub; ++sub) {
          const int64_t r0 = int64_t(u.m0) + row + 64 * sub;
          if (p.y_type == 0) store_tile<0>(p, total[sub], r0, c0, p.M, p.bias);
          else if (p.y_type == 1) store_tile<1>(p, total[sub], r0, c0, p.M, p.bias);
          else store_tile<2>(p, total[sub], r0, c0, p.M, p.bias);
        }
      }
    }
    // The last held slot: a peer CTA's producer may still wait for it.
    if (kDeferRelease && held >= 0) release_slot<kCluster>(empty0 + 8 * held, lane);
    // The staging boxes must stay until the last TMA store has read them (the CTA's shared memory
    // is released at its exit); wait for the whole store, before the pair's closing cluster_sync.
    if ((p.y_tma || kQuantOut) && y_issuer) bulk_wait_group<0>();
  }
  // No CTA may exit while its peer can still arrive on its barriers.
  if constexpr (kCluster > 1) cluster_sync();
  // K split: the consumers' two cluster barriers (partials written; partials read), which count
  // every thread of the cluster.
  if constexpr (kCanSplit) {
    if (split > 1 && warpgroup == 0) {
      __syncwarp();
      cluster_sync();
      cluster_sync();
    }
  }
#else
  // Built for an architecture without wgmma/TMA: the host never launches this (sm_90 only).
  __trap();
#endif
}

}  // namespace mixq::cuda::sm90
