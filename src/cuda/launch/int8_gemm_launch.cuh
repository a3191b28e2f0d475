// Internal: the launch of one sm80_int8_gemm_kernel configuration, and the per-file entry points
// (one .cu per K block flavour so that the instantiations compile in parallel).
#pragma once

#include "cuda/runtime/check.hpp"
#include "cuda/runtime/launch_config.hpp"
#include "cuda/launch/int8_gemm.hpp"
#include "cuda/kernels/w8a8/sm80_int8_gemm.cuh"

namespace mixq::cuda::int8k {

// The three tile shapes: small M streams the weight with many small CTAs; medium and large are
// compute tiles (8 warps of 64x32 for large: int32 partials + float sums = 128 registers).
// I: the implicit-GEMM conv2d form (Int8GemmParams::conv).
template <int BK, bool T, bool O, bool I = false>
using CfgSmall = Int8Cfg<16, 32, 1, 2, BK, 8, T, O, I>;
template <int BK, bool T, bool O, bool I = false>
using CfgMedium = Int8Cfg<64, 64, 2, 2, BK, (BK == 64 ? 6 : 5), T, O, I>;
template <int BK, bool T, bool O, bool I = false>
using CfgLarge = Int8Cfg<128, 128, 2, 4, BK, (BK == 64 ? 6 : 4), T, O, I>;

template <class C>
void launch_cfg(const Int8GemmParams& p, cudaStream_t stream) {
  auto kernel = sm80_int8_gemm_kernel<C>;
  if (C::kSmemBytes > 48 * 1024) {
    static PerDeviceAttribute smem_limit;  // once per device, not a driver call every launch
    MIXQ_CUDA_CHECK(smem_limit.ensure([kernel] {
      return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes);
    }));
  }
  const int64_t tiles = int64_t((p.M + C::BM - 1) / C::BM) * ((p.N + C::BN - 1) / C::BN);
  kernel<<<unsigned(tiles), C::kThreads, C::kSmemBytes, stream>>>(p);
  MIXQ_CUDA_CHECK(cudaGetLastError());  // launch-configuration errors, no synchronisation
}

// tile: 0 small, 1 medium, 2 large.
template <int BK, bool T, bool O, bool I = false>
void launch_tile(const Int8GemmParams& p, int tile, cudaStream_t stream) {
  if (tile == 0) launch_cfg<CfgSmall<BK, T, O, I>>(p, stream);
  else if (tile == 1) launch_cfg<CfgMedium<BK, T, O, I>>(p, stream);
  else launch_cfg<CfgLarge<BK, T, O, I>>(p, stream);
}

void launch_block_g64(const Int8GemmParams& p, int tile, cudaStream_t stream);
void launch_block_g128(const Int8GemmParams& p, int tile, cudaStream_t stream);
void launch_tensor(const Int8GemmParams& p, int tile, cudaStream_t stream);

}  // namespace mixq::cuda::int8k
