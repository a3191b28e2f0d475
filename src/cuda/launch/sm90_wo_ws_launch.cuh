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

namespace mixq::cuda {

template <typename T, int MT, int CODES, sm90::PairPath PP, ws_detail::WsShape SHAPE, bool FOLD>
void launch_ws_kernel(const WoStreamParams& p, const WsMaps& tm, const StreamKSchedule& sch, bool fixup,
                      cudaStream_t stream) {
  using namespace ws_detail;
  auto kernel = wo_wgmma_ws_kernel<T, MT, CODES, PP, SHAPE, FOLD>;
  const size_t smem = WsTile<MT, CODES, SHAPE>::kSmem;
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  MIXQ_CUDA_CHECK(attr);
  {
    const WoLaunchConfig lc(dim3(unsigned(sch.grid)), kWsThreads, smem, stream, p.pdl);
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, kernel, tm.x, tm.w, tm.p, tm.y, p, sch));
  }
  if (fixup) {
    const dim3 grid(unsigned(sch.sk_tiles), 2, unsigned(MT / 8 / kFixupQ));
    const WoLaunchConfig lc(grid, 128, 0, stream, p.pdl);
    MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, stream_k_fixup_kernel<MT>, p, sch));
  }
}

// Every variant (pair path, fold) of one configuration that ws_variant_exists admits: taking their
// addresses instantiates them in the including translation unit.
template <typename T, int MT, int CODES, ws_detail::WsShape SHAPE>
void instantiate_ws_configuration() {
  using sm90::PairPath;
  constexpr bool bf16 = !std::is_same_v<T, half>;
  auto one = [](auto pp, auto fold) {
    constexpr PairPath PP = decltype(pp)::value;
    constexpr bool FOLD = decltype(fold)::value;
    if constexpr (ws_variant_exists(bf16, MT, CODES, PP, SHAPE == ws_detail::WsShape::TwoCtas, FOLD))
      (void)&launch_ws_kernel<T, MT, CODES, PP, SHAPE, FOLD>;
  };
  using F32 = std::integral_constant<PairPath, PairPath::F32>;
  using Half = std::integral_constant<PairPath, PairPath::Half>;
  using Bz = std::integral_constant<PairPath, PairPath::Bf16Zero>;
  one(F32{}, std::false_type{});
  one(F32{}, std::true_type{});
  one(Half{}, std::false_type{});
  one(Half{}, std::true_type{});
  one(Bz{}, std::false_type{});
  one(Bz{}, std::true_type{});
}

}  // namespace mixq::cuda
