// Host side of the Hopper block GEMM (kernels/sm90_block_gemm.cuh), shared by the FP8 and INT8
// launchers: shared-memory opt-in, a persistent grid of as many CTAs (or CTA pairs) as can be
// resident at once, and the cluster launch.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cuda/runtime/check.hpp"
#include "cuda/runtime/launch_config.hpp"
#include "cuda/kernels/w8a8/sm90_block_gemm.cuh"
#include "cuda/launch/sm90_block_grouped.hpp"
#include "cuda/runtime/tensor_map.hpp"

namespace mixq::cuda {

// Whether the TMA-store epilogue (store_tile_tma in kernels/w8a8/sm90_block_store.cuh) runs:
// wherever TMA can store Y (16-bit outputs, tma_stores_16bit_rows) unless the tuning turns it off
// (y_tma 0; -1: automatic); f32 and other outputs take the direct stores.
inline bool block_gemm_y_tma(const sm90::BlockGemmParams& p, int y_tma) {
  if (p.y_type != 0 && p.y_type != 1) return false;
  if (!tma_stores_16bit_rows(p.y, p.ldy, p.N)) return false;
  return y_tma != 0;
}

// The grouped form's parameters for call c: tiles of bm x bn over the call's rows, the grid's
// bound (the units any routing can have), the output and epilogue, the tile list and the slots of
// each expert's descriptors (maps_per_expert of them: codes first, then meta_map, r1_map).
inline sm90::BlockGemmParams block_grouped_params(const BlockGroupedCall& c, int num_kb, int bm,
                                                  int bn, int maps_per_expert, int meta_map,
                                                  int r1_map = 0) {
  sm90::BlockGemmParams p;
  p.set_tiles(int(c.rows), int(c.N), num_kb, bm, bn, 1);
  const int64_t units = c.max_tiles * p.num_n;
  p.num_tiles = int(units < (int64_t(1) << 30) ? units : (int64_t(1) << 30));
  p.set_output(c.y, c.ldy, c.y_type, c.bias, c.bias_type, c.clamp_lo, c.clamp_hi);
  p.group.n_tiles = c.n_tiles;
  p.group.tiles = c.tiles;
  p.group.maps = c.maps;
  p.group.maps_per_expert = maps_per_expert;
  p.group.b_map = 0;
  p.group.meta_map = meta_map;
  p.group.r1_map = r1_map;
  p.group.bias_stride = c.bias_stride;
  p.group.expert_major = c.expert_major ? 1 : 0;
  return p;
}

// kGrouped (the mixture-of-experts form): params.num_tiles is the host's bound of the units (the
// grid's size); pdl: a programmatic dependent launch of the previous kernel (the schedule kernel;
// the grouped kernel waits for it before it reads the tile list).
template <int BN, int S, class Policy, int kCluster, int kSub = 1, int kAccSets = 2,
          bool kGrouped = false, bool kQuantOut = false>
void launch_block_gemm(const CUtensorMap& tm_a, const CUtensorMap& tm_b,
                       const typename Policy::Params& pp, const sm90::BlockGemmParams& params,
                       int sms, int y_tma, cudaStream_t stream, const char* name,
                       bool pdl = false) {
  using Shape = sm90::BlockGemmShape<BN, S, Policy, kCluster, kSub>;
  static_assert(Shape::kSmemBytes <= 227 * 1024,
                "the ring and the epilogue's staging must fit in shared memory");
  auto kernel =
      sm90::sm90_block_gemm_kernel<BN, S, Policy, kCluster, kSub, kAccSets, kGrouped, kQuantOut>;
  // Y as 64 x 64 boxes of 16-bit values, 128-byte swizzled (the staging layout); the kernel never
  // reads the map (left zeroed) on the direct-store path.
  sm90::BlockGemmParams p = params;
  CUtensorMap tm_y{};
  p.y_tma = block_gemm_y_tma(p, y_tma) ? 1 : 0;
  if (p.y_tma)
    tm_y = make_tensor_map_2d(p.y_type == 0 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                            : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                              p.y, uint64_t(p.N), uint64_t(p.M), uint64_t(p.ldy) * 2,
                              sm90::kYBox, sm90::kYBox, CU_TENSOR_MAP_SWIZZLE_128B);
  // Quantized outputs: the codes as 64-row x 128-byte boxes of the 128-byte-swizzled staging
  // box (store_tile_quantized), clipped at the row pitch and at M.
  if (kQuantOut)
    tm_y = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, p.quant.q, uint64_t(p.quant.pitch),
                              uint64_t(p.M), uint64_t(p.quant.ld_q), 128, 64,
                              CU_TENSOR_MAP_SWIZZLE_128B);
  static PerDeviceAttribute smem_limit;  // once per device, not a driver call every launch
  MIXQ_CUDA_CHECK(smem_limit.ensure([kernel] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSmemBytes);
  }));
  cudaLaunchConfig_t cfg{};
  cfg.blockDim = dim3(Shape::kThreads);
  cfg.dynamicSmemBytes = Shape::kSmemBytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  cfg.attrs = attr;
  cfg.numAttrs = 0;
  // K split over a cluster (policies with kSplitK): clusters of k_split CTAs, one unit each.
  const int split = p.k_split;
  MIXQ_CHECK_ARG(
      split == 1 || (sm90::policy_splits_k<Policy>(0) && kCluster == 1 && !kGrouped && !kQuantOut &&
                     split >= 2 && split <= 8 && split <= p.num_kb && 128 % split == 0),
      name, ": k_split ", split,
      " needs a policy that splits K, single CTAs, a power of two up to 8 and ",
      "at least one of the ", p.num_kb, " K blocks a CTA");
  if (kCluster > 1 || split > 1) {
    attr[cfg.numAttrs].id = cudaLaunchAttributeClusterDimension;
    attr[cfg.numAttrs].val.clusterDim.x = split > 1 ? split : kCluster;
    attr[cfg.numAttrs].val.clusterDim.y = 1;
    attr[cfg.numAttrs].val.clusterDim.z = 1;
    ++cfg.numAttrs;
  }
  if (kGrouped && pdl) {
    attr[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[cfg.numAttrs].val.programmaticStreamSerializationAllowed = 1;
    ++cfg.numAttrs;
  }
  // Concurrent work units: one CTA per SM (the ring takes most of shared memory); for pairs, the
  // number of clusters the GPCs can hold at once (an SM left without a partner in its GPC idles).
  int slots = std::max(1, sms);
  if constexpr (kCluster > 1) {
    // Per device ordinal; atomic because prepared weights may be called from several threads.
    static std::atomic<int> cached[64] = {};
    int dev = 0;
    MIXQ_CUDA_CHECK(cudaGetDevice(&dev));
    int c = cached[dev & 63].load(std::memory_order_relaxed);
    if (c == 0) {
      cfg.gridDim = dim3(kCluster * slots);
      MIXQ_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&c, kernel, &cfg));
      MIXQ_CHECK(c > 0, ErrorCode::Cuda, name, ": no cluster of ", kCluster,
                 " CTAs with ", Shape::kSmemBytes, " bytes of shared memory fits on device ", dev);
      cached[dev & 63].store(c, std::memory_order_relaxed);
    }
    slots = std::min(slots / kCluster, c);
  }
  cfg.gridDim = split > 1 ? dim3(p.num_tiles * split)
                          : dim3(kCluster * std::max(1, std::min(p.num_tiles, slots)));
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, tm_a, tm_b, tm_y, pp, p));
  MIXQ_CUDA_CHECK_LAUNCH(name);
}

}  // namespace mixq::cuda
