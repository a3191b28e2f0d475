// Stacked experts and the grouped linear: argument validation and dispatch to the backend.
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/moe_prepared.hpp"
#include "mixq/error.hpp"

namespace mixq {

int64_t PreparedExperts::num_experts() const { return impl().E; }
int64_t PreparedExperts::N() const { return impl().N; }
int64_t PreparedExperts::K() const { return impl().K; }
BackendKind PreparedExperts::backend() const { return impl().backend; }
ActQuant PreparedExperts::act() const { return impl().opts.act; }
std::string PreparedExperts::kernel_name(int64_t rows) const { return impl().kernel_name(rows, std::nullopt); }
std::string PreparedExperts::kernel_name(int64_t rows, DType activation) const {
  return impl().kernel_name(rows, activation);
}
const PreparedWeight& PreparedExperts::expert(int64_t e) const {
  const PreparedExpertsImpl& p = impl();
  MIXQ_CHECK_ARG(e >= 0 && e < p.E, "PreparedExperts::expert: e (", e, ") must be in [0, ", p.E,
                 ")");
  return p.experts[size_t(e)];
}
const PreparedExpertsImpl& PreparedExperts::impl() const {
  MIXQ_CHECK_ARG(impl_ != nullptr, "PreparedExperts: empty (not returned by prepare_experts)");
  return *impl_;
}

namespace {

// The fields that make two canonical weights the same scheme of the same shape.
void check_same_scheme(const QuantizedWeight& a, const QuantizedWeight& b, size_t e) {
  const bool same = a.N == b.N && a.K == b.K && a.code_type == b.code_type &&
                    a.block_k == b.block_k && a.block_n == b.block_n &&
                    a.scale_type == b.scale_type && a.zero_kind == b.zero_kind &&
                    a.has_scales == b.has_scales && a.k_perm.empty() == b.k_perm.empty() &&
                    a.k_phase == b.k_phase && a.n_phase == b.n_phase &&
                    a.k_block_starts == b.k_block_starts;
  MIXQ_CHECK_ARG(same, "prepare_experts: expert ", e, " (", b.describe(), ") does not match "
                 "expert 0 (", a.describe(), "): every expert needs the same [N][K] shape and "
                 "scheme");
}

Device device_of(BackendKind b) { return b == BackendKind::CUDA ? Device::CUDA : Device::CPU; }

void check_float(const TensorView& v, const char* arg) {
  MIXQ_CHECK_ARG(v.dtype == DType::F32 || v.dtype == DType::F16 || v.dtype == DType::BF16,
                 "grouped_linear: ", arg, " dtype must be f32, f16 or bf16, got ", v.describe());
}

// A masked [E][max][C] view as [E * max][C] (the rows of one expert follow each other).
TensorView flatten_masked(const TensorView& v, const char* arg) {
  if (v.rank != 3) return v;
  MIXQ_CHECK_ARG(v.stride[2] == 1 && v.stride[0] == v.shape[1] * v.stride[1],
                 "grouped_linear: ", arg, " (", v.describe(), ") must have contiguous rows and "
                 "experts one after the other (stride[0] = shape[1] * stride[1])");
  TensorView f = TensorView::strided(v.data, v.dtype, {v.shape[0] * v.shape[1], v.shape[2]},
                                     {v.stride[1], 1}, v.device, v.device_index);
  return f;
}

// Host backends read the offsets / counts: each bad value is an error naming it.
void check_rows_on_host(const MoeRows& r, int64_t E, int64_t rows) {
  if (r.layout == MoeRows::Layout::Contiguous) {
    const int32_t* o = r.offsets.ptr<const int32_t>();
    MIXQ_CHECK_ARG(o[0] == 0, "grouped_linear: offsets[0] (", o[0], ") must be 0");
    for (int64_t e = 0; e < E; ++e)
      MIXQ_CHECK_ARG(o[e + 1] >= o[e], "grouped_linear: offsets are not non-decreasing: offsets[",
                     e, "] = ", o[e], " > offsets[", e + 1, "] = ", o[e + 1]);
    MIXQ_CHECK_ARG(o[E] == rows, "grouped_linear: offsets[E = ", E, "] (", o[E],
                   ") must equal the rows of x (", rows, ")");
  } else {
    const int32_t* c = r.counts.ptr<const int32_t>();
    for (int64_t e = 0; e < E; ++e)
      MIXQ_CHECK_ARG(c[e] >= 0 && c[e] <= r.max_tokens, "grouped_linear: counts[", e, "] (", c[e],
                     ") must be in [0, max_tokens = ", r.max_tokens, "]");
  }
}

}  // namespace

PreparedExperts prepare_experts(const std::vector<QuantizedWeight>& experts,
                                const PrepareOptions& opts) {
  MIXQ_CHECK_ARG(!experts.empty(), "prepare_experts: no experts given");
  MIXQ_CHECK_ARG(experts.size() < (size_t(1) << 24), "prepare_experts: ", experts.size(),
                 " experts is more than 2^24");
  for (size_t e = 1; e < experts.size(); ++e) check_same_scheme(experts[0], experts[e], e);
  PrepareOptions o = opts;
  if (o.backend == BackendKind::Auto)
    o.backend = cuda_available() ? BackendKind::CUDA : BackendKind::CPU;
  // The CUDA grouped kernels read the canonical weight-only form (GGUF experts included).
  if (o.backend == BackendKind::CUDA) o.tuning.cuda_ggml_native = Toggle::Off;
  std::vector<PreparedWeight> prepared;
  prepared.reserve(experts.size());
  for (size_t e = 0; e < experts.size(); ++e) {
    try {
      prepared.push_back(prepare(experts[e], o));
    } catch (const Error& err) {
      MIXQ_FAIL(err.code(), "prepare_experts: expert ", e, ": ", error_message_body(err));
    }
  }
  if (o.backend == BackendKind::CUDA)
    return PreparedExperts(prepare_experts_cuda(std::move(prepared), o));
  return PreparedExperts(prepare_experts_host(std::move(prepared), o));
}

size_t grouped_linear_workspace_size(const PreparedExperts& w, int64_t rows) {
  MIXQ_CHECK_ARG(rows >= 0, "grouped_linear_workspace_size: rows (", rows, ") must be >= 0");
  return w.impl().workspace_size(rows);
}

void grouped_linear(const TensorView& x_in, const PreparedExperts& w, const TensorView& y_in,
                    const MoeRows& rows, const Epilogue& ep, const ExecContext& ctx) {
  const PreparedExpertsImpl& p = w.impl();
  const Device dev = device_of(p.backend);
  const bool masked = rows.layout == MoeRows::Layout::Masked;
  check_view(x_in, "x", masked && x_in.rank == 3 ? 3 : 2, dev);
  check_view(y_in, "y", masked && y_in.rank == 3 ? 3 : 2, dev);
  if (!masked)
    MIXQ_CHECK_ARG(x_in.rank == 2 && y_in.rank == 2, "grouped_linear: the contiguous layout takes "
                   "x and y of rank 2, got ", x_in.describe(), " and ", y_in.describe());
  GroupedCall call;
  call.x = flatten_masked(x_in, "x");
  call.y = flatten_masked(y_in, "y");
  check_rows_contiguous(call.x, "x");
  check_rows_contiguous(call.y, "y");
  check_float(call.x, "x");
  check_float(call.y, "y");
  const int64_t R = call.x.shape[0];
  MIXQ_CHECK_ARG(call.x.shape[1] == p.K, "grouped_linear: x.shape[-1] (", call.x.shape[1],
                 ") must equal the experts' K (", p.K, ")");
  MIXQ_CHECK_ARG(call.y.shape[0] == R && call.y.shape[1] == p.N, "grouped_linear: y is ",
                 y_in.describe(), ", expected ", R, " rows of N = ", p.N);
  if (masked) {
    MIXQ_CHECK_ARG(rows.max_tokens >= 0, "grouped_linear: max_tokens (", rows.max_tokens,
                   ") must be >= 0");
    MIXQ_CHECK_ARG(R == p.E * rows.max_tokens, "grouped_linear: the masked layout needs x with E * "
                   "max_tokens = ", p.E, " * ", rows.max_tokens, " = ", p.E * rows.max_tokens,
                   " rows, got ", x_in.describe());
    if (x_in.rank == 3)
      MIXQ_CHECK_ARG(x_in.shape[0] == p.E && x_in.shape[1] == rows.max_tokens,
                     "grouped_linear: x is ", x_in.describe(), ", expected [", p.E, ", ",
                     rows.max_tokens, ", ", p.K, "]");
    check_view(rows.counts, "counts", 1, dev);
    MIXQ_CHECK_ARG(rows.counts.dtype == DType::I32 && rows.counts.shape[0] == p.E &&
                       rows.counts.stride[0] == 1,
                   "grouped_linear: counts must be a contiguous [E = ", p.E, "] i32, got ",
                   rows.counts.describe());
  } else {
    check_view(rows.offsets, "offsets", 1, dev);
    MIXQ_CHECK_ARG(rows.offsets.dtype == DType::I32 && rows.offsets.shape[0] == p.E + 1 &&
                       rows.offsets.stride[0] == 1,
                   "grouped_linear: offsets must be a contiguous [E + 1 = ", p.E + 1, "] i32, got ",
                   rows.offsets.describe());
    MIXQ_CHECK_ARG(R < (int64_t(1) << 31), "grouped_linear: ", R, " rows exceed i32 offsets");
  }
  if (!rows.error.empty()) {
    check_view(rows.error, "error", 1, dev);
    MIXQ_CHECK_ARG(rows.error.dtype == DType::I32 && rows.error.shape[0] >= 1,
                   "grouped_linear: error must be a [1] i32, got ", rows.error.describe());
  }
  MIXQ_CHECK_ARG(!(ep.clamp_lo > ep.clamp_hi) && !std::isnan(ep.clamp_lo) &&
                     !std::isnan(ep.clamp_hi),
                 "epilogue: clamp_lo (", ep.clamp_lo, ") and clamp_hi (", ep.clamp_hi,
                 ") must be ordered and not NaN");
  if (!ep.bias.empty()) {
    check_view(ep.bias, "bias", ep.bias.rank == 2 ? 2 : 1, dev);
    check_float(ep.bias, "bias");
    const bool per_expert = ep.bias.rank == 2;
    MIXQ_CHECK_ARG(per_expert ? (ep.bias.shape[0] == p.E && ep.bias.shape[1] == p.N &&
                                 ep.bias.stride[1] == 1 && ep.bias.stride[0] >= p.N)
                              : (ep.bias.shape[0] == p.N && (ep.bias.stride[0] == 1 || p.N == 1)),
                   "grouped_linear: bias must be a contiguous [N = ", p.N, "] or [E = ", p.E,
                   "][N] with contiguous rows, got ", ep.bias.describe());
    call.bias = ep.bias;
    call.bias_per_expert = per_expert;
  }
  if (ctx.workspace_bytes > 0)
    MIXQ_CHECK_ARG(ctx.workspace != nullptr, "ExecContext: workspace_bytes (",
                   ctx.workspace_bytes, ") given with a null workspace");
  // the output is written while other experts' rows of x may still be read; the workspace holds
  // the call's scratch (CUDA: the tile list, the quantized rows)
  check_apart("grouped_linear", call.y, "y", call.x, "x");
  const size_t used = std::min(ctx.workspace_bytes, p.workspace_size(R));
  const std::pair<const TensorView*, const char*> views[] = {
      {&call.x, "x"}, {&call.y, "y"}, {&rows.offsets, "offsets"}, {&rows.counts, "counts"},
      {&rows.error, "error"}, {&ep.bias, "bias"}};
  for (const auto& [v, arg] : views) check_workspace_apart("grouped_linear", ctx.workspace, used, *v, arg);
  call.rows = rows;
  if (p.backend != BackendKind::CUDA) check_rows_on_host(rows, p.E, R);
  if (R == 0) return;
  p.grouped_linear(call, ep, ctx);
}

}  // namespace mixq
