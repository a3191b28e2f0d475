// The CUDA weight-only conv2d: prepare() repacks the canonical conv weight (either K order) into
// the implicit-GEMM kernel's [Co][tap][Ci] code rows and per-(channel, tap, Ci block) scale pairs
// (kernels/conv/conv_params.hpp); conv2d() enqueues the kernel on the caller's stream. A 1x1
// stride-1 unpadded NHWC conv is exactly a linear product on [B*H*W][Ci] rows, so it runs the
// linear weight-only path of the same weight (bit-identical to linear()). On sm_90a an NCHW call
// with 16-bit x that the NHWC kernels serve runs them on NHWC copies of x and y (transposed in
// and out), since NCHW has no TMA im2col map (docs/decisions/conv-nchw-through-nhwc.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/prepared.hpp"
#include "cuda/backend/common.hpp"
#include "cuda/backend/conv_call_geometry.hpp"
#include "cuda/backend/conv_nchw_copies.hpp"
#include "cuda/backend/conv_stem_image.hpp"
#include "cuda/backend/factories.hpp"
#include "cuda/dispatch/force_kernel.hpp"
#include "cuda/kernels/common/wo_layout.hpp"
#include "cuda/launch/conv_kernels.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/device_context.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq {

namespace {

using cuda::IoType;

IoType conv_io_type(DType t) { return IoType(cuda::float_type_code(t, "cuda conv2d")); }

class CudaConvWeightOnly final : public PreparedImpl {
 public:
  CudaConvWeightOnly(const QuantizedWeight& w, const ConvGeometry& g, const PrepareOptions& o) {
    backend = BackendKind::CUDA;
    opts = o;
    N = w.N;
    K = w.K;
    conv = g;
    device_ = o.device;
    cuda::check_device_ordinal(device_);
    cuda::DeviceGuard guard(device_);
    const cuda::DeviceCaps caps = cuda::DeviceContext::get(device_).caps();
    MIXQ_CHECK(caps.cc_major >= 8, ErrorCode::Unsupported, "cuda conv2d needs compute capability "
               ">= 8.0 (mma.sync m16n8k16), device ", device_, " is ", caps.cc_major, ".",
               caps.cc_minor);
    const bool int_codes = w.code_type == DType::I4 || w.code_type == DType::U4 ||
                           w.code_type == DType::I8 || w.code_type == DType::U8;
    MIXQ_CHECK(int_codes && w.has_scales && w.block_n == 1, ErrorCode::Unsupported,
               "prepare (cuda conv2d, weight-only): needs int4/int8 codes with per-row block "
               "scales, got ", w.describe());
    MIXQ_CHECK(w.k_perm.empty() && w.plain_blocks(), ErrorCode::Unsupported,
               "prepare (cuda conv2d): act-order permutations and shard block phases are not "
               "supported, got ", w.describe());
    MIXQ_CHECK(g.Ci < (int64_t(1) << 24) && N < (int64_t(1) << 24) && g.Kh * g.Kw < 4096,
               ErrorCode::Unsupported, "prepare (cuda conv2d): Ci (", g.Ci, "), Co (", N,
               ") must be < 2^24 and Kh*Kw (", g.Kh * g.Kw, ") < 4096");
    taps_ = g.Kh * g.Kw;
    bits_ = dtype_bits(w.code_type);
    Cip_ = cuda::round_up(g.Ci, cuda::kConvBK);
    // Packed taps where a tap's step would be more than half padding (Ci <= 16: the RGB stem's
    // 7x7x3 is 5 steps instead of 49; conv_params.hpp)
    packed_ = taps_ > 1 && g.Ci * 2 <= cuda::kConvBK;
    const int64_t row_codes = packed_ ? cuda::round_up(taps_ * g.Ci, cuda::kConvBK) : taps_ * Cip_;
    row_bytes_ = row_codes * bits_ / 8;
    k_steps_ = row_codes / cuda::kConvBK;
    cb_ = channel_block(w, g);
    n_cb_ = (g.Ci + cb_ - 1) / cb_;
    // Few input channels (an RGB stem): the patch kernel (kernels/conv/conv_stem.hpp) serves
    // 16-bit activations where its K (Kh rows of Kw * Ci columns, padded) fits its tables
    smem_optin_ = caps.smem_per_block_optin;
    stem_ = packed_ && g.Ci <= cuda::kStemMaxCi &&
            cuda::conv_stem_kpad(int(g.Ci), int(g.Kh), int(g.Kw)) <= cuda::kStemMaxK;
    repack(w, g);
    sm_count_ = std::max(caps.sm_count, 1);
    sm90a_ = caps.sm90a;
    // the K split's partial sums when a call brings no workspace (plans are capped at this size)
    scratch_ = cuda::DeviceContext::get(device_).reserve_scratch(kSplitScratchBytes);
    // A 1x1 weight is also a linear weight (K = Ci in either order): the linear path serves the
    // stride-1 unpadded NHWC calls. On an sm_90a device the same linear form of a KhKwCi weight
    // (K = Kh Kw Ci, blocks within a tap's channels) also runs as the wgmma kernel's implicit GEMM
    // over NHWC 16-bit inputs (cuda::conv_igemm), unless the old kernel is forced.
    force_ = cuda::forced_kernel(o, {"sm80_conv", "sm90_wo", "sm90_conv"});
    MIXQ_CHECK_ARG(force_.empty() || force_ == "sm80_conv_igemm" || force_ == "sm80_conv_stem" ||
                       force_ == "sm90_conv_stem_tma" || force_ == "sm90_wo_ws",
                   "prepare (cuda conv2d): force_kernel '", force_, "' is not one of sm80_conv_igemm, "
                   "sm80_conv_stem, sm90_conv_stem_tma, sm90_wo_ws");
    const bool force_stem = force_ == "sm80_conv_stem" || force_ == "sm90_conv_stem_tma";
    MIXQ_CHECK_ARG(!force_stem || stem_, "prepare (cuda conv2d): force_kernel ", force_,
                   " needs a weight of Ci <= ", cuda::kStemMaxCi, " input channels, "
                   "more than one tap and Kh * round_up(Kw * Ci, 2) <= ", cuda::kStemMaxK,
                   " (rounded up to 16), got Ci ", g.Ci, ", ", g.Kh, "x", g.Kw);
    MIXQ_CHECK_ARG(force_ != "sm90_conv_stem_tma" || caps.sm90a, "prepare (cuda conv2d): force_kernel "
                   "sm90_conv_stem_tma needs an sm_90 device (TMA), device ", device_, " is ",
                   caps.cc_major, ".", caps.cc_minor);
    stem_tma_ = caps.sm90a && force_ != "sm80_conv_stem";
    PrepareOptions lo = o;
    lo.force_kernel.clear();
    if (taps_ == 1) linear_ = cuda::prepare_weight_only(w, lo);
    const bool linear_form = taps_ == 1 || g.order == ConvKOrder::KhKwCi;
    if (caps.sm90a && force_ != "sm80_conv_igemm" && linear_form) {
      if (g.Ci % cuda::kChunkK == 0) {
        igemm_ = linear_ ? linear_ : cuda::prepare_weight_only(w, lo);
        ck_ = g.Ci;
      } else if (const int64_t ck = cuda::round_up(g.Ci, cuda::kChunkK); pads_taps(w, g, ck)) {
        // Ci not a multiple of the 64-wide chunk (a detection backbone's 32, 96, 160 channels):
        // each tap's channels padded to ck, which the im2col map reads as zeros past Ci. A form
        // the linear kernels do not take leaves the call to the sm_80 kernel.
        try {
          igemm_ = cuda::prepare_weight_only(pad_tap_channels(w, g, ck), lo);
          ck_ = ck;
        } catch (const Error& e) {
          if (e.code() != ErrorCode::Unsupported) throw;
        }
      }
    }
    MIXQ_CUDA_CHECK(cudaDeviceSynchronize());  // prepare is not on the hot path
  }

