// Host entry points of the Hopper weight-only wgmma kernel (sm90_wo_wgmma.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "cuda/wo_params.hpp"

namespace mixq::cuda {

// True when this binary carries the sm_90a kernel and device `device` can run it.
bool wo_wgmma_available(int device);
// Dynamic shared memory of one CTA for a token tile mt (64, 128, 256) and code width.
size_t wo_wgmma_smem_bytes(int mt, int bits);
// grid = (ceil(N / 128), splits, ceil(M / mt)), 256 threads. x: f16/bf16, rows 16-byte aligned,
// k_perm must be null (gather first). splits > 1: p.partial holds [splits][M][N] f32 and a
// reduction kernel applies the epilogue.
void launch_wo_wgmma(const WoStreamParams& p, int mt, int bits, dim3 grid, cudaStream_t stream);

}  // namespace mixq::cuda
