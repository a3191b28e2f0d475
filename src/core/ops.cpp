// Public op entry points: argument validation and dispatch to the prepared weight's backend
// (linear on float activations, on pre-quantized ones (QuantizedActivations), conv2d).
#include "mixq/ops.hpp"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "core/act_layout.hpp"
#include "core/device_ops.hpp"
#include "core/fp8_act_weights.hpp"
#include "core/prepared.hpp"
#include "mixq/act_quant.hpp"
#include "mixq/error.hpp"

namespace mixq {

const char* backend_name(BackendKind b) {
  switch (b) {
    case BackendKind::Auto: return "auto";
    case BackendKind::Reference: return "ref";
    case BackendKind::CPU: return "cpu";
    case BackendKind::CUDA: return "cuda";
  }
  return "?";
}

BackendKind parse_backend(const std::string& name) {
  if (name == "auto") return BackendKind::Auto;
  if (name == "ref" || name == "reference") return BackendKind::Reference;
  if (name == "cpu") return BackendKind::CPU;
  if (name == "cuda" || name == "gpu") return BackendKind::CUDA;
  MIXQ_FAIL(ErrorCode::InvalidArgument, "backend '", name, "' is not one of auto, ref, cpu, cuda");
}

const char* act_quant_name(ActQuant a) {
  switch (a) {
    case ActQuant::None: return "weight-only";
    case ActQuant::Int8Block: return "int8-block";
    case ActQuant::Fp8Block: return "fp8-block";
    case ActQuant::Int8PerTensor: return "int8-per-tensor";
  }
  return "?";
}

void PreparedImpl::conv2d(const TensorView&, const TensorView&, const Conv2dParams&,
                          const Epilogue&, const ExecContext&) const {
  MIXQ_FAIL(ErrorCode::Unsupported, "conv2d is not implemented by the ", backend_name(backend),
            " backend for ", act_quant_name(opts.act));
}

void PreparedImpl::linear_quantized(const QuantizedActivations&, const TensorView&,
                                    const Epilogue&, const ExecContext&) const {
  MIXQ_FAIL(ErrorCode::Unsupported, "linear on pre-quantized activations is not implemented by "
            "the ", backend_name(backend), " backend for ", act_quant_name(opts.act));
}

void PreparedImpl::linear_quantized_output(const TensorView*, const QuantizedActivations*,
                                           const QuantizedActivations&, const Epilogue&,
                                           const ExecContext&) const {
  MIXQ_FAIL(ErrorCode::Internal, "the ", backend_name(backend), " backend quantizes no output in "
            "its kernels (quantizes_output said it did)");
}

BackendKind PreparedWeight::backend() const { return impl().backend; }
ActQuant PreparedWeight::act() const { return impl().opts.act; }
int64_t PreparedWeight::N() const { return impl().N; }
int64_t PreparedWeight::K() const { return impl().K; }
bool PreparedWeight::is_conv() const { return impl().conv.has_value(); }
std::string PreparedWeight::kernel_name(int64_t M) const { return impl().kernel_name(M); }
std::string PreparedWeight::kernel_name(int64_t M, DType activation) const {
  return impl().kernel_name(M, activation);
}
std::string PreparedWeight::kernel_name(int64_t M, DType activation, ActQuant output,
                                        int64_t block) const {
  const PreparedImpl& p = impl();
  if (p.quantizes_output(M, output, block)) return p.quantized_output_kernel_name(M);
  return p.kernel_name(M, activation) + " + f32 staging + quantizer";
}
const PreparedImpl& PreparedWeight::impl() const {
  MIXQ_CHECK_ARG(impl_ != nullptr, "PreparedWeight: empty (not returned by mixq::prepare)");
  return *impl_;
}

namespace {

// The weight/activation combinations each ActQuant mode accepts, checked once at prepare time.
void check_scheme_for_act(const QuantizedWeight& w, const PrepareOptions& o) {
  // The W8A8 / FP8 / per-tensor products pair each activation block with one weight block from
  // column 0; a shard whose split cut a block (mixq/shard.hpp) runs weight-only until the
  // activation quantizers take the same phase.
  // (A column shard's cut FP8 row blocks were made per-row before this: rows_blocks_of_shard.)
  MIXQ_CHECK(o.act == ActQuant::None || w.plain_blocks(), ErrorCode::Unsupported, "prepare(act=",
             act_quant_name(o.act), "): the weight's K blocks are cut by a row-parallel shard "
             "split (k_phase ", w.k_phase, ", k_block_starts ", w.k_block_starts.size(),
             " entries); split K on whole blocks (ShardSpec::granularity = ", w.block_k,
             ") or prepare it with act=none");
  switch (o.act) {
    case ActQuant::None:
      break;
    case ActQuant::Int8Block: {
      MIXQ_CHECK_ARG(w.code_type == DType::I8 && w.block_n == 1 &&
                         w.zero_kind != ZeroKind::ZeroPoint && w.k_perm.empty(),
                     "prepare(act=int8-block): the weight must be i8 codes with per-row blocks in "
                     "symmetric or offset form and no act-order permutation, got ", w.describe());
      const int64_t ab = o.act_block ? o.act_block : w.block_k;
      MIXQ_CHECK_ARG(ab == w.block_k, "prepare(act=int8-block): act_block (", ab,
                     ") must equal the weight's block_k (", w.block_k, ")");
      break;
    }
    case ActQuant::Fp8Block:
      // block_k == K < 128 is what quantize_weight("fp8b128") produces for a narrow K.
      MIXQ_CHECK_ARG(fp8_block_weight(w) || w4a8_weight(w),
                     "prepare(act=fp8-block): the weight must be f8e4m3 with f32 scales in "
                     "128x128 (or 1x128) blocks, or 4-bit integer codes (W4A8) with per-row "
                     "groups of 128 along K in symmetric or zero-point form, no act-order; got ",
                     w.describe());
      break;
    case ActQuant::Int8PerTensor:
      MIXQ_CHECK_ARG(w.code_type == DType::I8 && w.block_k == w.K && w.block_n == 1 &&
                         w.zero_kind == ZeroKind::None && w.k_perm.empty(),
                     "prepare(act=int8-per-tensor): the weight must be i8 symmetric per output "
                     "channel (block_k = K), got ", w.describe());
      MIXQ_CHECK_ARG(std::isfinite(o.input_quant.scale) && o.input_quant.scale > 0 &&
                         std::isfinite(o.output_quant.scale) && o.output_quant.scale > 0,
                     "prepare(act=int8-per-tensor): input scale (", o.input_quant.scale,
                     ") and output scale (", o.output_quant.scale, ") must be finite and > 0");
      MIXQ_CHECK_ARG(o.input_quant.zero >= -128 && o.input_quant.zero <= 127 &&
                         o.output_quant.zero >= -128 && o.output_quant.zero <= 127,
                     "prepare(act=int8-per-tensor): zero points (", o.input_quant.zero, ", ",
                     o.output_quant.zero, ") must be in [-128, 127]");
      break;
  }
}

// A column-parallel shard of an FP8 128x128-block weight whose split cut a row block (n_phase):
// the same values with one scale row per weight row (block_n = 1, each row keeping its block's
// scale), which every activation-quantized path takes; K blocks are untouched. Other weights
// are returned as they are.
const QuantizedWeight& row_blocks_of_shard(const QuantizedWeight& w, QuantizedWeight& storage) {
  if (w.n_phase == 0 || w.block_n == 1) return w;
  storage = w;
  storage.block_n = 1;
  storage.n_phase = 0;
  const int64_t nbk = w.n_blocks_k(), eb = dtype_bytes(w.scale_type, 1);
  const auto per_row = [&](const std::vector<uint8_t>& src, int64_t elem_bytes) {
    std::vector<uint8_t> out(size_t(w.N * nbk * elem_bytes));
    for (int64_t n = 0; n < w.N; ++n)
      std::memcpy(out.data() + n * nbk * elem_bytes, src.data() + w.n_block(n) * nbk * elem_bytes,
                  size_t(nbk * elem_bytes));
    return out;
  };
  storage.scales = per_row(w.scales, eb);
  if (!w.zeros.empty())
    storage.zeros = per_row(w.zeros, w.zero_kind == ZeroKind::ZeroPoint ? 4 : eb);
  storage.validate();
  return storage;
}

BackendKind resolve_backend(BackendKind b) {
  if (b != BackendKind::Auto) return b;
  return cuda_available() ? BackendKind::CUDA : BackendKind::CPU;
}

std::shared_ptr<const PreparedImpl> dispatch_prepare(const QuantizedWeight& w,
                                                     const ConvGeometry* conv,
                                                     const PrepareOptions& opts) {
  PrepareOptions o = opts;
  o.backend = resolve_backend(opts.backend);
  if (o.act == ActQuant::Int8Block && o.act_block == 0) o.act_block = w.block_k;
  switch (o.backend) {
    case BackendKind::Reference: return prepare_reference(w, conv, o);
    case BackendKind::CPU: return prepare_cpu(w, conv, o);
    case BackendKind::CUDA:
      // weight-only kernels lay a shard's cut blocks on their groups (core/kernel_k_layout.hpp)
      return prepare_cuda(w, conv, o);
    case BackendKind::Auto: break;
  }
  MIXQ_FAIL(ErrorCode::Internal, "unresolved backend");
}

Device backend_device(BackendKind b) { return b == BackendKind::CUDA ? Device::CUDA : Device::CPU; }

void check_float_dtype(const TensorView& v, const char* arg) {
  MIXQ_CHECK_ARG(v.dtype == DType::F32 || v.dtype == DType::F16 || v.dtype == DType::BF16, arg,
                 ": dtype must be f32, f16 or bf16, got ", v.describe());
}

void check_epilogue(const Epilogue& ep, int64_t N, Device device) {
  MIXQ_CHECK_ARG(!(ep.clamp_lo > ep.clamp_hi), "epilogue: clamp_lo (", ep.clamp_lo,
                 ") > clamp_hi (", ep.clamp_hi, ")");
  MIXQ_CHECK_ARG(!std::isnan(ep.clamp_lo) && !std::isnan(ep.clamp_hi), "epilogue: clamp_lo (",
                 ep.clamp_lo, ") and clamp_hi (", ep.clamp_hi, ") must not be NaN");
  if (ep.bias.empty()) return;
  check_view(ep.bias, "bias", 1, device);
  check_float_dtype(ep.bias, "bias");
  MIXQ_CHECK_ARG(ep.bias.shape[0] == N, "bias: length ", ep.bias.shape[0], " != N (", N, ")");
  MIXQ_CHECK_ARG(ep.bias.stride[0] == 1 || N == 1, "bias: must be contiguous, got ",
                 ep.bias.describe());
}

void check_io_dtypes(const PreparedImpl& p, const TensorView& x, const TensorView& y) {
  if (p.opts.act == ActQuant::Int8PerTensor) {
    MIXQ_CHECK_ARG(x.dtype == DType::I8, "x: int8-per-tensor weights take i8 input, got ",
                   x.describe());
    MIXQ_CHECK_ARG(y.dtype == DType::I8 || y.dtype == DType::F32,
                   "y: int8-per-tensor output must be i8 (requantized) or f32, got ", y.describe());
  } else {
    check_float_dtype(x, "x");
    check_float_dtype(y, "y");
  }
}

// Pre-quantized activations: a weight prepared for them, of their kind and block.
void check_quantized_kind(const PreparedImpl& p, const QuantizedActivations& xq) {
  const ActQuant act = p.opts.act;
  MIXQ_CHECK_ARG(act == ActQuant::Int8Block || act == ActQuant::Fp8Block,
                 "linear: pre-quantized activations (xq.kind ", act_quant_name(xq.kind),
                 ") need a weight prepared with act = int8-block or fp8-block, this one is ",
                 act_quant_name(act));
  MIXQ_CHECK_ARG(xq.kind == act, "linear: xq.kind (", act_quant_name(xq.kind),
                 ") does not match the prepared weight's act (", act_quant_name(act), ")");
  if (act == ActQuant::Fp8Block) {
    MIXQ_CHECK_ARG(xq.block == QuantizedActivations::kFp8Block, "linear: xq.block (", xq.block,
                   ") must be 128 for fp8-block activations (per token per 128 along K)");
    MIXQ_CHECK_ARG(xq.offset.empty() && xq.sums.empty(), "linear: xq.offset (",
                   xq.offset.describe(), ") and xq.sums (", xq.sums.describe(),
                   ") must be empty for fp8-block activations");
    return;
  }
  MIXQ_CHECK_ARG(xq.block == p.opts.act_block, "linear: xq.block (", xq.block,
                 ") must equal the prepared weight's act_block (", p.opts.act_block, ")");
  const int64_t b = xq.block;
  MIXQ_CHECK(b == 32 || b == 64 || b == 128 || b == 256, ErrorCode::Unsupported,
             "linear: pre-quantized int8-block activations come in blocks of 32, 64, 128 or 256 "
             "(quantize_activations_int8_block's), xq.block is ", b);
}

// What the CUDA GEMMs read through TMA and 16-byte copies (sm90_tensor_map.hpp, the sm_80
// cp.async kernels): 16-byte aligned bases, code rows a multiple of 16 bytes apart, meta rows of
// a multiple of 4 elements (16 bytes). The few-token kernels' partial sums start the workspace.
// name: "xq" (the activations) or "yq" (a quantized output, written by the same rules).
void check_cuda_alignment(const QuantizedActivations& xq, const ExecContext& ctx,
                          const char* name = "xq") {
  const auto a16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  MIXQ_CHECK_ARG(a16(xq.q.data) && xq.q.stride[0] % 16 == 0, "linear: ", name, ".q (at ",
                 xq.q.data, ", row stride ", xq.q.stride[0], " bytes) must be 16-byte aligned "
                 "with a row stride that is a multiple of 16 bytes on CUDA (TMA)");
  const std::pair<const TensorView*, const char*> meta[] = {
      {&xq.scale, "scale"}, {&xq.offset, "offset"}, {&xq.sums, "sums"}};
  for (const auto& [t, arg] : meta) {
    if (t->empty()) continue;
    MIXQ_CHECK_ARG(a16(t->data) && t->stride[0] % 4 == 0, "linear: ", name, ".", arg, " (at ", t->data,
                   ", row stride ", t->stride[0], " elements) must be 16-byte aligned with a row "
                   "stride that is a multiple of 4 elements on CUDA (TMA)");
  }
  MIXQ_CHECK_ARG(a16(ctx.workspace), "linear: ExecContext::workspace (", ctx.workspace,
                 ") must be 16-byte aligned on CUDA");
}

// The call writes its scratch into the caller's workspace (up to `used` bytes of it): it must
// not share those bytes with the activations or the output.
void check_workspace_apart(const ExecContext& ctx, size_t used, const QuantizedActivations& xq,
                           const TensorView& y) {
  const std::pair<const TensorView*, const char*> views[] = {
      {&xq.q, "xq.q"}, {&xq.scale, "xq.scale"}, {&xq.offset, "xq.offset"},
      {&xq.sums, "xq.sums"}, {&y, "y"}};
  for (const auto& [v, arg] : views)
    check_workspace_apart("linear", ctx.workspace, std::min(used, ctx.workspace_bytes), *v, arg);
}

// A workspace size comes with a workspace.
void check_workspace_given(const ExecContext& ctx) {
  if (ctx.workspace_bytes > 0)
    MIXQ_CHECK_ARG(ctx.workspace != nullptr, "ExecContext: workspace_bytes (",
                   ctx.workspace_bytes, ") given with a null workspace");
}

// linear's output, epilogue and context, for M rows (m_from: where M came from).
void check_linear_output(const PreparedImpl& p, int64_t M, const char* m_from, const TensorView& y,
                         const Epilogue& ep, const ExecContext& ctx) {
  const Device dev = backend_device(p.backend);
  check_view(y, "y", 2, dev);
  check_rows_contiguous(y, "y");
  MIXQ_CHECK_ARG(y.shape[0] == M && y.shape[1] == p.N, "linear: y is ", y.describe(),
                 ", expected [", M, ", ", p.N, "] (M from ", m_from, ", N from the weight)");
  check_epilogue(ep, p.N, dev);
  check_workspace_given(ctx);
}

}  // namespace

PreparedWeight prepare(const QuantizedWeight& weight, const PrepareOptions& opts) {
  weight.validate();
  // CUDA's FP8 block GEMMs tile N on whole 128-row blocks: a shard that starts inside one runs as
  // two block-aligned pieces (the per-row scales below are for the paths that take them)
  if (opts.act == ActQuant::Fp8Block && resolve_backend(opts.backend) == BackendKind::CUDA &&
      weight.n_phase != 0 && weight.block_n > 1) {
    QuantizedWeight per_row;  // the scheme checks take plain blocks: the rows with their scales
    check_scheme_for_act(row_blocks_of_shard(weight, per_row), opts);
    return PreparedWeight(prepare_cuda_row_pieces(weight, opts));
  }
  QuantizedWeight storage;
  const QuantizedWeight& w =
      opts.act == ActQuant::None ? weight : row_blocks_of_shard(weight, storage);
  check_scheme_for_act(w, opts);
  return PreparedWeight(dispatch_prepare(w, nullptr, opts));
}

PreparedWeight prepare(const ConvWeight& cw, const PrepareOptions& opts) {
  cw.validate();
  check_scheme_for_act(cw.weight, opts);
  ConvGeometry g{cw.Ci, cw.Kh, cw.Kw, cw.order};
  return PreparedWeight(dispatch_prepare(cw.weight, &g, opts));
}

void ConvWeight::validate() const {
  weight.validate();
  MIXQ_CHECK_ARG(Ci >= 1 && Kh >= 1 && Kw >= 1, "ConvWeight: Ci (", Ci, "), Kh (", Kh,
                 "), Kw (", Kw, ") must be >= 1");
  MIXQ_CHECK_ARG(weight.K == Ci * Kh * Kw, "ConvWeight: weight K (", weight.K,
                 ") != Ci*Kh*Kw (", Ci, "*", Kh, "*", Kw, " = ", Ci * Kh * Kw, ")");
  MIXQ_CHECK_ARG(weight.k_perm.empty(), "ConvWeight: act-order permutations are not supported");
  MIXQ_CHECK_ARG(weight.plain_blocks(), "ConvWeight: k_phase (", weight.k_phase, "), n_phase (",
                 weight.n_phase, ") and k_block_starts must be 0 / empty");
  if (!weight.has_scales || weight.block_k == weight.K) return;
  if (order == ConvKOrder::KhKwCi) {
    MIXQ_CHECK_ARG(Ci % weight.block_k == 0, "ConvWeight (KhKwCi order): block_k (",
                   weight.block_k, ") must divide Ci (", Ci, ") so blocks run along Ci");
  } else {
    MIXQ_CHECK_ARG(weight.block_k % (Kh * Kw) == 0 && weight.K % weight.block_k == 0,
                   "ConvWeight (CiKhKw order): block_k (", weight.block_k,
                   ") must be a multiple of Kh*Kw (", Kh * Kw, ") dividing K (", weight.K, ")");
  }
}

void conv2d_output_size(int64_t H, int64_t W, int64_t Kh, int64_t Kw, const Conv2dParams& p,
                        int64_t* Ho, int64_t* Wo) {
  MIXQ_CHECK_ARG(p.stride_h >= 1 && p.stride_w >= 1, "conv2d: stride (", p.stride_h, ", ",
                 p.stride_w, ") must be >= 1");
  MIXQ_CHECK_ARG(p.dilation_h >= 1 && p.dilation_w >= 1, "conv2d: dilation (", p.dilation_h,
                 ", ", p.dilation_w, ") must be >= 1");
  MIXQ_CHECK_ARG(p.pad_h >= 0 && p.pad_w >= 0, "conv2d: padding (", p.pad_h, ", ", p.pad_w,
                 ") must be >= 0");
  const int64_t eh = (Kh - 1) * p.dilation_h + 1, ew = (Kw - 1) * p.dilation_w + 1;
  const int64_t h = H + 2 * p.pad_h - eh, w = W + 2 * p.pad_w - ew;
  MIXQ_CHECK_ARG(h >= 0 && w >= 0, "conv2d: input ", H, "x", W, " with padding (", p.pad_h, ", ",
                 p.pad_w, ") is smaller than the dilated kernel ", eh, "x", ew);
  *Ho = h / p.stride_h + 1;
  *Wo = w / p.stride_w + 1;
}

size_t linear_workspace_size(const PreparedWeight& w, int64_t M) {
  MIXQ_CHECK_ARG(M >= 0, "linear_workspace_size: M (", M, ") must be >= 0");
  return w.impl().workspace_size(M);
}

size_t conv2d_workspace_size(const PreparedWeight& w, const TensorView& x,
                             const Conv2dParams& params) {
  const PreparedImpl& p = w.impl();
  MIXQ_CHECK_ARG(p.conv.has_value(), "conv2d_workspace_size: the prepared weight is a linear "
                 "weight; use linear_workspace_size");
  MIXQ_CHECK_ARG(x.rank == 4, "conv2d_workspace_size: x must be rank 4, got ", x.describe());
  const bool nchw = params.layout == Layout::NCHW;
  const int64_t H = nchw ? x.shape[2] : x.shape[1], W = nchw ? x.shape[3] : x.shape[2];
  int64_t Ho, Wo;
  conv2d_output_size(H, W, p.conv->Kh, p.conv->Kw, params, &Ho, &Wo);
  // CUDA sizes conv scratch by the call (the GEMM rows, the output pixels; an NCHW call's NHWC
  // copies); the CPU conv takes none (each task stages its own pixel tile)
  return p.backend == BackendKind::CUDA ? p.conv_workspace_size(x, params, x.shape[0] * Ho * Wo) : 0;
}

namespace {

// linear's weight (not a convolution's) and input x [M][K] on its device.
void check_linear_input(const PreparedImpl& p, const TensorView& x) {
  MIXQ_CHECK_ARG(!p.conv, "linear: the prepared weight is a convolution weight; call conv2d");
  check_view(x, "x", 2, backend_device(p.backend));
  check_rows_contiguous(x, "x");
  MIXQ_CHECK_ARG(x.shape[1] == p.K, "linear: x.shape[1] (", x.shape[1], ") must equal weight K (",
                 p.K, ")");
}

// linear's weight and pre-quantized input xq (its kind, block, layout, place and on CUDA
// alignment); returns M.
int64_t check_linear_input(const PreparedImpl& p, const QuantizedActivations& xq,
                           const ExecContext& ctx) {
  MIXQ_CHECK_ARG(!p.conv, "linear: the prepared weight is a convolution weight; call conv2d");
  check_quantized_kind(p, xq);
  const bool cuda = p.backend == BackendKind::CUDA;
  const detail::ActPlace at{backend_device(p.backend), cuda ? p.opts.device : -1,
                            "the weight's device"};
  const int64_t M = detail::check_quantized_activations(xq, xq.kind, p.K, at, "linear", "xq").M;
  if (cuda) check_cuda_alignment(xq, ctx);
  return M;
}

}  // namespace

void linear(const TensorView& x, const PreparedWeight& w, const TensorView& y, const Epilogue& ep,
            const ExecContext& ctx) {
  const PreparedImpl& p = w.impl();
  check_linear_input(p, x);
  check_linear_output(p, x.shape[0], "x", y, ep, ctx);
  check_io_dtypes(p, x, y);
  if (x.shape[0] == 0) return;
  p.linear(x, y, ep, ctx);
}

void linear(const QuantizedActivations& xq, const PreparedWeight& w, const TensorView& y,
            const Epilogue& ep, const ExecContext& ctx) {
  const PreparedImpl& p = w.impl();
  const int64_t M = check_linear_input(p, xq, ctx);
  const detail::ActPlace at{backend_device(p.backend),
                            p.backend == BackendKind::CUDA ? p.opts.device : -1,
                            "the weight's device"};
  check_linear_output(p, M, "xq.q", y, ep, ctx);
  check_float_dtype(y, "y");
  detail::check_act_place(y, at, "linear", "y");
  if (!ep.bias.empty()) detail::check_act_place(ep.bias, at, "linear", "bias");
  if (M == 0) return;
  check_workspace_apart(ctx, p.workspace_size(M), xq, y);
  p.linear_quantized(xq, y, ep, ctx);
}

void conv2d(const TensorView& x, const PreparedWeight& w, const TensorView& y,
            const Conv2dParams& params, const Epilogue& ep, const ExecContext& ctx) {
  const PreparedImpl& p = w.impl();
  MIXQ_CHECK_ARG(p.conv.has_value(), "conv2d: the prepared weight is a linear weight; prepare a "
                 "ConvWeight");
  const Device dev = backend_device(p.backend);
  check_view(x, "x", 4, dev);
  check_view(y, "y", 4, dev);
  MIXQ_CHECK_ARG(x.is_contiguous() && y.is_contiguous(), "conv2d: x (", x.describe(), ") and y (",
                 y.describe(), ") must be contiguous");
  const bool nchw = params.layout == Layout::NCHW;
  const int64_t B = x.shape[0], Ci = nchw ? x.shape[1] : x.shape[3];
  const int64_t H = nchw ? x.shape[2] : x.shape[1], W = nchw ? x.shape[3] : x.shape[2];
  MIXQ_CHECK_ARG(Ci == p.conv->Ci, "conv2d: input channels (", Ci, ", from ", x.describe(),
                 nchw ? " as NCHW" : " as NHWC", ") != weight Ci (", p.conv->Ci, ")");
  int64_t Ho, Wo;
  conv2d_output_size(H, W, p.conv->Kh, p.conv->Kw, params, &Ho, &Wo);
  const int64_t ey[4] = {B, nchw ? p.N : Ho, nchw ? Ho : Wo, nchw ? Wo : p.N};
  for (int i = 0; i < 4; ++i)
    MIXQ_CHECK_ARG(y.shape[i] == ey[i], "conv2d: y is ", y.describe(), ", expected [", ey[0], ", ",
                   ey[1], ", ", ey[2], ", ", ey[3], "]");
  check_io_dtypes(p, x, y);
  check_epilogue(ep, p.N, dev);
  if (B == 0) return;
  p.conv2d(x, y, params, ep, ctx);
}

// ---- Quantized outputs: linear(..., QuantizedActivations yq) ----

namespace {

size_t round_up_256(size_t b) { return (b + 255) / 256 * 256; }

// yq: the kind and block of a QuantizedActivations the next layer can take, in its layout for
// M rows of the weight's N columns, on the weight's device.
void check_quantized_output(const PreparedImpl& p, int64_t M, const char* m_from,
                            const QuantizedActivations& yq, const ExecContext& ctx) {
  MIXQ_CHECK_ARG(yq.kind == ActQuant::Fp8Block || yq.kind == ActQuant::Int8Block,
                 "linear: yq.kind (", act_quant_name(yq.kind), ") must be fp8-block or int8-block");
  if (yq.kind == ActQuant::Fp8Block) {
    MIXQ_CHECK_ARG(yq.block == QuantizedActivations::kFp8Block, "linear: yq.block (", yq.block,
                   ") must be 128 for fp8-block outputs");
    MIXQ_CHECK_ARG(yq.offset.empty() && yq.sums.empty(), "linear: yq.offset and yq.sums must be "
                   "empty for fp8-block outputs");
  } else {
    MIXQ_CHECK_ARG(yq.block == 32 || yq.block == 64 || yq.block == 128 || yq.block == 256,
                   "linear: yq.block (", yq.block, ") must be 32, 64, 128 or 256 for int8-block "
                   "outputs");
  }
  const bool cuda = p.backend == BackendKind::CUDA;
  const detail::ActPlace at{backend_device(p.backend), cuda ? p.opts.device : -1,
                            "the weight's device"};
  const int64_t rows = detail::check_quantized_activations(yq, yq.kind, p.N, at, "linear", "yq").M;
  MIXQ_CHECK_ARG(rows == M, "linear: yq.q has ", rows, " rows, expected ", M, " (M from ", m_from,
                 ")");
  if (cuda) check_cuda_alignment(yq, ctx, "yq");
  check_workspace_given(ctx);
}

// Where the f32 output of a call that does not quantize in its kernels goes: the caller's
// workspace after the call's own part, or memory of its own.
struct StagedOutput {
  std::vector<float> host;
  void* device_ptr = nullptr;
  int device = 0;
  void* stream = nullptr;
  ~StagedOutput() { cuda_free_async(device_ptr, device, stream); }
};

// One call with a quantized output: x (xq null) or xq (x null), validated.
void linear_to_quantized(const PreparedWeight& w, const TensorView* x,
                         const QuantizedActivations* xq, int64_t M, const QuantizedActivations& yq,
                         const Epilogue& ep, const ExecContext& ctx) {
  const PreparedImpl& p = w.impl();
  if (p.quantizes_output(M, yq.kind, yq.block)) {
    const size_t used = p.workspace_size(M);
    if (ctx.workspace != nullptr)
      MIXQ_CHECK_ARG(ctx.workspace_bytes >= used, "linear: workspace_bytes (", ctx.workspace_bytes,
                     ") < linear_workspace_size (", used, ")");
    const std::pair<const TensorView*, const char*> outs[] = {
        {&yq.q, "yq.q"}, {&yq.scale, "yq.scale"}, {&yq.offset, "yq.offset"}, {&yq.sums, "yq.sums"}};
    for (const auto& [v, arg] : outs)
      check_workspace_apart("linear", ctx.workspace, std::min(used, ctx.workspace_bytes), *v, arg);
    p.linear_quantized_output(x, xq, yq, ep, ctx);
    return;
  }
  // y in f32, then the quantizer: the call's own scratch first, y after it.
  const bool cuda = p.backend == BackendKind::CUDA;
  const size_t own = round_up_256(p.workspace_size(M));
  const size_t y_bytes = size_t(M) * size_t(p.N) * 4;
  StagedOutput staged;
  ExecContext inner = ctx;
  void* y_data = nullptr;
  if (ctx.workspace != nullptr) {
    MIXQ_CHECK_ARG(ctx.workspace_bytes >= own + y_bytes, "linear: workspace_bytes (",
                   ctx.workspace_bytes, ") < linear_workspace_size for a quantized output (",
                   own + y_bytes, ")");
    inner.workspace_bytes = own;
    y_data = static_cast<char*>(ctx.workspace) + own;
  } else if (cuda) {
    staged.device = p.opts.device;
    staged.stream = ctx.stream;
    staged.device_ptr = cuda_alloc_async(y_bytes, p.opts.device, ctx.stream);
    y_data = staged.device_ptr;
  } else {
    staged.host.resize(size_t(M) * size_t(p.N));
    y_data = staged.host.data();
  }
  const TensorView y = TensorView::strided(y_data, DType::F32, {M, p.N}, {p.N, 1},
                                           backend_device(p.backend),
                                           cuda ? p.opts.device : 0);
  if (x != nullptr) linear(*x, w, y, ep, inner);
  else linear(*xq, w, y, ep, inner);
  if (yq.kind == ActQuant::Fp8Block)
    quantize_activations_fp8_block(y, yq.q, yq.scale, ctx);
  else
    quantize_activations_int8_block(y, yq.block, yq.q, yq.scale, yq.offset, yq.sums, ctx);
}

}  // namespace

size_t linear_workspace_size(const PreparedWeight& w, int64_t M, ActQuant out, int64_t out_block) {
  MIXQ_CHECK_ARG(M >= 0, "linear_workspace_size: M (", M, ") must be >= 0");
  MIXQ_CHECK_ARG(out == ActQuant::Fp8Block || out == ActQuant::Int8Block,
                 "linear_workspace_size: out (", act_quant_name(out),
                 ") must be fp8-block or int8-block");
  MIXQ_CHECK_ARG(out == ActQuant::Fp8Block
                     ? out_block == QuantizedActivations::kFp8Block
                     : (out_block == 32 || out_block == 64 || out_block == 128 || out_block == 256),
                 "linear_workspace_size: out_block (", out_block, ") must be 128 for fp8-block, "
                 "32, 64, 128 or 256 for int8-block");
  const PreparedImpl& p = w.impl();
  MIXQ_CHECK_ARG(!p.conv, "linear_workspace_size: the prepared weight is a convolution weight");
  if (M == 0) return 0;
  if (p.quantizes_output(M, out, out_block)) return p.workspace_size(M);
  return round_up_256(p.workspace_size(M)) + size_t(M) * size_t(p.N) * 4;
}

void linear(const TensorView& x, const PreparedWeight& w, const QuantizedActivations& yq,
            const Epilogue& ep, const ExecContext& ctx) {
  const PreparedImpl& p = w.impl();
  check_linear_input(p, x);
  if (p.opts.act != ActQuant::Int8PerTensor) check_float_dtype(x, "x");
  check_epilogue(ep, p.N, backend_device(p.backend));
  check_quantized_output(p, x.shape[0], "x", yq, ctx);
  MIXQ_CHECK_ARG(p.opts.act != ActQuant::Int8PerTensor, "linear: int8-per-tensor weights "
                 "requantize their own output (Epilogue / output_quant); a block-quantized yq is "
                 "not one of their outputs");
  if (x.shape[0] == 0) return;
  linear_to_quantized(w, &x, nullptr, x.shape[0], yq, ep, ctx);
}

void linear(const QuantizedActivations& xq, const PreparedWeight& w,
            const QuantizedActivations& yq, const Epilogue& ep, const ExecContext& ctx) {
  const PreparedImpl& p = w.impl();
  const int64_t M = check_linear_input(p, xq, ctx);
  check_epilogue(ep, p.N, backend_device(p.backend));
  check_quantized_output(p, M, "xq.q", yq, ctx);
  if (M == 0) return;
  linear_to_quantized(w, nullptr, &xq, M, yq, ep, ctx);
}

}  // namespace mixq