  std::string kernel_name(int64_t M) const override { return kernel_name(M, DType::F16); }
  std::string kernel_name(int64_t M, DType act) const override {
    // what an NHWC call runs (on sm_90a an NCHW call with 16-bit x too, between its two
    // transposes, where its scratch has room): (1x1 weights) the linear kernel of the stride-1
    // unpadded call, else the wgmma implicit GEMM where the weight has one and x is 16-bit
    if (linear_) return linear_->kernel_name(M, act);
    if (igemm_ && act != DType::F32) return "im2col " + cuda::conv_igemm_kernel_name(*igemm_, M, act);
    // (the stem kernel also needs dilation_w 1, and its TMA form an aligned x with rows of 16-byte
    // multiples: properties of the call, named as if it had them)
    if (stem_ && act != DType::F32 && force_ != "sm80_conv_igemm")
      return cuda::conv_stem_name(conv_io_type(act), stem_tma_);
    return cuda::conv_igemm_name(conv_io_type(act), packed_) + (split_plan(M).splits > 1 ? "_splitk" : "");
  }

  // M = output pixels: the implicit GEMM's K-split partials, or (1x1 weights) the linear path's
  // scratch, whichever is larger.
  size_t workspace_size(int64_t M) const override {
    return std::max({linear_ ? linear_->workspace_size(M) : size_t(0),
                     igemm_ ? igemm_->workspace_size(M) : size_t(0), split_plan(M).bytes});
  }

