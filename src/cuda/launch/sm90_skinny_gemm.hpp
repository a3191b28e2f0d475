// Host side of the few-token 8-bit GEMMs (kernels/sm90_skinny_gemm.cuh; FP8 block-scaled in
// sm90_fp8_skinny.cu, INT8 W8A8 per block in sm90_i8_skinny.cu): the plan a prepared weight sizes
// its workspace from and the launcher runs, the workspace's layout (shared by the prepared
// weights), and the dependent-launch switch.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/common/stream_k.hpp"
#include "mixq/tensor.hpp"

namespace mixq::cuda {

// Token tiles of 16, 32, 64 or 128: the kernels serve M <= 128 (each backend's dispatch decides
// up to which M it runs them).
constexpr int64_t kSm90SkinnyMaxM = 128;

struct Sm90SkinnyPlan {
  int mt = 0;                  // token tile (16, 32, 64, 128)
  StreamKSchedule sched;       // ceil(N / 128) weight tiles x ceil(K / 128) iterations (stages)
  int64_t partial_floats = 0;  // workspace of the cut tiles' pieces (f32, 16-byte aligned)
  int64_t tickets = 0;         // one unsigned per stream-K tile, zero before the launch
};

// The plan for an M x N x K call on `sms` SMs; mt 0 picks the smallest token tile >= M, else it
// must be 16, 32, 64 or 128 and >= M (throws InvalidArgument otherwise).
Sm90SkinnyPlan sm90_skinny_plan(int64_t M, int64_t N, int64_t K, int sms, int mt = 0);

// The bytes a call's workspace holds for the plan after its quantized activations: the partial
// sums, then (with a caller workspace) the tickets.
size_t sm90_skinny_workspace_bytes(const Sm90SkinnyPlan& plan);

// Where a call's partial sums and tickets live.
struct Sm90SkinnyWork {
  float* partial = nullptr;
  unsigned* tickets = nullptr;
  int64_t n_clear = 0;  // tickets the quantizer launched before the GEMM must zero (ActQuantClear)
};
// The partial sums at `at` (256-byte aligned, sm90_skinny_workspace_bytes(plan) bytes there). The
// tickets: the prepared weight's own (`own`: zero between launches, every launch leaves them
// zero) or, in a caller's workspace (`caller_ws`), right after the partial sums; its memory holds
// anything, so they are zeroed by the call's quantizer (`quantizer_clears`: n_clear set) or else
// cleared on `stream` here.
Sm90SkinnyWork sm90_skinny_work(char* at, const Sm90SkinnyPlan& plan, unsigned* own,
                                bool caller_ws, cudaStream_t stream, bool quantizer_clears = false);
// A prepared weight's own tickets for N weight rows (one per 128-row tile), zeroed.
DeviceBuffer sm90_skinny_tickets(int64_t N, int device);

}  // namespace mixq::cuda
