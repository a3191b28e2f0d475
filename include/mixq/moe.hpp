// Mixture-of-experts: stacked expert weights, the grouped linear over them, the routing helpers
// that move tokens into and out of the grouped layout, and moe_mlp, which chains them.
//
// Conventions (those of mixq/ops.hpp): each expert e holds W_e[N][K]; X rows are tokens (or
// token-expert pairs after routing). The grouped linear computes, for every expert e,
//   Y[r] = X[r] . W_e^T (+ bias), then the clamp, for each row r routed to e,
// in one call, with the two row layouts serving engines use:
//   contiguous  rows sorted by expert: expert e owns rows [offsets[e], offsets[e + 1]) of X / Y
//               (offsets: [E + 1] i32, offsets[0] = 0, non-decreasing, offsets[E] = rows of X);
//   masked      a fixed [E][max_tokens] buffer (X [E * max_tokens][K] or [E][max_tokens][K]):
//               expert e owns its first counts[e] rows (counts: [E] i32, 0 <= counts[e] <=
//               max_tokens); the rows past counts[e] are neither read nor written. For decode
//               under CUDA graphs: shapes stay fixed while the counts change between replays.
// Experts without rows cost nothing.
//
// Where offsets / counts / expert ids are checked:
//   - CPU backends (Reference, CPU): on the host, before any work; a bad value throws
//     InvalidArgument naming the argument, the index and the value.
//   - CUDA: they live on the device and reading them would synchronise the host, so the kernels
//     check them. A call whose offsets are not non-decreasing from 0 to the row count, whose
//     counts exceed max_tokens, or whose expert ids are out of [0, E) does no work at all (the
//     outputs are left as they were: never an out-of-bounds access) and sets bits of
//     MoeRows::error (an optional [1] i32 on the device, which the caller zeroes and reads when it
//     wants: kMoeErrorOffsets, kMoeErrorCounts, kMoeErrorExpertId). Everything the host can see
//     (shapes, dtypes, devices, E, the workspace) is checked on the host as everywhere else.
// Everything is stream-ordered and graph-capturable: no host synchronisation, no device-to-host
// copy, launch shapes that depend only on host-known sizes (rows of X, E, max_tokens).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixq/ops.hpp"

namespace mixq {

// ------------------------------------------------------------------------------ stacked experts

struct PreparedExpertsImpl;  // backend-specific, defined in src/

// E experts of one [N][K] shape, one scheme and one PrepareOptions, prepared once. Each expert is
// an ordinary PreparedWeight (expert(e)), so a grouped call with one expert runs exactly the
// kernels of linear() on it; the backend adds what a single launch over all experts needs (CUDA:
// device tables of the experts' repacked weights). docs/decisions/moe-stacked-experts.md.
class PreparedExperts {
 public:
  PreparedExperts() = default;
  explicit PreparedExperts(std::shared_ptr<const PreparedExpertsImpl> impl)
      : impl_(std::move(impl)) {}

  bool valid() const { return impl_ != nullptr; }
  int64_t num_experts() const;
  int64_t N() const;
  int64_t K() const;
  BackendKind backend() const;
  ActQuant act() const;
  const PreparedWeight& expert(int64_t e) const;
  // The kernel a grouped call with `rows` rows in all would run (its name); with `activation`, for
  // activations of that dtype (default: f16 on CUDA, f32 on the CPU).
  std::string kernel_name(int64_t rows) const;
  std::string kernel_name(int64_t rows, DType activation) const;
  const PreparedExpertsImpl& impl() const;

 private:
  std::shared_ptr<const PreparedExpertsImpl> impl_;
};

// Every expert must have the same N, K, code type, block sizes, scale type, zero kind and scales
// presence (a mismatch throws InvalidArgument naming the expert and both descriptions). Any scheme
// that prepare() accepts for opts (weight-only, act = Fp8Block, Int8Block) on the host backends; on
// CUDA: weight-only, W4A8 and FP8 block experts (act = Fp8Block) and INT8 W8A8 experts (act =
// Int8Block; the last three on Hopper with the sm_90a kernels, else Unsupported).
PreparedExperts prepare_experts(const std::vector<QuantizedWeight>& experts,
                                const PrepareOptions& opts = {});

// ------------------------------------------------------------------------------ grouped linear

constexpr int32_t kMoeErrorOffsets = 1;   // offsets not 0 .. rows, non-decreasing
constexpr int32_t kMoeErrorCounts = 2;    // a count < 0 or > max_tokens
constexpr int32_t kMoeErrorExpertId = 4;  // a top-k expert id outside [0, E)

// Which rows of X belong to which expert (see the layouts above). Views live on the weight's
// device.
struct MoeRows {
  enum class Layout : uint8_t { Contiguous, Masked };
  Layout layout = Layout::Contiguous;
  TensorView offsets;      // Contiguous: [E + 1] i32
  TensorView counts;       // Masked: [E] i32
  int64_t max_tokens = 0;  // Masked: rows per expert in the buffer
  TensorView error;        // optional [1] i32 (CUDA: the in-kernel checks' flag, see above)

