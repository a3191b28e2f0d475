// Host-side entry points of the mixture-of-experts kernels (plain C++ declarations).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/dispatch/moe_plan.hpp"
#include "cuda/kernels/common/wo_params.hpp"
#include "cuda/kernels/moe/moe_params.hpp"

namespace mixq::cuda {

void launch_moe_schedule(const MoeScheduleParams& p, cudaStream_t stream);
// The grouped streaming kernel of plan: grid (n_blocks, 1, max_tiles); x_type picks the file.
void launch_moe_wo_stream(const WoStreamParams& base, const MoeWoExperts& g, const MoeWoPlan& plan,
                          cudaStream_t stream);
void launch_moe_wo_stream_f16(const WoStreamParams& base, const MoeWoExperts& g, const MoeWoPlan& plan, cudaStream_t stream);
void launch_moe_wo_stream_bf16(const WoStreamParams& base, const MoeWoExperts& g, const MoeWoPlan& plan, cudaStream_t stream);
void launch_moe_wo_stream_f32(const WoStreamParams& base, const MoeWoExperts& g, const MoeWoPlan& plan, cudaStream_t stream);

// The grouped wgmma kernel of plan (family WoWgmma): a persistent grid of plan.sched.grid CTAs.
void launch_moe_wo_wgmma(const WoStreamParams& base, const MoeWsGroup& g, const MoeWoPlan& plan,
                         cudaStream_t stream);

// pdl (the routing launchers below): a programmatic dependent launch (kernels/grid_dependency.cuh);
// only where the loaded image is sm_90 code (DeviceCaps::stream_clusters), whose kernels wait for
// the previous grid before they touch memory.
// scratch: moe_route_scratch_bytes(E) of device memory (the per-warp counters of many experts, or
// the per-block counts of the three-grid form that large R takes; kernels/moe/moe_route.cuh).
void launch_moe_route(const int32_t* ids, int R, int E, int32_t* offsets, int32_t* sorted,
                      int32_t* position, int32_t* scratch, int32_t* error, cudaStream_t stream,
                      bool pdl);
size_t moe_route_scratch_bytes(int64_t E);
void launch_moe_gather(const void* x, int64_t ldx_bytes, const int32_t* sorted, int R, int k,
                       int64_t row_bytes, void* xs, int64_t ldxs_bytes, cudaStream_t stream, bool pdl);
// types: 0 f16, 1 bf16, 2 f32
void launch_moe_scatter_add(const void* ys, int64_t ldys, int ys_type, const int32_t* position,
                            const float* w, int T, int k, int N, void* y, int64_t ldy, int y_type,
                            bool accumulate, cudaStream_t stream, bool pdl);
void launch_moe_activation_mul(const void* h, int64_t ldh, void* out, int64_t ldo, int type, int R,
                               int I, int act, cudaStream_t stream, bool pdl);

}  // namespace mixq::cuda
