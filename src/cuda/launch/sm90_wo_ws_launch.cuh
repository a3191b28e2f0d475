// Launch of one configuration of the warp-specialized Hopper weight-only kernel
// (kernels/wo/sm90_wo_ws.cuh) and of its stream-K fixup: it executes the plan's schedule, decides
// nothing. Included only by the generated instance files (one per token tile, code kind, shape and
// activation type: cmake/cuda_instances.cmake), so the configurations compile in parallel.
#pragma once

#include <cuda_runtime.h>

#include "cuda/kernels/wo/sm90_wo_ws.cuh"
#include "cuda/launch/sm90_wo_ws_instances.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/launch_config.hpp"
#include "mixq/error.hpp"

#include <type_traits>

namespace mixq::cuda {

template <typename T, int MT, int CODES, sm90::PairPath PP, ws_detail::WsShape SHAPE, bool FOLD>
void launch_ws_kernel(const WoStreamParams& p, const WsMaps& tm, const StreamKSchedule& sch, bool fixup,
                      cudaStream_t stream) {
  using namespace ws_detail;
  if constexpr (!ws_variant_exists(ws_act_of<T>(), MT, CODES, PP, SHAPE, FOLD)) {
    // every (pair path, fold) of a configuration is instantiated; the registry calls built ones only
    (void)p, (void)tm, (void)sch, (void)fixup, (void)stream;
    MIXQ_FAIL(ErrorCode::Internal, "wo wgmma: variant not built");
  } else {
    auto kernel = wo_wgmma_ws_kernel<T, MT, CODES, PP, SHAPE, FOLD>;
    const size_t smem = WsTile<MT, CODES, SHAPE>::kSmem;
    static PerDeviceAttribute smem_limit;
    MIXQ_CUDA_CHECK(smem_limit.ensure(
        [&] { return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)); }));
    {
      // K split over clusters of k_split CTAs along x (sm90_wo_ws_k_split.cuh): the instantiations
      // that have it, one piece a CTA, no stream-K reduction (the plan's rule; checked here, the
      // kernel relies on it)
      const int split = sch.k_split;
      MIXQ_CHECK(split == 1 || ((split == 2 || split == 4 || split == 8) &&
                                ws_k_split_built(MT, FOLD, false) && !fixup && !sch.inline_reduce &&
                                sch.dp_tiles == 0 && split <= sch.chunks &&
                                int64_t(sch.grid) == int64_t(sch.tiles) * split),
                 ErrorCode::Internal, "wo wgmma: K split ", split, " at token tile ", MT, " over ",
                 sch.chunks, " iterations, grid ", sch.grid, " for ", sch.tiles, " tiles");
      const WoLaunchConfig lc(dim3(unsigned(sch.grid)), kWsThreads, smem, stream, p.pdl,
                              dim3(unsigned(split), 1, 1));
      MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, kernel, tm.x, tm.w, tm.p, tm.y, tm.s, p, sch, MoeWsGroup{}));
    }
    if (fixup) {
      const dim3 grid(unsigned(sch.sk_tiles), 2, unsigned(MT / 8 / kFixupQ));
      const WoLaunchConfig lc(grid, 128, 0, stream, p.pdl);
      MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, stream_k_fixup_kernel<MT>, p, sch));
    }
  }
}

template <typename T, int MT, int CODES, sm90::PairPath PP, ws_detail::WsShape SHAPE, bool FOLD>
void launch_moe_ws_kernel(const WoStreamParams& p, const CUtensorMap& tm_x, const CUtensorMap& tm_s,
                          const CUtensorMap& tm_y, const StreamKSchedule& sch, const MoeWsGroup& g,
                          cudaStream_t stream) {
  using namespace ws_detail;
  if constexpr (!moe_ws_variant_exists(ws_act_of<T>(), MT, CODES, PP, SHAPE, FOLD)) {
    (void)p, (void)tm_x, (void)tm_s, (void)tm_y, (void)sch, (void)g, (void)stream;
    MIXQ_FAIL(ErrorCode::Internal, "moe wo wgmma: variant not built");
  } else {
    auto kernel = wo_wgmma_ws_kernel<T, MT, CODES, PP, SHAPE, FOLD, true>;
    const size_t smem = WsTile<MT, CODES, SHAPE>::kSmem;
    static PerDeviceAttribute smem_limit;
    MIXQ_CUDA_CHECK(smem_limit.ensure(
        [&] { return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)); }));
    // A dependent launch of the schedule kernel where p.pdl: the CTAs start (barriers, registers,
    // descriptor prefetch) while it runs and wait for it before they read the tile list.
    const WoLaunchConfig lc(dim3(unsigned(sch.grid)), kWsThreads, smem, stream, p.pdl);
    const CUtensorMap unused{};  // the weight and pair descriptors are the experts'
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, kernel, tm_x, unused, unused, tm_y, tm_s, p, sch, g));
  }
}

// One configuration's explicit instantiations (the generated instance files): every pair path and
// fold of the plain (MIXQ_WS_CONFIGURATION) or grouped (MIXQ_MOE_WS_CONFIGURATION) launcher; the
// variants ws_variant_exists does not admit compile to an error path without a kernel.
#define MIXQ_WS_EACH_VARIANT(VARIANT, T, MT, CODES, SHAPE) \
  VARIANT(T, MT, CODES, SHAPE, F32, false)                 \
  VARIANT(T, MT, CODES, SHAPE, F32, true)                  \
  VARIANT(T, MT, CODES, SHAPE, Half, false)                \
  VARIANT(T, MT, CODES, SHAPE, Half, true)                 \
  VARIANT(T, MT, CODES, SHAPE, Bf16Zero, false)            \
  VARIANT(T, MT, CODES, SHAPE, Bf16Zero, true)
#define MIXQ_WS_VARIANT(T, MT, CODES, SHAPE, PP, FOLD)                                               \
  template void launch_ws_kernel<T, MT, CODES, sm90::PairPath::PP, ws_detail::WsShape::SHAPE, FOLD>( \
      const WoStreamParams&, const WsMaps&, const StreamKSchedule&, bool, cudaStream_t);
#define MIXQ_MOE_WS_VARIANT(T, MT, CODES, SHAPE, PP, FOLD)                                                   \
  template void launch_moe_ws_kernel<T, MT, CODES, sm90::PairPath::PP, ws_detail::WsShape::SHAPE, FOLD>( \
      const WoStreamParams&, const CUtensorMap&, const CUtensorMap&, const CUtensorMap&, const StreamKSchedule&, \
      const MoeWsGroup&, cudaStream_t);
#define MIXQ_WS_CONFIGURATION(T, MT, CODES, SHAPE) MIXQ_WS_EACH_VARIANT(MIXQ_WS_VARIANT, T, MT, CODES, SHAPE)
#define MIXQ_MOE_WS_CONFIGURATION(T, MT, CODES, SHAPE) MIXQ_WS_EACH_VARIANT(MIXQ_MOE_WS_VARIANT, T, MT, CODES, SHAPE)

}  // namespace mixq::cuda