  // workspace_size(B Ho Wo), and for an NCHW call that runs the NHWC kernels on copies (see
  // NchwCopies) room for them after the GEMM's part, the y copy counted at 4 bytes an element
  // (y's dtype is not an argument: the size serves f32, f16 and bf16 outputs alike).
  size_t conv_workspace_size(const TensorView& x, const Conv2dParams& p, int64_t rows) const override {
    const size_t base = workspace_size(rows);
    if (p.layout != Layout::NCHW) return base;
    const cuda::ConvCallGeometry g = cuda::conv_call_geometry(x, *conv, p);
    if (copies_gemm(g, p, x.dtype) == NhwcGemm::None) return base;
    return std::max(base, nchw_copies(g, x.dtype, DType::F32).total);
  }

  void linear(const TensorView&, const TensorView&, const Epilogue&,
              const ExecContext&) const override {
    MIXQ_FAIL(ErrorCode::InvalidArgument, "linear: the prepared weight is a convolution weight; "
              "call conv2d");
  }

  void conv2d(const TensorView& x, const TensorView& y, const Conv2dParams& p, const Epilogue& ep,
              const ExecContext& ctx) const override {
    MIXQ_CHECK_ARG(x.device_index == device_ && y.device_index == device_, "conv2d: x (device ",
                   x.device_index, ") and y (device ", y.device_index,
                   ") must be on the prepared weight's device ", device_);
    if (!ep.bias.empty())
      MIXQ_CHECK_ARG(ep.bias.device_index == device_, "conv2d: bias (device ",
                     ep.bias.device_index, ") must be on the prepared weight's device ", device_);
    check_aligned(x, "x");
    check_aligned(y, "y");
    if (!ep.bias.empty()) check_aligned(ep.bias, "bias");
    const cuda::ConvCallGeometry g = cuda::conv_call_geometry(x, *conv, p);
    const bool nchw = g.nchw;
    const int64_t B = g.B, Ci = conv->Ci, W = g.W, Ho = g.Ho, Wo = g.Wo;

    // NHWC: the fast GEMMs on the caller's tensors; NCHW (sm_90a, 16-bit x): the same on NHWC
    // copies where the scratch has room; else the sm_80 / stem kernels below
    if (!nchw) {
      const NhwcGemm gemm = nhwc_gemm(g, p, x);
      if (gemm != NhwcGemm::None) return run_nhwc_gemm(gemm, g, p, x, y, ep, ctx);
    } else if (run_nchw_through_copies(g, p, x, y, ep, ctx)) {
      return;
    }
    cuda::ConvIgemmParams k{};
    k.x = x.data;
    k.x_type = conv_io_type(x.dtype);
    cuda::set_conv_geometry(k, g, *conv, N, p);
    k.vec_x = !nchw && x.dtype != DType::F32 && Ci % 8 == 0 &&
              reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
    k.packed = packed_;
    k.k_total = int(taps_ * Ci);
    k.k_steps = int(k_steps_);
    k.codes = static_cast<const uint8_t*>(codes_.data());
    k.pairs = static_cast<const float2*>(pairs_.data());
    k.bits = bits_;
    k.Cip = int(Cip_);
    k.cb = int(cb_);
    k.n_cb = int(n_cb_);
    k.row_bytes = row_bytes_;
    k.y = y.data;
    k.y_type = conv_io_type(y.dtype);
    k.bias = ep.bias.empty() ? nullptr : ep.bias.data;
    k.bias_type = ep.bias.empty() ? IoType::F32 : conv_io_type(ep.bias.dtype);
    k.clamp_lo = ep.clamp_lo;
    k.clamp_hi = ep.clamp_hi;
    cuda::ConvStemParams stem{};
    // the TMA form reads x as [B][H][W * Ci] with rows of 16-byte multiples from a 16-byte aligned
    // base, Kh consecutive rows a box
    const bool tma = stem_tma_ && !nchw && p.dilation_h == 1 && (W * Ci * 2) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
    if (stem_ && force_ != "sm80_conv_igemm" &&
        cuda::conv_stem_plan(k, x.dtype != DType::F32, sm_count_, smem_optin_, &stem, tma) &&
        (force_ != "sm90_conv_stem_tma" || stem.tma)) {
      stem.w_image = stem_shape_.at(stem_image_.data(), stem.sigma, x.dtype == DType::BF16);
      stem.img_pitch = stem_shape_.pitch;
      cuda::DeviceGuard guard(device_);
      return cuda::launch_conv_stem(stem, sm_count_, static_cast<cudaStream_t>(ctx.stream));
    }
    MIXQ_CHECK_ARG(force_ != "sm80_conv_stem", "conv2d (cuda): force_kernel sm80_conv_stem cannot "
                   "run this call (x ", dtype_name(x.dtype), ", dilation_w ", p.dilation_w,
                   ", stride_w ", p.stride_w, "): it takes f16 / bf16 activations, dilation_w 1 "
                   "and an image patch (Kh rows of 128 output pixels' inputs) that fits ",
                   smem_optin_, " bytes of shared memory with the weight");
    MIXQ_CHECK_ARG(force_ != "sm90_conv_stem_tma", "conv2d (cuda): force_kernel sm90_conv_stem_tma "
                   "cannot run this call (x ", dtype_name(x.dtype), " at ", x.data, ", ",
                   nchw ? "NCHW" : "NHWC", ", W ", W, ", Ci ", Ci, ", dilation ", p.dilation_h, "x",
                   p.dilation_w, ", stride_w ", p.stride_w, "): it takes f16 / bf16 NHWC activations "
                   "at a 16-byte aligned address with W * Ci a multiple of 8, stride_w * Ci even, "
                   "dilation 1 and a warp's box of at most 256 elements a row");
    const SplitPlan sp = split_plan(B * Ho * Wo);
    k.splits = sp.splits;
    k.steps_per_split = sp.steps_per_split;
    k.partial = nullptr;
    if (sp.splits > 1) {
      if (ctx.workspace) {
        MIXQ_CHECK_ARG(ctx.workspace_bytes >= sp.bytes, "conv2d: workspace of ",
                       ctx.workspace_bytes, " bytes is smaller than the ", sp.bytes,
                       " bytes this call needs (conv2d_workspace_size)");
        MIXQ_CHECK_ARG(reinterpret_cast<uintptr_t>(ctx.workspace) % 16 == 0,
                       "conv2d: ExecContext::workspace (", ctx.workspace,
                       ") must be 16-byte aligned on CUDA");
        k.partial = static_cast<float*>(ctx.workspace);
      } else {
        MIXQ_CHECK(sp.bytes <= scratch_->size(), ErrorCode::Internal, "conv2d: the K split needs ",
                   sp.bytes, " bytes, more than the ", scratch_->size(), " reserved");
        k.partial = static_cast<float*>(scratch_->data());
      }
    }
    cuda::DeviceGuard guard(device_);
    cuda::launch_conv_igemm(k, static_cast<cudaStream_t>(ctx.stream));
  }

