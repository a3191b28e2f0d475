// Host entry point of the Hopper weight-only wgmma kernel (kernels/wo/sm90_wo_ws.cuh).
#pragma once

#include <cuda_runtime.h>

#include "cuda/dispatch/wo_plan.hpp"
#include "cuda/kernels/common/wo_params.hpp"

namespace mixq::cuda {

// Runs plan (family WoWgmma) on p: x f16/bf16 with 16-byte aligned rows (k_perm null: gathered
// first), p.partial / p.tickets the stream-K slots and flags (flags zero before the launch, left
// zero), p.pdl as the plan says. Stream-ordered, no synchronisation.
void launch_wo_wgmma(const WoStreamParams& p, const WoPlan& plan, cudaStream_t stream);

}  // namespace mixq::cuda
