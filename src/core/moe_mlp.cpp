// moe_mlp: route -> gather -> grouped gate+up -> act(gate) * up -> grouped down -> weighted
// scatter-add, each step a public op on the weights' backend, intermediates carved from one
// workspace (moe_mlp_workspace_size).
#include <cmath>

#include "core/moe_prepared.hpp"
#include "mixq/error.hpp"

namespace mixq {

const char* moe_activation_name(MoeActivation a) {
  return a == MoeActivation::Silu ? "silu" : "gelu";
}

MoeActivation parse_moe_activation(const std::string& name) {
  if (name == "silu" || name == "swiglu") return MoeActivation::Silu;
  if (name == "gelu" || name == "gelu_tanh" || name == "geglu") return MoeActivation::Gelu;
  MIXQ_FAIL(ErrorCode::InvalidArgument, "moe activation '", name, "' is not one of silu, gelu");
}

float moe_activation_f32(MoeActivation a, float g) {
  if (a == MoeActivation::Silu) return g / (1.f + std::exp(-g));
  const float c = 0.7978845608028654f;  // sqrt(2 / pi): the tanh form of GELU
  return 0.5f * g * (1.f + std::tanh(c * (g + 0.044715f * g * g * g)));
}

namespace {

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

struct MlpLayout {
  size_t offsets, sorted, position, route_ws, xs, h, a, ys, grouped, total;
};

MlpLayout mlp_layout(const PreparedExperts& gu, const PreparedExperts& down, int64_t T, int64_t k,
                     DType xt) {
  const size_t R = size_t(T * k), E = size_t(gu.num_experts());
  const size_t eb = size_t(dtype_bytes(xt, 1));
  const size_t H = size_t(gu.K()), I = size_t(down.K());
  const bool cuda = gu.backend() == BackendKind::CUDA;
  MlpLayout l{};
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t o = at;
    at += align256(bytes);
    return o;
  };
  l.offsets = take((E + 1) * 4);
  l.sorted = take(R * 4);
  l.position = take(R * 4);
  l.route_ws = take(cuda ? moe_route_workspace_size_cuda(int64_t(E)) : 0);
  l.xs = take(R * H * eb);
  l.h = take(R * 2 * I * eb);
  l.a = take(R * I * eb);
  l.ys = take(R * H * eb);  // the down projection's rows in x's type (see moe_mlp below)
  l.grouped = take(std::max(grouped_linear_workspace_size(gu, int64_t(R)),
                            grouped_linear_workspace_size(down, int64_t(R))));
  l.total = at + 256;  // the caller's pointer is aligned up to 256 bytes
  return l;
}

void check_pair(const PreparedExperts& gu, const PreparedExperts& down) {
  MIXQ_CHECK_ARG(gu.backend() == down.backend(), "moe_mlp: w_gate_up (", backend_name(gu.backend()),
                 ") and w_down (", backend_name(down.backend()), ") must be on one backend");
  MIXQ_CHECK_ARG(gu.num_experts() == down.num_experts(), "moe_mlp: w_gate_up has ",
                 gu.num_experts(), " experts, w_down ", down.num_experts());
  MIXQ_CHECK_ARG(gu.N() == 2 * down.K(), "moe_mlp: w_gate_up N (", gu.N(),
                 ") must be 2 * w_down K (2 * ", down.K(), "): the fused [gate; up] stack");
  MIXQ_CHECK_ARG(down.N() == gu.K(), "moe_mlp: w_down N (", down.N(),
                 ") must equal the hidden size, w_gate_up K (", gu.K(), ")");
}

}  // namespace

size_t moe_mlp_workspace_size(const PreparedExperts& gu, const PreparedExperts& down,
                              int64_t tokens, int64_t topk, DType x_dtype) {
  check_pair(gu, down);
  MIXQ_CHECK_ARG(tokens >= 0 && topk >= 1, "moe_mlp_workspace_size: tokens (", tokens,
                 ") must be >= 0 and topk (", topk, ") >= 1");
  return mlp_layout(gu, down, tokens, topk, x_dtype).total;
}