 private:
  // Largest K-split partial buffer (f32 [splits][M][Co]); calls whose split would need more split
  // less. Reserved once per device (DeviceContext scratch, shared with the linear weights); calls
  // without a workspace also put an NCHW call's NHWC copies there (run_nchw_through_copies).
  static constexpr size_t kSplitScratchBytes = size_t(16) << 20;

  // The NHWC fast path of a call: (1x1 weights) the linear kernel on the [B*H*W][Ci] rows of a
  // stride-1 unpadded call, else (sm_90a, 16-bit x at a 16-byte aligned address, Ci a multiple
  // of 64, a geometry an im2col map holds) the wgmma implicit GEMM, unless the sm_80 kernel is
  // forced; None: the sm_80 / stem kernels. x_nhwc: the NHWC input, or a view of its copy.
  enum class NhwcGemm { None, Linear, Igemm };
  NhwcGemm nhwc_gemm(const cuda::ConvCallGeometry& g, const Conv2dParams& p,
                     const TensorView& x_nhwc) const {
    if (linear_ && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0)
      return NhwcGemm::Linear;
    if (igemm_ && force_ != "sm80_conv_igemm") {
      if (cuda::conv_igemm_serves(*igemm_, im2col_shape(g, p), x_nhwc)) return NhwcGemm::Igemm;
    }
    return NhwcGemm::None;
  }

  // Runs it on NHWC x and y: the caller's tensors, or the copies of an NCHW call's.
  void run_nhwc_gemm(NhwcGemm gemm, const cuda::ConvCallGeometry& g, const Conv2dParams& p,
                     const TensorView& x, const TensorView& y, const Epilogue& ep,
                     const ExecContext& ctx) const {
    if (gemm == NhwcGemm::Linear) {
      // NHWC rows are the GEMM rows: [B*H*W][Ci] . W^T = [B*H*W][Co] (Ho = H, Wo = W).
      const int64_t M = g.B * g.H * g.W;
      const TensorView x2(x.data, x.dtype, {M, conv->Ci}, Device::CUDA, x.device_index);
      const TensorView y2(y.data, y.dtype, {M, N}, Device::CUDA, y.device_index);
      return linear_->linear(x2, y2, ep, ctx);
    }
    cuda::conv_igemm(*igemm_, im2col_shape(g, p), x, y, ep, ctx);
  }

