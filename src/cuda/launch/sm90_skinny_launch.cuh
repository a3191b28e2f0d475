// Launch of a few-token GEMM kernel (kernels/sm90_skinny_gemm.cuh) for one policy and token tile,
// shared by the FP8 and INT8 launchers.
#pragma once

#include <cuda_runtime.h>

#include "cuda/runtime/check.hpp"
#include "cuda/kernels/w8a8/sm90_skinny_grouped.cuh"
#include "cuda/launch/sm90_block_grouped.hpp"
#include "cuda/launch/sm90_skinny_gemm.hpp"
#include "cuda/runtime/launch_config.hpp"

namespace mixq::cuda {

// Up to 8 stages of 16 KB of weights: 128 KB in flight per SM, ~17 MB over the GPU, several times
// what the H100's DRAM needs to stay busy (~3 TB/s x ~2 us); fewer where the stages' meta and
// token tiles leave no room (INT8 g = 64 with offsets at 64 tokens: 7).
// kReserve: shared memory the kernel needs beside the ring (the grouped form's in-kernel schedule).
template <class Policy, int MT, int kReserve = 0>
constexpr int skinny_stages() {
  int s = 8;
  while (s > 2 && sm90::SkinnyShape<Policy, MT, 8>::kStageBytes * s + 1024 + 16 * s + 16 + kReserve >
                      227 * 1024)
    --s;
  return s;
}

template <class Policy, int MT>
void launch_skinny_kernel(const CUtensorMap& tm_w, const CUtensorMap& tm_x,
                          const typename Policy::Params& pp, const sm90::SkinnyParams& p,
                          bool pdl, cudaStream_t stream, const char* name) {
  constexpr int kStages = skinny_stages<Policy, MT>();
  using Shape = sm90::SkinnyShape<Policy, MT, kStages>;
  static_assert(Shape::kSmemBytes <= 227 * 1024, "the ring must fit in shared memory");
  auto kernel = sm90::sm90_skinny_kernel<Policy, MT, kStages>;
  static PerDeviceAttribute smem_limit;  // once per device, not a driver call every launch
  MIXQ_CUDA_CHECK(smem_limit.ensure([kernel] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSmemBytes);
  }));
  WoLaunchConfig lc(dim3(p.sched.grid), Shape::kThreads, Shape::kSmemBytes, stream, pdl);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, kernel, tm_w, tm_x, pp, p));
  MIXQ_CUDA_CHECK_LAUNCH(name);
  (void)name;  // MIXQ_CUDA_CHECK_LAUNCH may not use it
}

// The grouped form's fields from a grouped call: the experts' descriptors (maps_per_expert each,
// the codes at w_map and the weight meta at wmeta_map), the tile list, the output and the pieces'
// workspace; 128-K stages.
inline sm90::SkinnyParams skinny_grouped_params(const BlockGroupedCall& c, const SkinnyGroupedWork& w,
                                                int maps_per_expert, int w_map, int wmeta_map) {
  sm90::SkinnyParams p;
  p.set(int(c.rows), int(c.N), StreamKSchedule{}, w.partial, w.tickets, c.y, c.ldy, c.y_type, c.bias,
        c.bias_type, c.clamp_lo, c.clamp_hi);
  sm90::SkinnyGroup& g = p.group;
  g.n_tiles = c.n_tiles;
  g.tiles = c.tiles;
  g.maps = c.maps;
  g.maps_per_expert = maps_per_expert;
  g.w_map = w_map;
  g.wmeta_map = wmeta_map;
  g.num_n = int((c.N + 127) / 128);
  g.num_kb = int((c.K + 127) / 128);
  g.splits = w.splits;
  g.bias_stride = c.bias_stride;
  g.offsets = c.offsets;
  g.counts = c.counts;
  g.E = int(c.E);
  g.rows = int(c.rows);
  g.max_tokens = int(c.max_tokens);
  g.capacity = int(c.max_tiles);
  g.error = c.error;
  return p;
}

// One CTA per SM, persistent; when c.pdl a dependent launch of the quantizer (sm90_skinny_grouped.cuh
// reads the routing, or the schedule kernel's list launched before the quantizer, before its wait).
template <class Policy, int MT>
void launch_skinny_grouped_kernel(const CUtensorMap& tm_x, const typename Policy::Params& pp,
                                  const sm90::SkinnyParams& p, const BlockGroupedCall& c,
                                  cudaStream_t stream, const char* name) {
  constexpr int kStages = skinny_stages<Policy, MT, sm90::kSkinnyScheduleSmem>();
  using Shape = sm90::SkinnyShape<Policy, MT, kStages>;
  constexpr int kMaxDynamic = Shape::kSmemBytes + (sm90::kSkinnyScheduleMaxE + 1) * 4;
  static_assert(Shape::kSmemBytes + sm90::kSkinnyScheduleSmem <= 227 * 1024,
                "the ring and the in-kernel schedule (dynamic and static) must fit in shared memory");
  const bool own = p.group.offsets != nullptr || p.group.counts != nullptr;
  MIXQ_CHECK(!own || (p.group.E >= 1 && p.group.E <= sm90::kSkinnyScheduleMaxE), ErrorCode::Internal,
             name, ": an in-kernel schedule of ", p.group.E, " experts (1 .. ", sm90::kSkinnyScheduleMaxE, ")");
  const int smem = Shape::kSmemBytes + (own ? (p.group.E + 1) * 4 : 0);
  auto kernel = sm90::sm90_skinny_grouped_kernel<Policy, MT, kStages>;
  static PerDeviceAttribute smem_limit;  // once per device, not a driver call every launch
  MIXQ_CUDA_CHECK(smem_limit.ensure([kernel] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxDynamic);
  }));
  const int64_t pieces = c.max_tiles * p.group.num_n * p.group.splits;
  const int grid = int(pieces < c.num_sms ? pieces : c.num_sms);
  WoLaunchConfig lc(dim3(grid), Shape::kThreads, smem, stream, c.pdl);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, kernel, tm_x, pp, p));
  MIXQ_CUDA_CHECK_LAUNCH(name);
  (void)name;
}

}  // namespace mixq::cuda
