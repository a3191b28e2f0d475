// Internal: what a backend's stacked experts implement, and the backend entry points of the MoE
// ops. core/moe.cpp validates every argument the host can see, then calls these.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mixq/moe.hpp"

namespace mixq {

// A grouped call after validation: x / y flattened to [rows][K] / [rows][N]; for the masked
// layout rows = E * max_tokens.
struct GroupedCall {
  TensorView x, y;
  MoeRows rows;
  TensorView bias;        // empty, [N] or [E][N] (rank kept)
  bool bias_per_expert = false;
};

struct PreparedExpertsImpl {
  BackendKind backend = BackendKind::Reference;
  PrepareOptions opts;
  int64_t E = 0, N = 0, K = 0;
  std::vector<PreparedWeight> experts;

  virtual ~PreparedExpertsImpl() = default;
  // A backend's constructor: the experts (at least one, of one shape), their options and backend.
  void adopt(std::vector<PreparedWeight> w, const PrepareOptions& o, BackendKind b) {
    backend = b;
    opts = o;
    E = int64_t(w.size());
    N = w[0].N();
    K = w[0].K();
    experts = std::move(w);
  }
  // activation: none for the backend's default
  virtual std::string kernel_name(int64_t rows, std::optional<DType> activation) const = 0;
  virtual size_t workspace_size(int64_t rows) const = 0;
  virtual void grouped_linear(const GroupedCall& call, const Epilogue& ep,
                              const ExecContext& ctx) const = 0;
};

// Host backends (Reference, CPU): the experts' own linear() per expert, threaded over experts.
std::shared_ptr<const PreparedExpertsImpl> prepare_experts_host(std::vector<PreparedWeight> experts,
                                                                const PrepareOptions& opts);

// The routing helpers on the host (src/cpu/cpu_moe_routing.cpp), threaded over rows / tokens;
// their arguments validated by the caller (sorted_pairs / pair_position in range).
void moe_gather_host(const TensorView& x, const TensorView& sorted_pairs, int64_t topk,
                     const TensorView& xs, const ExecContext& ctx);
void moe_scatter_add_host(const TensorView& ys, const TensorView& pair_position,
                          const TensorView& topk_weights, const TensorView& y, bool accumulate,
                          const ExecContext& ctx);
// out[r][i] = act(h[r][i]) * h[r][I + i] (h [rows][2I], out [rows][I]), in f32.
void moe_activation_mul_host(const TensorView& h, const TensorView& out, MoeActivation act,
                             const ExecContext& ctx);

// CUDA (src/cuda/backend/moe_*.cpp; src/core/moe_cuda_stub.cpp in a build without CUDA).
std::shared_ptr<const PreparedExpertsImpl> prepare_experts_cuda(std::vector<PreparedWeight> experts,
                                                                const PrepareOptions& opts);
size_t moe_route_workspace_size_cuda(int64_t num_experts);
void moe_route_cuda(const TensorView& topk_ids, int64_t num_experts, const TensorView& offsets,
                    const TensorView& sorted_pairs, const TensorView& pair_position,
                    const TensorView& error, const ExecContext& ctx);
void moe_gather_cuda(const TensorView& x, const TensorView& sorted_pairs, int64_t topk,
                     const TensorView& xs, const ExecContext& ctx);
void moe_scatter_add_cuda(const TensorView& ys, const TensorView& pair_position,
                          const TensorView& topk_weights, const TensorView& y, bool accumulate,
                          const ExecContext& ctx);
// out[r][i] = act(h[r][i]) * h[r][I + i] for r < rows (h [rows][2I], out [rows][I]).
void moe_activation_mul_cuda(const TensorView& h, const TensorView& out, MoeActivation act,
                             const ExecContext& ctx);

// The activation in f32, shared by the host path and the tests' expectations.
float moe_activation_f32(MoeActivation a, float g);

}  // namespace mixq