  // The call's geometry for the wgmma implicit GEMM, with igemm_'s columns per tap.
  cuda::Im2colConv im2col_shape(const cuda::ConvCallGeometry& g, const Conv2dParams& p) const {
    cuda::Im2colConv c;
    cuda::set_conv_shape(c, g, *conv, p);
    c.Ck = int(ck_);
    return c;
  }

  // Where an NCHW call's NHWC copies sit in its scratch (cuda::nchw_copies_layout): after the
  // fast GEMMs' own part (their workspace_size for the call's B Ho Wo rows, which bounds every
  // plan such a call can get; a 1x1 weight with Ci padded for the implicit GEMM has two forms),
  // x's copy (B H W Ci elements of x's type), then y's (B Ho Wo Co of y's type). (Only for calls
  // copies_gemm serves: they have a linear_ or igemm_.)
  cuda::NchwCopies nchw_copies(const cuda::ConvCallGeometry& g, DType xt, DType yt) const {
    const int64_t rows = g.B * g.Ho * g.Wo;
    return cuda::nchw_copies_layout(std::max(linear_ ? linear_->workspace_size(rows) : size_t(0),
                                             igemm_ ? igemm_->workspace_size(rows) : size_t(0)),
                                    size_t(dtype_bytes(xt, g.B * g.H * g.W * conv->Ci)),
                                    size_t(dtype_bytes(yt, g.B * g.Ho * g.Wo * N)));
  }

  // The NHWC fast path an NCHW call of this geometry and x dtype runs on copies, or None: an
  // sm_90a device, 16-bit x, the sm_80 kernel not forced, an NHWC fast path for the geometry.
  // Asked on a null view of x's copy: the copies sit at 256-byte offsets of a 16-byte aligned
  // base (run_nchw_through_copies), all the alignment the fast paths read off the address. (The
  // scratch must also have room: run_nchw_through_copies.)
  NhwcGemm copies_gemm(const cuda::ConvCallGeometry& g, const Conv2dParams& p, DType xt) const {
    if (!sm90a_ || force_ == "sm80_conv_igemm" || (xt != DType::F16 && xt != DType::BF16))
      return NhwcGemm::None;
    cuda::ConvCallGeometry gn = g;  // the NHWC call on the copies
    gn.nchw = false;
    const TensorView x_nhwc(nullptr, xt, {g.B, g.H, g.W, conv->Ci}, Device::CUDA, device_);
    return nhwc_gemm(gn, p, x_nhwc);
  }

  // An NCHW call through the NHWC kernels: x transposed into an NHWC copy, the NHWC GEMM into an
  // NHWC copy of y (bias and clamp in its epilogue, per output channel as in any layout), that
  // copy transposed into the caller's y; all on the call's stream. Returns false, having enqueued
  // nothing, where the copies do not apply or have no room; the sm_80 kernel then runs the call
  // on the NCHW tensors. The copies' scratch (NchwCopies gives the offsets):
  //  - a caller workspace: the GEMM's part first (the GEMM sees only those bytes), the copies
  //    after it. A workspace smaller than that (one sized for the GEMM alone, e.g. by an NHWC
  //    query), or not 16-byte aligned (the x copy is read by TMA), is not an error: the sm_80
  //    kernel runs, and checks the workspace against its own K split as always.
  //  - no workspace: the copies go into scratch_, past its first NchwCopies::gemm bytes. The GEMM
  //    then uses the reserved scratch of its own (linear) weight from offset 0, at most that many
  //    bytes. Both come from DeviceContext::reserve_scratch: the same buffer unless the device's
  //    scratch grew between the two reservations (then two buffers), so the copies never overlap
  //    what the GEMM uses. Copies that do not fit: the sm_80 kernel. As for every call on the
  //    reserved scratch, such calls must not run concurrently on different streams.
  bool run_nchw_through_copies(const cuda::ConvCallGeometry& g, const Conv2dParams& p,
                               const TensorView& x, const TensorView& y, const Epilogue& ep,
                               const ExecContext& ctx) const {
    const NhwcGemm gemm = copies_gemm(g, p, x.dtype);
    if (gemm == NhwcGemm::None) return false;
    cuda::ConvCallGeometry gn = g;  // the NHWC call on the copies
    gn.nchw = false;
    const cuda::NchwCopies at = nchw_copies(g, x.dtype, y.dtype);
    char* const base = cuda::nchw_copies_base(ctx, scratch_.get(), at.total);
    if (!base) return false;
    ExecContext gemm_ctx = ctx;
    if (ctx.workspace) gemm_ctx.workspace_bytes = at.gemm;  // the GEMM sees only its own part
    const TensorView xc(base + at.x_at, x.dtype, {g.B, g.H, g.W, conv->Ci}, Device::CUDA, device_);
    const TensorView yc(base + at.y_at, y.dtype, {g.B, g.Ho, g.Wo, N}, Device::CUDA, device_);
    cuda::DeviceGuard guard(device_);
    const auto stream = static_cast<cudaStream_t>(ctx.stream);
    // [B][Ci][H W] -> [B][H W][Ci]
    // both transposes with programmatic dependent launch (sm_90a: copies_gemm; Tuning::
    // conv_copies_pdl): each launch, and the GEMM's after the first, overlaps the previous
    // kernel's tail instead of following it
    const bool pdl = opts.tuning.conv_copies_pdl != Toggle::Off;
    cuda::launch_image_transpose(x.data, xc.data, 2, g.B, conv->Ci, g.H * g.W, stream, pdl);
    run_nhwc_gemm(gemm, gn, p, xc, yc, ep, gemm_ctx);
    // [B][Ho Wo][Co] -> [B][Co][Ho Wo]
    cuda::launch_image_transpose(yc.data, y.data, int(dtype_bytes(y.dtype, 1)), g.B, g.Ho * g.Wo, N,
                                 stream, pdl);
    return true;
  }

