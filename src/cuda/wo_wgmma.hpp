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
// k_perm must be null (gather first).
// stream_k (plan_weight_only decides): the warp-specialized kernel (sm90_wo_wgmma_ws.cu), grid.y
// ignored, p.partial / p.tickets the stream-K slots and tickets of wo_stream_k.hpp (tickets zero
// before the launch, left zero). Otherwise the v1 kernel of sm90_wo_wgmma.cu (mt 16/32 run as 64):
// splits > 1: p.partial holds [splits][M][N] f32 and a reduction kernel applies the epilogue.
// codes: 4, 8 or kCodesE4M3 (wo_layout.hpp; e4m3 on the warp-specialized kernel only).
void launch_wo_wgmma(const WoStreamParams& p, int mt, int codes, dim3 grid, bool stream_k,
                     cudaStream_t stream);

// Warp-specialized TMA/mbarrier kernel (sm90_wo_wgmma_ws.cu): persistent over num_n x num_m tiles
// of 128 weight rows x mt tokens (mt = 16, 32, 64, 128, 256), hybrid data-parallel + stream-K.
bool wo_wgmma_ws_available(int device);
void launch_wo_wgmma_ws(const WoStreamParams& p, int mt, int codes, int num_n, int num_m,
                        cudaStream_t stream);
#if defined(MIXQ_WS_DIAG_BUILD)
// Diagnostic builds: writes the per-CTA timing log of the warp-specialized kernel (CSV).
void ws_diag_dump_cta_log(const char* path);
#endif

}  // namespace mixq::cuda
