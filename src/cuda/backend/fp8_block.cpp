// CUDA prepared weight for ActQuant::Fp8Block (DeepSeek-V3 style): fp8b128 weights (e4m3 codes,
// one f32 scale per 128x128 block) times activations quantized per call, per token per 128
// along K (launch_quantize_fp8_1x128, act_quant.hpp layout), multiplied by the Hopper TMA +
// wgmma kernel (sm90_fp8_gemm.cu), or for few tokens by the skinny kernel that streams the
// weights over every SM (sm90_fp8_skinny.cu). Hopper (compute capability 9.0) only.
// linear(QuantizedActivations) runs the same GEMMs on the caller's codes and scales; a quantized
// output (linear(..., yq)) is written by the block GEMM's quantizing epilogue on 128-wide tiles.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/prepared.hpp"
#include "cuda/launch/act_quant.hpp"
#include "cuda/backend/factories.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/device_context.hpp"
#include "cuda/dispatch/force_kernel.hpp"
#include "cuda/backend/common.hpp"
#include "cuda/dispatch/kernel_id.hpp"
#include "cuda/dispatch/plan_log.hpp"
#include "cuda/launch/sm90_fp8_gemm.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

int io_type_of(DType t) { return float_type_code(t, "cuda fp8 block"); }


size_t align256(size_t b) { return (b + 255) / 256 * 256; }

// Largest M served from the internal scratch when the caller passes no workspace.
constexpr int64_t kScratchRows = 4096;

// The skinny kernel up to this M (token tiles of 16 / 32 / 64), the 128-row tiles above it; its
// 128-token tile runs only when forced.
constexpr int64_t kSkinnyMaxM = 64;

class CudaFp8Block final : public PreparedImpl {
 public:
  CudaFp8Block(const QuantizedWeight& w, const PrepareOptions& o) {
    backend = BackendKind::CUDA;
    opts = o;
    N = w.N;
    K = w.K;
    device_ = o.device;
    check_device_ordinal(device_);
    DeviceGuard guard(device_);
    ctx_ = &DeviceContext::get(device_);
    const DeviceCaps& caps = ctx_->caps();
    MIXQ_CHECK(sm90_fp8_gemm_supported(caps.cc_major, caps.cc_minor), ErrorCode::Unsupported,
               "cuda Fp8Block: the FP8 block-scaled GEMM needs a Hopper GPU (compute capability "
               "9.0: wgmma e4m3 + TMA); device ", device_, " is ", caps.cc_major, ".",
               caps.cc_minor, " (use the cpu backend or weight-only activations)");
    MIXQ_CHECK(w.code_type == DType::F8E4M3 && w.has_scales && w.scale_type == DType::F32 &&
                   w.block_n == 128 && (w.block_k == 128 || (K < 128 && w.block_k == K)) &&
                   w.zero_kind == ZeroKind::None && w.k_perm.empty(),
               ErrorCode::Unsupported,
               "cuda Fp8Block: needs fp8b128 weights (f8e4m3 codes, f32 scales per 128x128 "
               "block, no act-order) or W4A8 weights (4-bit codes in per-row groups of 128, "
               "symmetric or zero-point), got ", w.describe());
    MIXQ_CHECK(N < (int64_t(1) << 31) && K < (int64_t(1) << 31), ErrorCode::Unsupported,
               "cuda Fp8Block: N (", N, ") and K (", K, ") must be < 2^31");
    sms_ = caps.sm_count;
    // A forced kernel (force_kernel, or MIXQ_FORCE_KERNEL naming an FP8 GEMM) runs every M.
    const std::string force = forced_kernel(o, {"sm90_fp8"});
    if (!force.empty()) {
      forced_ = sm90_fp8_gemm_tile_by_name(force);
      forced_skinny_mt_ = sm90_fp8_skinny_mt_by_name(force);
      MIXQ_CHECK(forced_.block_n > 0 || forced_skinny_mt_ > 0, ErrorCode::InvalidArgument,
                 "cuda Fp8Block: force_kernel '", force, "' is not one of ",
                 sm90_fp8_gemm_names(), ", ", sm90_fp8_skinny_name(16), ", ",
                 sm90_fp8_skinny_name(32), ", ", sm90_fp8_skinny_name(64), ", ",
                 sm90_fp8_skinny_name(128));
    }
    nkb_ = (K + 127) / 128;
    ldb_ = act_row_pitch(K);  // 16-byte rows for TMA, zero codes past K
    ld_sb_ = (nkb_ + 3) / 4 * 4;
    const int64_t nbn = w.n_blocks_n();
    std::vector<uint8_t> codes(size_t(N * ldb_), 0);
    for (int64_t n = 0; n < N; ++n)
      std::memcpy(codes.data() + n * ldb_, w.codes.data() + n * w.row_bytes(), size_t(K));
    std::vector<float> sb(size_t(nbn * ld_sb_), 0.f);
    for (int64_t nb = 0; nb < nbn; ++nb)
      for (int64_t kb = 0; kb < nkb_; ++kb) sb[size_t(nb * ld_sb_ + kb)] = w.scale(nb, kb);
    codes_ = DeviceBuffer(codes.size(), device_);
    codes_.copy_from_host(codes.data(), codes.size());
    scales_ = DeviceBuffer(sb.size() * 4, device_);
    scales_.copy_from_host(sb.data(), sb.size() * 4);
    // The skinny kernel's workspace grows with its token tile, not with M: size for each tile.
    size_t scratch = workspace_size(kScratchRows);
    for (int64_t m : {int64_t(16), int64_t(32), int64_t(64), kSm90SkinnyMaxM})
      scratch = std::max(scratch, workspace_size(m));
    scratch_ = ctx_->reserve_scratch(scratch);
    internal_tickets_ = sm90_skinny_tickets(N, device_);  // calls without a caller workspace
    MIXQ_CUDA_CHECK(cudaDeviceSynchronize());  // prepare is not on the hot path
  }