  struct SplitPlan {
    int splits = 1;
    int steps_per_split = 1;
    size_t bytes = 0;  // partial sums in the workspace (0 without a split)
  };

  // The K split of a call with M output pixels: only when the output tiles cannot fill half the
  // SMs (batch 1, small spatial sizes, many channels: 7x7x512 is 1 x 8 tiles on 132 SMs), into
  // enough pieces to give every SM a block, each at least 4 K steps long, at most 16. A function
  // of M and the weight alone, so workspace_size(M) and the call agree.
  SplitPlan split_plan(int64_t M) const {
    SplitPlan sp;
    const int64_t steps = k_steps_;
    sp.steps_per_split = int(steps);
    const int64_t tiles = ((M + cuda::kConvBM - 1) / cuda::kConvBM) *
                          ((N + cuda::kConvBN - 1) / cuda::kConvBN);
    if (M < 1 || tiles * 2 >= sm_count_ || steps < 8) return sp;
    int64_t s = std::min<int64_t>({(sm_count_ + tiles - 1) / tiles, steps / 4, 16});
    const int64_t per_split = M * N * 4;
    s = std::min<int64_t>(s, int64_t(kSplitScratchBytes) / std::max<int64_t>(per_split, 1));
    if (s < 2) return sp;
    const int64_t per = (steps + s - 1) / s;
    sp.splits = int((steps + per - 1) / per);  // no empty split
    if (sp.splits < 2) return SplitPlan{1, int(steps), 0};
    sp.steps_per_split = int(per);
    sp.bytes = size_t(sp.splits) * size_t(per_split);
    return sp;
  }

  // The kernel reads every tensor element by element: each must be aligned to its element size.
  static void check_aligned(const TensorView& v, const char* arg) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(v.data);
    const int eb = int(dtype_bytes(v.dtype, 1));
    MIXQ_CHECK_ARG(a % uintptr_t(eb) == 0, "conv2d (cuda): ", arg, " (at ", v.data, ", ",
                   v.describe(), ") must be aligned to its ", eb, "-byte element size");
  }

  // Input channels per scale block (see conv_params.hpp). ConvWeight::validate() has checked the
  // block geometry; the CiKhKw check is repeated here because the kernel relies on it: a block
  // that ended inside a channel's Kh*Kw taps would give one channel two scales.
  static int64_t channel_block(const QuantizedWeight& w, const ConvGeometry& g) {
    const int64_t taps = g.Kh * g.Kw;
    if (w.block_k >= w.K) return g.Ci;
    if (g.order == ConvKOrder::KhKwCi) {
      MIXQ_CHECK_ARG(g.Ci % w.block_k == 0, "prepare (cuda conv2d, KhKwCi order): block_k (",
                     w.block_k, ") must divide Ci (", g.Ci, ")");
      return w.block_k;
    }
    MIXQ_CHECK_ARG(w.block_k % taps == 0 && w.K % w.block_k == 0, "prepare (cuda conv2d, CiKhKw "
                   "order): block_k (", w.block_k, ") crosses a Kh*Kw boundary: it must be a "
                   "multiple of Kh*Kw (", g.Kh, "*", g.Kw, " = ", taps, ") dividing K (", w.K, ")");
    return w.block_k / taps;
  }

