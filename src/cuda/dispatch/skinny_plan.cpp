// The few-token GEMMs' plan (sm90_skinny_gemm.hpp): token tile, stream-K schedule, workspace.

#include "cuda/runtime/check.hpp"
#include "cuda/dispatch/stream_k_plan.hpp"
#include "cuda/launch/sm90_skinny_gemm.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

Sm90SkinnyPlan sm90_skinny_plan(int64_t M, int64_t N, int64_t K, int sms, int mt) {
  MIXQ_CHECK_ARG(M >= 1 && M <= kSm90SkinnyMaxM && N >= 1 && K >= 1,
                 "sm90 skinny gemm: M (", M, ") must be in [1, ", kSm90SkinnyMaxM, "], N (", N,
                 ") and K (", K, ") positive");
  MIXQ_CHECK_ARG(mt == 0 || ((mt == 16 || mt == 32 || mt == 64 || mt == 128) && M <= mt),
                 "sm90 skinny gemm: token tile ", mt, " must be 16, 32, 64 or 128 and hold M = ",
                 M);
  Sm90SkinnyPlan plan;
  plan.mt = mt ? mt : M <= 16 ? 16 : M <= 32 ? 32 : M <= 64 ? 64 : 128;
  StreamKSchedule& s = plan.sched;
  s.num_n = int((N + 127) / 128);
  s.num_m = 1;
  s.tiles = s.num_n;
  s.chunks = int((K + 127) / 128);
  s.cps = 1;
  // Every tile in the stream-K part: each SM streams the same number of 16 KB weight stages
  // (decode is bound by DRAM, so a partial last round of whole tiles would idle SMs).
  stream_k_split(s, 0, sms < 1 ? 1 : sms);
  plan.partial_floats = stream_k_partial_floats(s.grid, plan.mt);
  plan.tickets = s.tiles;
  return plan;
}

namespace {
size_t align256(size_t b) { return (b + 255) / 256 * 256; }
}  // namespace

size_t sm90_skinny_workspace_bytes(const Sm90SkinnyPlan& plan) {
  return align256(size_t(plan.partial_floats) * 4) + size_t(plan.tickets) * 4;
}

Sm90SkinnyWork sm90_skinny_work(char* at, const Sm90SkinnyPlan& plan, unsigned* own,
                                bool caller_ws, cudaStream_t stream, bool quantizer_clears) {
  Sm90SkinnyWork w{reinterpret_cast<float*>(at), own};
  if (caller_ws) {
    w.tickets = reinterpret_cast<unsigned*>(at + align256(size_t(plan.partial_floats) * 4));
    if (quantizer_clears) w.n_clear = plan.tickets;
    else MIXQ_CUDA_CHECK(cudaMemsetAsync(w.tickets, 0, size_t(plan.tickets) * 4, stream));
  }
  return w;
}

DeviceBuffer sm90_skinny_tickets(int64_t N, int device) {
  DeviceBuffer t(size_t((N + 127) / 128) * 4, device);
  MIXQ_CUDA_CHECK(cudaMemset(t.data(), 0, t.size()));
  return t;
}

}  // namespace mixq::cuda