  std::string kernel_name(int64_t M) const override { return kernel_id(M).name(); }

  Fp8ExpertView expert_view() const {
    return {static_cast<const uint8_t*>(codes_.data()), ldb_, static_cast<const float*>(scales_.data()),
            ld_sb_, device_};
  }

  // Quantized activations: codes [M][act_row_pitch(K)], scales [K blocks][act_meta_pitch(M)];
  // for the skinny kernel then its partial sums and tickets (gemm_workspace_size).
  // linear(QuantizedActivations) needs the latter only, at the start of its workspace:
  // linear_workspace_size bounds both calls.
  size_t workspace_size(int64_t M) const override { return acts_bytes(M) + gemm_workspace_size(M); }

  void linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
              const ExecContext& ctx) const override {
    check_call_device(x, y, device_);
    const int64_t M = x.shape[0];
    check_forced_tile(M);
    const size_t need = workspace_size(M);
    char* ws = call_workspace(ctx.workspace, ctx.workspace_bytes, need, *scratch_, M);
    DeviceGuard guard(device_);
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    // A caller workspace's tickets are zeroed by the quantizer, so that no memset node precedes it
    // and the kernel's dependent launch follows it directly.
    const Sm90SkinnyWork sk = skinny_work(M, ws + acts_bytes(M), ctx, stream, true);
    const float* sa = quantize(x, ws, stream, skinny(M) && skinny_pdl(),
                               ActQuantClear{sk.tickets, sk.n_clear});
    gemm(reinterpret_cast<const uint8_t*>(ws), act_row_pitch(K), sa, act_meta_pitch(M), M, &y,
         nullptr, ep, stream, sk);
  }

  // The caller's codes and scales (validated by ops.cpp, alignment included) straight into the
  // GEMM; the workspace holds the skinny kernel's part only.
  void linear_quantized(const QuantizedActivations& xq, const TensorView& y, const Epilogue& ep,
                        const ExecContext& ctx) const override {
    const int64_t M = xq.q.shape[0];
    check_forced_tile(M);
    char* ws = call_workspace(ctx.workspace, ctx.workspace_bytes, gemm_workspace_size(M),
                              *scratch_, M);
    DeviceGuard guard(device_);
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    gemm(static_cast<const uint8_t*>(xq.q.data), xq.q.stride[0],
         static_cast<const float*>(xq.scale.data), xq.scale.stride[0], M, &y, nullptr, ep, stream,
         skinny_work(M, ws, ctx, stream));
  }

  // The block GEMM's 128-wide tiles quantize their outputs (kernels/common/epilogue_quant.cuh);
  // the skinny kernel's weight-major fragments spread a row's columns over warps, and a forced
  // 192-wide tile cuts the 128-column blocks: those calls take ops.cpp's f32 staging.
  bool quantizes_output(int64_t M, ActQuant kind, int64_t block) const override {
    if (skinny(M) || forced_.block_n == 192) return false;
    return kind == ActQuant::Fp8Block || (kind == ActQuant::Int8Block && block <= 128);
  }

  std::string quantized_output_kernel_name(int64_t M) const override {
    return kernel_id(M, true).name();
  }

  void linear_quantized_output(const TensorView* x, const QuantizedActivations* xq,
                               const QuantizedActivations& yq, const Epilogue& ep,
                               const ExecContext& ctx) const override {
    const int64_t M = x ? x->shape[0] : xq->q.shape[0];
    const sm90::QuantOut quant = quant_out_of(yq, N);
    DeviceGuard guard(device_);
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    if (xq != nullptr) {
      gemm(static_cast<const uint8_t*>(xq->q.data), xq->q.stride[0],
           static_cast<const float*>(xq->scale.data), xq->scale.stride[0], M, nullptr, &quant, ep,
           stream, {});
      return;
    }
    char* ws = call_workspace(ctx.workspace, ctx.workspace_bytes, workspace_size(M), *scratch_, M);
    const float* sa = quantize(*x, ws, stream, false, ActQuantClear{});
    gemm(reinterpret_cast<const uint8_t*>(ws), act_row_pitch(K), sa, act_meta_pitch(M), M,
         nullptr, &quant, ep, stream, {});
  }

 private:
  // x quantized into the start of the workspace `ws`: codes [M][act_row_pitch(K)] at ws, then
  // the scales [K blocks][act_meta_pitch(M)], whose address it returns (the parts acts_bytes
  // sizes); pdl and clear as launch_quantize_fp8_1x128 takes them.
  const float* quantize(const TensorView& x, char* ws, cudaStream_t stream, bool pdl,
                        ActQuantClear clear) const {
    const int64_t M = x.shape[0], ldq = act_row_pitch(K);
    float* sa = reinterpret_cast<float*>(ws + align256(size_t(M * ldq)));
    launch_quantize_fp8_1x128(x.data, io_type_of(x.dtype), x.ld(), M, K,
                              reinterpret_cast<uint8_t*>(ws), ldq, sa, act_meta_pitch(M), stream,
                              pdl, act_quant_tuning(opts.tuning), clear);
    return sa;
  }

  // The GEMM on quantized activations q [M][ldq], sa [K blocks][ld_sa]; sk: the skinny kernel's
  // partial sums and tickets (when skinny(M)).
  // Either y or quant (the block GEMM's quantizing epilogue, 128-wide tiles) receives the output.
  void gemm(const uint8_t* q, int64_t ldq, const float* sa, int64_t ld_sa, int64_t M,
            const TensorView* y, const sm90::QuantOut* quant, const Epilogue& ep,
            cudaStream_t stream, Sm90SkinnyWork sk) const {
    Sm90Fp8GemmArgs a;
    a.a = q;
    a.lda = ldq;
    a.sa = sa;
    a.ld_sa = ld_sa;
    a.b = static_cast<const uint8_t*>(codes_.data());
    a.ldb = ldb_;
    a.sb = static_cast<const float*>(scales_.data());
    a.ld_sb = ld_sb_;
    a.M = M;
    a.N = N;
    a.K = K;
    if (y != nullptr) {
      a.y = y->data;
      a.ldy = y->ld();
      a.y_type = io_type_of(y->dtype);
    } else {
      a.quant = *quant;
    }
    a.bias = ep.bias.empty() ? nullptr : ep.bias.data;
    a.bias_type = ep.bias.empty() ? 2 : io_type_of(ep.bias.dtype);
    a.clamp_lo = ep.clamp_lo;
    a.clamp_hi = ep.clamp_hi;
    a.num_sms = sms_;
    a.group_n = opts.tuning.w8a8_group_n;
    a.y_tma = opts.tuning.w8a8_y_tma == Toggle::Off ? 0 : -1;
    a.pdl = skinny_pdl();
    const bool narrow = quant != nullptr;
    if (log_plans())
      print_plan(narrow ? "linear (fp8 block, quantized output)" : "linear (fp8 block)", M,
                 kernel_id(M, narrow).name());
    if (skinny(M)) {
      launch_sm90_fp8_skinny_gemm(a, skinny_plan(M), sk.partial, sk.tickets, stream);
      return;
    }
    const KernelId id = kernel_id(M, narrow);  // the plan's tile (forced, or picked from M and N)
    a.block_n = id.tile_n;
    a.cluster = id.ctas;
    a.block_m = id.tile_m;
    launch_sm90_fp8_block_gemm(a, stream);
  }

  void check_forced_tile(int64_t M) const {
    MIXQ_CHECK_ARG(!forced_skinny_mt_ || M <= forced_skinny_mt_, "cuda Fp8Block: force_kernel '",
                   sm90_fp8_skinny_name(forced_skinny_mt_), "' serves M <= ", forced_skinny_mt_,
                   ", got M = ", M);
  }
  // The skinny kernel's part of the workspace (partial sums, and tickets in a caller's one).
  size_t gemm_workspace_size(int64_t M) const {
    return skinny(M) ? sm90_skinny_workspace_bytes(skinny_plan(M)) : 0;
  }
  // Where the skinny kernel's partial sums and tickets go: `at` in the call's workspace (the
  // caller's, whose tickets are cleared on the stream, or the internal scratch with the weight's
  // own tickets). None for the 128-row tiles.
  Sm90SkinnyWork skinny_work(int64_t M, char* at, const ExecContext& ctx,
                             cudaStream_t stream, bool quantizer_clears = false) const {
    if (!skinny(M)) return {};
    return sm90_skinny_work(at, skinny_plan(M), static_cast<unsigned*>(internal_tickets_.data()),
                            ctx.workspace != nullptr, stream, quantizer_clears);
  }
  // The quantized activations' part of the workspace (the skinny kernel's part follows).
  size_t acts_bytes(int64_t M) const {
    return align256(align256(size_t(M * act_row_pitch(K))) +
                    size_t(nkb_ * act_meta_pitch(M)) * 4);
  }
  // The skinny kernel serves this M: forced, or M <= kSkinnyMaxM unless a 128-row tile is forced.
  bool skinny(int64_t M) const {
    if (forced_skinny_mt_) return M <= forced_skinny_mt_;
    return forced_.block_n == 0 && M <= kSkinnyMaxM;
  }
  Sm90SkinnyPlan skinny_plan(int64_t M) const {
    return sm90_skinny_plan(M, N, K, sms_, forced_skinny_mt_);
  }

  // The instantiation a call with M rows runs (narrow: a quantized output, 128-wide tiles).
  KernelId kernel_id(int64_t M, bool narrow = false) const {
    KernelId id;
    if (forced_skinny_mt_ || skinny(M)) {
      id.family = Family::Fp8Skinny;
      id.tile_m = uint16_t(forced_skinny_mt_ ? forced_skinny_mt_ : skinny_plan(M).mt);
      return id;
    }
    const Sm90Fp8Tile t = sm90_fp8_gemm_tile(M, N, sms_, forced_, narrow);
    id.family = Family::Fp8Gemm;
    id.tile_n = uint16_t(t.block_n);
    id.ctas = uint8_t(t.cluster);
    if (t.block_m == 256) id.tile_m = 256;  // 0 for the 128-row tiles (their ids as before)
    return id;
  }
  bool skinny_pdl() const { return opts.tuning.w8a8_skinny_pdl != Toggle::Off; }

  int device_ = 0, sms_ = 0;
  Sm90Fp8Tile forced_;        // block_n 0: the plan's pick (kernel_id)
  int forced_skinny_mt_ = 0;  // > 0: the skinny kernel with this token tile is forced
  int64_t nkb_ = 0, ldb_ = 0, ld_sb_ = 0;
  DeviceContext* ctx_ = nullptr;
  DeviceBuffer codes_, scales_, internal_tickets_;
  std::shared_ptr<DeviceBuffer> scratch_;
};

}  // namespace

bool fp8_block_expert_view(const PreparedImpl& impl, Fp8ExpertView& view) {
  const auto* w = dynamic_cast<const CudaFp8Block*>(&impl);
  if (w == nullptr) return false;
  view = w->expert_view();
  return true;
}

std::shared_ptr<const PreparedImpl> prepare_fp8_block(const QuantizedWeight& w,
                                                      const PrepareOptions& opts) {
  return std::make_shared<CudaFp8Block>(w, opts);
}

}  // namespace mixq::cuda