  // Whether the wgmma implicit GEMM takes this weight with each tap's channels padded to ck (a
  // multiple of its 64-wide chunk; Ci is not one): 16-byte pixels (TMA reads x's rows), at least
  // 32 channels (at most half of each chunk padding: fewer channels run the packed-tap kernels),
  // and blocks along Ci that tile ck too (their group size must be one the linear kernel takes).
  static bool pads_taps(const QuantizedWeight& w, const ConvGeometry& g, int64_t ck) {
    const bool blocks_tile =
        w.block_k >= w.K ||
        (ck % w.block_k == 0 && (w.block_k & (w.block_k - 1)) == 0 && w.block_k >= 16);
    return g.Ci % 8 == 0 && g.Ci >= 32 && blocks_tile;
  }

  // The linear form [Co][taps ck] of a weight whose taps hold Ci channels (KhKwCi order, or one
  // tap): tap t's channels at columns t ck .. t ck + Ci - 1, the padding columns code 0 and, in
  // blocks of padding only, scale 0 (offset 0, zero point 0). The im2col map reads x past Ci as
  // zeros, so the padding adds exact zeros whatever it dequantizes to.
  static QuantizedWeight pad_tap_channels(const QuantizedWeight& w, const ConvGeometry& g,
                                          int64_t ck) {
    const int64_t taps = g.Kh * g.Kw;
    QuantizedWeight p;
    p.N = w.N;
    p.K = taps * ck;
    p.code_type = w.code_type;
    p.block_k = w.block_k >= w.K ? p.K : w.block_k;
    p.block_n = w.block_n;
    p.scale_type = w.scale_type;
    p.zero_kind = w.zero_kind;
    p.has_scales = w.has_scales;
    p.origin = w.origin;
    p.allocate();
    for (int64_t n = 0; n < w.N; ++n)
      for (int64_t tap = 0; tap < taps; ++tap)
        for (int64_t ci = 0; ci < g.Ci; ++ci)
          p.set_code_int(n, tap * ck + ci, w.code_int(n, canon_k(g, ci, tap)));
    // scale (and zero) entries: [N][blocks along K]; a tap's blocks keep their order
    const size_t se = size_t(dtype_bits(w.scale_type) / 8);
    const size_t ze = w.zero_kind == ZeroKind::ZeroPoint ? 4 : se;
    const int64_t blocks_in = w.n_blocks_k(), blocks_out = p.n_blocks_k();
    auto copy_entry = [&](int64_t n, int64_t kb_in, int64_t kb_out) {
      const size_t i = size_t(n * blocks_in + kb_in), o = size_t(n * blocks_out + kb_out);
      std::memcpy(p.scales.data() + o * se, w.scales.data() + i * se, se);
      if (w.zero_kind != ZeroKind::None)
        std::memcpy(p.zeros.data() + o * ze, w.zeros.data() + i * ze, ze);
    };
    for (int64_t n = 0; n < w.N; ++n) {
      if (w.block_k >= w.K) {
        copy_entry(n, 0, 0);
        continue;
      }
      for (int64_t tap = 0; tap < taps; ++tap)
        for (int64_t c0 = 0; c0 < g.Ci; c0 += w.block_k)
          copy_entry(n, w.k_block(canon_k(g, c0, tap)), p.k_block(tap * ck + c0));
    }
    p.validate();
    return p;
  }

  // Canonical column of (ci, tap) in the weight's K order.
  static int64_t canon_k(const ConvGeometry& g, int64_t ci, int64_t tap) {
    return g.order == ConvKOrder::KhKwCi ? tap * g.Ci + ci : ci * g.Kh * g.Kw + tap;
  }