  static MoeRows contiguous(const TensorView& offsets) {
    MoeRows r;
    r.offsets = offsets;
    return r;
  }
  static MoeRows masked(const TensorView& counts, int64_t max_tokens) {
    MoeRows r;
    r.layout = Layout::Masked;
    r.counts = counts;
    r.max_tokens = max_tokens;
    return r;
  }
};

// Scratch bytes a grouped call over `rows` rows of X needs (pass in ExecContext::workspace).
size_t grouped_linear_workspace_size(const PreparedExperts& w, int64_t rows);

// Y = X . W_e^T per expert (see the top of this file). x: [rows][K] (masked also [E][max][K]),
// y: [rows][N] (masked also [E][max][N]), dtypes as linear() on the experts; rows contiguous.
// ep.bias: empty, [N] (shared by every expert) or [E][N] (one row per expert). y must not
// overlap x, and the workspace (its first grouped_linear_workspace_size bytes) no argument.
void grouped_linear(const TensorView& x, const PreparedExperts& w, const TensorView& y,
                    const MoeRows& rows, const Epilogue& ep = {}, const ExecContext& ctx = {});

// ------------------------------------------------------------------------------ routing

// The contiguous layout of a top-k routing, T tokens, k experts per token, R = T * k pairs. Pair
// i = t * k + j is token t's j-th choice; pairs are ordered by expert, and by i within an expert
// (a stable sort: the layout is a function of the ids alone, whatever the backend).
//   offsets       [E + 1] i32: expert e's pairs are sorted positions [offsets[e], offsets[e+1])
//   sorted_pairs  [R] i32: the pair i at each sorted position
//   pair_position [R] i32: the sorted position of each pair i (the inverse permutation)
// topk_ids: [T][k] i32 on the backend's device (CPU or CUDA). CUDA: ids outside [0, E) set
// kMoeErrorExpertId in `error` (optional) and the whole routing is refused (offsets all 0, so a
// following grouped call with these offsets and R rows sees kMoeErrorOffsets and does nothing).
// workspace: moe_route_workspace_size(E) bytes (CUDA; none on the CPU).
size_t moe_route_workspace_size(int64_t num_experts);
void moe_route(const TensorView& topk_ids, int64_t num_experts, const TensorView& offsets,
               const TensorView& sorted_pairs, const TensorView& pair_position,
               const TensorView& error = {}, const ExecContext& ctx = {});

// xs[p] = x[sorted_pairs[p] / k] for every sorted position p: X's rows in the contiguous layout.
// x [T][K], xs [R][K], same dtype (f32, f16, bf16); xs apart from x.
void moe_gather(const TensorView& x, const TensorView& sorted_pairs, int64_t topk,
                const TensorView& xs, const ExecContext& ctx = {});

// The weighted scatter-add back to tokens: y[t] = sum_j w[t][j] * ys[pair_position[t * k + j]]
// (+ y[t] when accumulate), summed in f32 in the order j = 0 .. k-1 (deterministic: no atomics).
// ys [R][N], y [T][N] (f32, f16, bf16), topk_weights [T][k] f32; y apart from every input.
void moe_scatter_add(const TensorView& ys, const TensorView& pair_position,
                     const TensorView& topk_weights, const TensorView& y, bool accumulate = false,
                     const ExecContext& ctx = {});

// ------------------------------------------------------------------------------ the MoE MLP

enum class MoeActivation : uint8_t { Silu, Gelu };  // act(gate) * up
const char* moe_activation_name(MoeActivation a);
MoeActivation parse_moe_activation(const std::string& name);  // "silu", "gelu" (tanh form)

// y[t] = sum_j topk_weights[t][j] * down_e( act(gate_e(x_t)) * up_e(x_t) ), e = topk_ids[t][j].
// w_gate_up: the fused stack, N = 2 * I (rows [0, I) gate, [I, 2I) up: fuse_gate_up's order, that
// of vLLM's w13); w_down: N = hidden, K = I; both on one backend. x [T][hidden], y [T][hidden]
// (f32, f16, bf16); intermediates (the down projection's rows included: the weighted sum over the
// k experts is then taken in f32) are kept in x's dtype (f32 for f32 x), in ExecContext::workspace
// (moe_mlp_workspace_size bytes, apart from every argument; required on CUDA, allocated per call on
// the CPU without one). y may be x (in place): x is read before y is written.
size_t moe_mlp_workspace_size(const PreparedExperts& w_gate_up, const PreparedExperts& w_down,
                              int64_t tokens, int64_t topk, DType x_dtype);
void moe_mlp(const TensorView& x, const TensorView& topk_ids, const TensorView& topk_weights,
             const PreparedExperts& w_gate_up, const PreparedExperts& w_down, const TensorView& y,
             MoeActivation activation = MoeActivation::Silu, const TensorView& error = {},
             const ExecContext& ctx = {});

// ------------------------------------------------------------------------------ loading experts

// Stacks gate and up of one expert along N into the fused gate+up weight (gate rows first). They
// must agree in K and scheme; FP8 blocks of 128 rows need gate's N to be a multiple of block_n;
// act-order permutations must be equal.
QuantizedWeight fuse_gate_up(const QuantizedWeight& gate, const QuantizedWeight& up);

// The experts of one projection from a checkpoint:
//   GGUF: a 3-D expert tensor (ggml [K, N, E], e.g. "blk.3.ffn_up_exps.weight"), split per expert;
//   safetensors (mixq layout, GPTQ, AWQ, FP8 block, dense): `name` contains "{e}", replaced by
//   0, 1, ... for as long as the tensor exists ("model.layers.3.mlp.experts.{e}.up_proj.weight";
//   GPTQ / AWQ / FP8 modules are named as formats::load_weight names them).
// Throws Format when no expert is found or the experts' shapes differ.
std::vector<QuantizedWeight> load_experts(const std::string& path, const std::string& name);
// The fused gate+up stack of every expert: gate_name and up_name as for load_experts.
std::vector<QuantizedWeight> load_experts_gate_up(const std::string& path,
                                                  const std::string& gate_name,
                                                  const std::string& up_name);

}  // namespace mixq