void moe_mlp(const TensorView& x, const TensorView& ids, const TensorView& weights,
             const PreparedExperts& gu, const PreparedExperts& down, const TensorView& y,
             MoeActivation activation, const TensorView& error, const ExecContext& ctx) {
  check_pair(gu, down);
  const Device dev = gu.backend() == BackendKind::CUDA ? Device::CUDA : Device::CPU;
  check_view(x, "x", 2, dev);
  check_view(y, "y", 2, dev);
  check_view(ids, "topk_ids", 2, dev);
  check_view(weights, "topk_weights", 2, dev);
  const int64_t T = x.shape[0], k = ids.shape[1], H = gu.K(), I = down.K();
  MIXQ_CHECK_ARG(x.shape[1] == H, "moe_mlp: x is ", x.describe(), ", expected [T, hidden = ", H,
                 "]");
  MIXQ_CHECK_ARG(y.shape[0] == T && y.shape[1] == H, "moe_mlp: y is ", y.describe(),
                 ", expected [", T, ", ", H, "]");
  MIXQ_CHECK_ARG(ids.shape[0] == T && weights.shape[0] == T && weights.shape[1] == k,
                 "moe_mlp: topk_ids (", ids.describe(), ") and topk_weights (",
                 weights.describe(), ") must both be [T = ", T, "][k]");
  MIXQ_CHECK_ARG(x.dtype == DType::F32 || x.dtype == DType::F16 || x.dtype == DType::BF16,
                 "moe_mlp: x dtype must be f32, f16 or bf16, got ", x.describe());
  if (T == 0) return;
  const MlpLayout l = mlp_layout(gu, down, T, k, x.dtype);
  HostBuffer own;  // not zero-filled: every byte used is written before it is read
  char* base;
  if (ctx.workspace) {
    MIXQ_CHECK_ARG(ctx.workspace_bytes >= l.total, "moe_mlp: workspace of ", ctx.workspace_bytes,
                   " bytes is smaller than moe_mlp_workspace_size (", l.total, ")");
    base = static_cast<char*>(ctx.workspace);
    const std::pair<const TensorView*, const char*> views[] = {
        {&x, "x"}, {&ids, "topk_ids"}, {&weights, "topk_weights"}, {&y, "y"}, {&error, "error"}};
    for (const auto& [v, arg] : views)
      check_workspace_apart("moe_mlp", ctx.workspace, l.total, *v, arg);
  } else {
    MIXQ_CHECK_ARG(dev == Device::CPU, "moe_mlp: a CUDA call needs ExecContext::workspace of "
                   "moe_mlp_workspace_size (", l.total, ") bytes");
    own = HostBuffer(l.total);
    base = static_cast<char*>(own.data());
  }
  base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(base) + 255) / 256 * 256);
  const int64_t R = T * k, E = gu.num_experts();
  const int di = dev == Device::CUDA ? gu.impl().opts.device : 0;
  auto view = [&](size_t off, DType t, std::initializer_list<int64_t> dims) {
    return TensorView(base + off, t, dims, dev, di);
  };
  const TensorView offsets = view(l.offsets, DType::I32, {E + 1});
  const TensorView sorted = view(l.sorted, DType::I32, {R});
  const TensorView position = view(l.position, DType::I32, {R});
  const TensorView xs = view(l.xs, x.dtype, {R, H});
  const TensorView h = view(l.h, x.dtype, {R, 2 * I});
  const TensorView a = view(l.a, x.dtype, {R, I});
  // The down projection writes its rows in x's type, as the serving engines' MoE layers do, and
  // the scatter-add sums them in f32. A 16-bit row is half the bytes of f32 for the GEMM to write
  // and the scatter-add to read, and the GEMM's 16-bit epilogue stores by TMA (Qwen3-30B-A3B,
  // 4096 tokens: 32768 rows of 2048).
  const TensorView ys = view(l.ys, x.dtype, {R, H});

  ExecContext step = ctx;
  step.workspace = base + l.route_ws;
  step.workspace_bytes = l.xs - l.route_ws;
  moe_route(ids, E, offsets, sorted, position, error, step);
  moe_gather(x, sorted, k, xs, ctx);
  MoeRows rows = MoeRows::contiguous(offsets);
  rows.error = error;
  step.workspace = base + l.grouped;
  step.workspace_bytes = l.total - 256 - l.grouped;
  grouped_linear(xs, gu, h, rows, Epilogue::none(), step);
  if (dev == Device::CUDA)
    moe_activation_mul_cuda(h, a, activation, ctx);
  else
    moe_activation_mul_host(h, a, activation, ctx);
  grouped_linear(a, down, ys, rows, Epilogue::none(), step);
  moe_scatter_add(ys, position, weights, y, false, ctx);
}

}  // namespace mixq