  void repack(const QuantizedWeight& w, const ConvGeometry& g) {
    const int32_t cmin = code_min(w.code_type);
    std::vector<uint8_t> codes(size_t(N * row_bytes_), 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t tap = 0; tap < taps_; ++tap)
        for (int64_t ci = 0; ci < g.Ci; ++ci) {
          const uint32_t u = uint32_t(w.code_int(n, canon_k(g, ci, tap)) - cmin);
          const int64_t kk = packed_ ? tap * g.Ci + ci : tap * Cip_ + ci;
          uint8_t* row = codes.data() + n * row_bytes_;
          if (bits_ == 4)
            row[kk / 2] |= uint8_t((u & 0xF) << (4 * (kk % 2)));
          else
            row[kk] = uint8_t(u);
        }
    // (s, o') with w = s*u + o' and q = u + cmin: s*q + o = s*u + (o + cmin*s),
    // s*(q - z) = s*u + s*(cmin - z), symmetric s*q = s*u + cmin*s (wo_layout.hpp).
    std::vector<float> pairs(size_t(N * taps_ * n_cb_ * 2));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t tap = 0; tap < taps_; ++tap)
        for (int64_t c = 0; c < n_cb_; ++c) {
          const int64_t kb = w.k_block(canon_k(g, c * cb_, tap));
          // every channel of the block must share the K block (the geometry above guarantees it)
          const int64_t last = std::min(g.Ci, (c + 1) * cb_) - 1;
          MIXQ_CHECK(w.k_block(canon_k(g, last, tap)) == kb, ErrorCode::Internal,
                     "prepare (cuda conv2d): channels ", c * cb_, "..", last, " of tap ", tap,
                     " span two scale blocks");
          const double s = w.scale(w.n_block(n), kb);
          double off = 0;
          switch (w.zero_kind) {
            case ZeroKind::None: off = double(cmin) * s; break;
            case ZeroKind::Offset: off = double(w.offset(w.n_block(n), kb)) + double(cmin) * s; break;
            case ZeroKind::ZeroPoint: off = s * double(cmin - w.zero_point(w.n_block(n), kb)); break;
          }
          const size_t i = size_t((n * taps_ + tap) * n_cb_ + c) * 2;
          pairs[i] = float(s);
          pairs[i + 1] = float(off);
        }
    codes_ = DeviceBuffer(std::max<size_t>(codes.size(), 16), device_);
    codes_.copy_from_host(codes.data(), codes.size());
    pairs_ = DeviceBuffer(std::max<size_t>(pairs.size() * 4, 16), device_);
    pairs_.copy_from_host(pairs.data(), pairs.size() * 4);
    if (stem_) stem_image(codes, pairs, g);
  }

  // The stem kernel's weight images (conv_stem_image.hpp): the values w = s * u + o' of the
  // repacked codes and pairs (the general kernel's fmaf in f32).
  void stem_image(const std::vector<uint8_t>& codes, const std::vector<float>& pairs,
                  const ConvGeometry& g) {
    const int64_t Ci = g.Ci, Kw = g.Kw, kwc = Kw * Ci;
    const std::vector<uint16_t> img = cuda::build_stem_image(
        N, int(Ci), int(g.Kh), int(Kw),
        [&](int64_t n, int kh, int j) {
          const int64_t kk = kh * kwc + j, tap = kh * Kw + j / Ci, ci = j % Ci;
          const uint8_t* row = codes.data() + n * row_bytes_;
          const uint32_t u = bits_ == 4 ? (row[kk / 2] >> (4 * (kk % 2))) & 0xFu : row[kk];
          const size_t pi = size_t((n * taps_ + tap) * n_cb_ + ci / cb_) * 2;
          return std::fmaf(pairs[pi], float(u), pairs[pi + 1]);
        },
        &stem_shape_);
    stem_image_ = DeviceBuffer(img.size() * 2, device_);
    stem_image_.copy_from_host(img.data(), img.size() * 2);
  }

  int device_ = 0;
  int64_t taps_ = 1, Cip_ = 0, row_bytes_ = 0, cb_ = 1, n_cb_ = 1, k_steps_ = 1;
  bool packed_ = false;  // packed taps (few input channels)
  bool stem_ = false;    // the few-input-channel patch kernel may serve calls
  bool stem_tma_ = false;  // ... in its TMA form where the call admits it (sm_90, not forced off)
  size_t smem_optin_ = 0;
  int bits_ = 4;
  int sm_count_ = 1;
  bool sm90a_ = false;  // the device runs the sm_90a kernels (wgmma, TMA)
  int64_t ck_ = 0;      // igemm_'s columns per tap: Ci, or Ci padded to the 64-wide chunk
  DeviceBuffer codes_, pairs_;
  DeviceBuffer stem_image_;          // the stem kernel's dequantized weights ([sigma][f16, bf16])
  cuda::StemImageShape stem_shape_;  // ... their rows and pitch
  std::shared_ptr<DeviceBuffer> scratch_;  // K-split partials of calls without a workspace
  std::shared_ptr<const PreparedImpl> linear_;  // 1x1 weights only
  std::shared_ptr<const PreparedImpl> igemm_;   // the linear form the wgmma implicit GEMM runs
  std::string force_;                           // sm80_conv_igemm / sm90_wo_ws, or empty
};

}  // namespace

namespace cuda {
std::shared_ptr<const PreparedImpl> prepare_conv_weight_only(const QuantizedWeight& w,
                                                             const ConvGeometry& g,
                                                             const PrepareOptions& opts) {
  return std::make_shared<CudaConvWeightOnly>(w, g, opts);
}
}  // namespace cuda

}  // namespace mixq
