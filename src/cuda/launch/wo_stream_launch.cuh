// Instantiation helper for the streaming kernel; included by one .cu per activation type so the
// configurations compile in parallel.
#pragma once

#include "cuda/runtime/check.hpp"
#include "cuda/kernels/wo/sm80_wo_stream.cuh"
#include "cuda/runtime/launch_config.hpp"
#include "cuda/launch/wo_kernels.hpp"
#include "mixq/error.hpp"

#include <type_traits>

namespace mixq::cuda {

template <typename MmaT, int MT, int BITS, bool SPLIT_X, bool FINE>
void launch_stream_kernel(const WoStreamParams& p, dim3 grid, size_t smem, cudaStream_t stream) {
  constexpr auto kernel = wo_stream_kernel<MmaT, MT, BITS, SPLIT_X, FINE, kStreamWarps>;
  MIXQ_CUDA_CHECK(ensure_stream_kernel_attributes<kernel>(p.cluster));
  const WoLaunchConfig launch(p, grid, kStreamWarps * 32, smem, stream);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&launch.cfg, kernel, p));
}

// The plan's instantiation: token tile, code kind and fine groups (shorter than a 64-wide chunk:
// the per-tile fold test) of activation type MmaT (SPLIT_X: f32 activations as hi / lo halves).
template <typename MmaT, bool SPLIT_X>
void launch_stream_for_type(const WoStreamParams& p, const WoPlan& plan, cudaStream_t stream) {
  const dim3 grid(unsigned(plan.n_blocks), unsigned(plan.splits), unsigned(plan.m_blocks));
  const KernelId& id = plan.id;
  bool launched = false;
  auto go = [&](auto mt, auto codes, auto fine) {
    if (id.tile_m == decltype(mt)::value && id.codes == decltype(codes)::value && id.fine == decltype(fine)::value) {
      launch_stream_kernel<MmaT, decltype(mt)::value, decltype(codes)::value, SPLIT_X, decltype(fine)::value>(
          p, grid, plan.smem_bytes, stream);
      launched = true;
    }
  };
  auto each_fine = [&](auto mt, auto codes) {
    go(mt, codes, std::false_type{});
    go(mt, codes, std::true_type{});
  };
  auto each_code = [&](auto mt) {
    each_fine(mt, std::integral_constant<int, kCodesU4>{});
    each_fine(mt, std::integral_constant<int, kCodesU8>{});
    each_fine(mt, std::integral_constant<int, kCodesE4M3>{});
  };
  each_code(std::integral_constant<int, 8>{});
  each_code(std::integral_constant<int, 16>{});
  each_code(std::integral_constant<int, 32>{});
  each_code(std::integral_constant<int, 64>{});
  MIXQ_CHECK(launched, ErrorCode::Internal, "wo stream: no instance of ", id.name());
}

}  // namespace mixq::cuda
