// Instantiation helper of the grouped streaming kernel; included by one .cu per activation type.
#pragma once

#include <type_traits>

#include "cuda/kernels/moe/sm80_moe_wo_stream.cuh"
#include "cuda/launch/moe_kernels.hpp"
#include "cuda/launch/wo_kernels.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/launch_config.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

template <typename MmaT, int MT, int BITS, bool SPLIT_X, bool FINE>
void launch_moe_stream_kernel(const WoStreamParams& p, const MoeWoExperts& g, dim3 grid, size_t smem,
                              cudaStream_t stream) {
  constexpr auto kernel = moe_wo_stream_kernel<MmaT, MT, BITS, SPLIT_X, FINE, kStreamWarps>;
  MIXQ_CUDA_CHECK(ensure_stream_kernel_attributes<kernel>(p.cluster));
  // The splits of a tile as one cluster where p.cluster; a dependent launch of the schedule kernel
  // where p.pdl (the blocks wait for it before they read the tile list).
  const WoLaunchConfig launch(p, grid, kStreamWarps * 32, smem, stream);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&launch.cfg, kernel, p, g));
}

template <typename MT, typename CODES, typename GO>
void for_each_fine(MT mt, CODES codes, GO& go) {
  go(mt, codes, std::false_type{});
  go(mt, codes, std::true_type{});
}

template <typename MmaT, bool SPLIT_X>
void launch_moe_stream_for_type(const WoStreamParams& p, const MoeWoExperts& g, const MoeWoPlan& plan,
                                cudaStream_t stream) {
  if (plan.max_tiles == 0) return;
  const dim3 grid(unsigned(plan.n_blocks), unsigned(plan.splits), unsigned(plan.max_tiles));
  const KernelId& id = plan.id;
  bool launched = false;
  auto go = [&](auto mt, auto codes, auto fine) {
    if (id.tile_m == decltype(mt)::value && id.codes == decltype(codes)::value &&
        id.fine == decltype(fine)::value) {
      launch_moe_stream_kernel<MmaT, decltype(mt)::value, decltype(codes)::value, SPLIT_X,
                               decltype(fine)::value>(p, g, grid, plan.smem_bytes, stream);
      launched = true;
    }
  };
  auto each_code = [&](auto mt) {
    for_each_fine(mt, std::integral_constant<int, kCodesU4>{}, go);
    for_each_fine(mt, std::integral_constant<int, kCodesU8>{}, go);
    for_each_fine(mt, std::integral_constant<int, kCodesE4M3>{}, go);
  };
  each_code(std::integral_constant<int, kMoeTileTiny>{});
  each_code(std::integral_constant<int, kMoeTileSmall>{});
  each_code(std::integral_constant<int, kMoeTileLarge>{});
  MIXQ_CHECK(launched, ErrorCode::Internal, "moe wo stream: no instance of ", id.name());
}

}  // namespace mixq::cuda
