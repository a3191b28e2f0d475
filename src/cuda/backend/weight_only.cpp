// The CUDA weight-only backend: prepare() repacks a canonical weight on the GPU into the
// fragment-ordered layout (kernels/common/wo_layout.hpp) and builds the per-group (scale, offset)
// pairs; linear() asks the planner (dispatch/wo_plan.hpp) for the call's plan and hands it to the
// launcher of the kernel it names, on the caller's stream, without synchronising.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <tuple>
#include <utility>
#include <unordered_map>
#include <vector>

#include "core/fp8_act_weights.hpp"
#include "core/kernel_k_layout.hpp"
#include "core/prepared.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/backend/factories.hpp"
#include "cuda/backend/common.hpp"
#include "cuda/backend/cublas_util.hpp"
#include "cuda/runtime/device_context.hpp"
#include "cuda/dispatch/force_kernel.hpp"
#include "cuda/runtime/tensor_map.hpp"
#include "cuda/launch/act_quant.hpp"
#include "cuda/launch/wo_kernels.hpp"
#include "cuda/dispatch/plan_log.hpp"
#include "cuda/dispatch/wo_plan.hpp"
#include "cuda/launch/wo_wgmma.hpp"
#include "cuda/backend/moe_wo_view.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq {

namespace {

using cuda::DeviceCaps;
using cuda::IoType;
using cuda::Family;
using cuda::WoLayout;
using cuda::WoPlan;

IoType io_type(DType t) { return IoType(cuda::float_type_code(t, "cuda weight-only")); }

using cuda::cublas_type;

using cuda::DeviceGuard;

class CudaWeightOnly final : public PreparedImpl {
 public:
  CudaWeightOnly(const QuantizedWeight& w, const PrepareOptions& o) {
    backend = BackendKind::CUDA;
    opts = o;
    N = w.N;
    K = w.K;
    device_ = o.device;
    cuda::check_device_ordinal(device_);
    DeviceGuard guard(device_);
    ctx_ = &cuda::DeviceContext::get(device_);
    caps_ = ctx_->caps();
    force_ = cuda::forced_kernel(o, {"sm80_wo", "sm90_wo", "wo_"});
    MIXQ_CHECK(caps_.cc_major >= 8, ErrorCode::Unsupported, "cuda backend needs compute capability "
               ">= 8.0 (mma.sync m16n8k16 bf16), device ", device_, " is ", caps_.cc_major, ".",
               caps_.cc_minor);
    const bool int_codes = w.code_type == DType::I4 || w.code_type == DType::U4 ||
                           w.code_type == DType::I8 || w.code_type == DType::U8;
    // FP8 block weights (e.g. fp8b128: 128x128 blocks): any block_n, expanded to one scale per
    // row at prepare time.
    const bool fp8 = w.code_type == DType::F8E4M3;
    // W4A8 (act = fp8-block on 4-bit weights, core/fp8_act_weights.hpp): the wgmma kernel's e4m3
    // path, activations quantized per call in 1 x 128 blocks
    const bool a8 = o.act == ActQuant::Fp8Block;
    MIXQ_CHECK(!a8 || w4a8_weight(w), ErrorCode::Unsupported, "cuda W4A8: act = fp8-block takes 4-bit "
               "weights in per-row groups of 128 (symmetric or zero-point), got ", w.describe());
    MIXQ_CHECK(!a8 || caps_.sm90a, ErrorCode::Unsupported, "cuda W4A8: needs an sm_90a build on a Hopper "
               "GPU (FP8 wgmma); device ", device_, " is ", caps_.cc_major, ".", caps_.cc_minor,
               " (use the cpu backend)");
    MIXQ_CHECK((int_codes && w.has_scales && w.block_n == 1) ||
                   (fp8 && w.has_scales && w.block_n >= 1 && w.zero_kind == ZeroKind::None),
               ErrorCode::Unsupported,
               "cuda weight-only: needs int4/int8 codes with per-row block scales or e4m3 codes "
               "with block scales, got ", w.describe());
    MIXQ_CHECK(K <= (int64_t(1) << 30) && N <= (int64_t(1) << 30), ErrorCode::Unsupported,
               "cuda weight-only: N (", N, ") and K (", K, ") must be < 2^30");

    // A shard whose split cut a group is laid so that its blocks start on kernel groups
    // (core/kernel_k_layout.hpp): the kernels run over kk_.K >= K columns.
    kk_ = kernel_k_layout(w, 16);
    L_.N = N;
    L_.K = kk_.K;
    L_.Np = cuda::round_up(N, cuda::kTileRows);
    L_.Kp = cuda::round_up(kk_.K, cuda::kChunkK);
    L_.bits = dtype_bits(w.code_type);
    L_.e4m3 = fp8;
    L_.fp8_act = a8;
    MIXQ_CHECK(!a8 || kk_.identity(), ErrorCode::Unsupported, "cuda W4A8: a shard whose split cuts a group "
               "of 128 is not supported (its activation blocks would straddle two groups); split on whole "
               "groups (ShardSpec::granularity)");
    int_zero_ = w.zero_kind != ZeroKind::Offset;
    if (fp8) check_no_nan_codes(w);
    group_shift_ = kk_.group_shift;
    L_.group = int64_t(1) << group_shift_;
    L_.groups = (L_.Kp + L_.group - 1) / L_.group;
    build_pairs(w);
    upload_codes(w);
    if (!kk_.x_col.empty() || !w.k_perm.empty()) {
      const std::vector<int32_t>& cols = kk_.x_col.empty() ? w.k_perm : kk_.x_col;
      perm_ = DeviceBuffer(cols.size() * 4, device_);
      perm_.copy_from_host(cols.data(), cols.size() * 4);
    }
    // the warp-specialized wgmma kernel reads the pairs group-major (and bf16 calls the packed
    // copy of the bf16 integer-zero path)
    if (caps_.sm90a) build_pairs_group_major();
    w_.L = L_;
    w_.group_shift = group_shift_;
    w_.int_zero = int_zero_;
    w_.bf16_zero_pairs = pairs_gm_bz_.size() > 0;
    w_.gather = perm_.size() > 0;
    // Internal scratch (shared per device) for calls that bring no workspace: every plan up to
    // M = kScratchRows whose output cuBLAS writes directly. Tickets are this weight's own: they
    // start at zero and every launch leaves them at zero.
    const cuda::WoWorkspaceBound bound = cuda::wo_max_workspace(w_, caps_, opts.tuning, kScratchRows, false);
    const size_t ws = bound.bytes, tickets = bound.tickets;
    scratch_ = ctx_->reserve_scratch(ws);
    internal_tickets_ = DeviceBuffer(std::max<size_t>(tickets, 1) * 4, device_);
    MIXQ_CUDA_CHECK(cudaMemset(internal_tickets_.data(), 0, internal_tickets_.size()));
    MIXQ_CUDA_CHECK(cudaDeviceSynchronize());  // prepare is not on the hot path
  }

  // The instantiation a call with M rows of `act` activations (16-byte aligned rows, outputs of
  // the same type that TMA can store) runs.
  std::string kernel_name(int64_t M) const override { return kernel_name(M, DType::F16); }
  std::string kernel_name(int64_t M, DType act) const override {
    cuda::WoCall c;
    c.M = M;
    c.x_type = c.y_type = int(io_type(act));
    c.y_tma = act != DType::F32;
    return cuda::wo_plan_name(plan(c));
  }
  // The implicit-GEMM conv's kernel for M output pixels (conv_igemm's plan, 16-bit NHWC x and y).
  std::string conv_kernel_name(int64_t M, DType act) const {
    cuda::WoCall c;
    c.M = std::max<int64_t>(M, 1);
    c.x_type = c.y_type = int(io_type(act));
    c.y_tma = act != DType::F32;
    c.fill_sms = true;
    return cuda::wo_plan_name(conv_plan(c));
  }

  // The buffers a grouped (mixture-of-experts) launch reads for this expert.
  cuda::WoExpertView expert_view() const {
    MIXQ_CHECK(kk_.identity(), ErrorCode::Unsupported, "cuda grouped linear: an expert whose "
               "blocks a shard split cut (", kk_.K - K, " kernel columns added) is not supported; "
               "split the experts on whole groups (ShardSpec::granularity)");
    cuda::WoExpertView v;
    v.w = w_;
    v.codes = codes_.data();
    v.pairs_stream = pairs_stream_.data();
    v.k_perm = perm_.size() ? static_cast<const int32_t*>(perm_.data()) : nullptr;
    v.pair_f32 = L_.pair_f32;
    v.pairs_gm = pairs_gm_.size() ? pairs_gm_.data() : nullptr;
    v.pairs_gm_bz = pairs_gm_bz_.size() ? pairs_gm_bz_.data() : nullptr;
    v.pairs_gm_ld = pairs_gm_ld_;
    v.device = device_;
    return v;
  }

  size_t workspace_size(int64_t M) const override {
    // Asked before every call by callers that do not keep it (mixq.linear, conv2d): remembered
    // per M, since the maximum below plans 30 calls.
    std::lock_guard<std::mutex> lock(ws_mutex_);
    auto [it, fresh] = ws_sizes_.try_emplace(M, 0);
    if (fresh) it->second = max_workspace(M);
    return it->second;
  }

  // The largest of the plans any call with M rows can get, over every input / output dtype,
  // aligned or unaligned rows, TMA-stored or plain 16-bit outputs and (conv implicit GEMM) the
  // token tiles that fill the SMs (the kernel choice and its split-K / staging scratch depend on
  // all of them), so one size serves every call.
  size_t max_workspace(int64_t M) const {
    size_t need = 0;
    for (const IoType x : {IoType::F16, IoType::BF16, IoType::F32})
      for (const IoType y : {IoType::F16, IoType::BF16, IoType::F32})
        for (const bool aligned : {true, false})
          for (const bool y_tma : {false, true})
            for (const bool fill : {false, true}) {
              if (y_tma && y == IoType::F32) continue;
              if (fill && !conv_capable()) continue;  // a weight no conv2d call can run
              cuda::WoCall c;
              c.M = std::max<int64_t>(M, 1);
              c.x_type = int(x);
              c.y_type = int(y);
              c.x_aligned = aligned;
              c.y_tma = y_tma;
              c.fill_sms = fill;
              try {
                need = std::max(need, cuda::wo_workspace_bytes(fill ? conv_plan(c) : plan(c)));
              } catch (const Error&) {
                // a combination this weight's (forced) kernel refuses: no call can have it
              }
            }
    return need;
  }

  // Whether the wgmma kernel can run this weight as the implicit GEMM of a conv2d call: an sm_90a
  // device, a plain weight (no act-order gather, no shard shift), Ck columns a tap (Ci, or Ci
  // padded: im2col_conv.hpp) a multiple of the 64-wide chunk and less than a chunk past Ci,
  // K = Kh Kw Ck, 16-bit NHWC x whose rows TMA can read, geometry an im2col map holds.
  bool conv_igemm_serves(const cuda::Im2colConv& g, const TensorView& x) const {
    return conv_capable() && cuda::im2col_taps_fit(g, cuda::kChunkK, L_.K) &&
           (x.dtype == DType::F16 || x.dtype == DType::BF16) &&
           reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && cuda::im2col_map_fits(g);
  }

  // The part of conv_igemm_serves that depends on the weight alone (max_workspace bounds the conv
  // plans only for such weights: a linear weight's scratch stays that of its own calls).
  bool conv_capable() const {
    return caps_.sm90a && !L_.fp8_act && (force_.empty() || force_ == "sm90_wo_ws") && perm_.size() == 0 &&
           kk_.identity() && L_.K % cuda::kChunkK == 0;
  }

  // conv2d as the wgmma kernel's implicit GEMM: M = B Ho Wo output pixels (NHWC rows of y), the
  // plan that of a linear call with those rows, X loaded tap by tap through an im2col map.
  void conv_igemm(const cuda::Im2colConv& g, const TensorView& x, const TensorView& y, const Epilogue& ep,
                  const ExecContext& ctx) const {
    const int64_t M = int64_t(g.B) * g.Ho * g.Wo;
    cuda::WoCall c;
    c.M = M;
    c.x_type = int(io_type(x.dtype));
    c.y_type = int(io_type(y.dtype));
    c.x_aligned = true;
    c.y_tma = (y.dtype == DType::F16 || y.dtype == DType::BF16) && cuda::tma_stores_16bit_rows(y.data, N, N);
    c.fill_sms = true;
    const WoPlan p = conv_plan(c);
    MIXQ_CHECK(p.id.family == Family::WoWgmma, ErrorCode::Internal, "conv2d (cuda): the implicit GEMM "
               "planned ", p.id.name());
    log_plan(p, M);
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    DeviceGuard guard(device_);
    const auto [ws, tickets] = call_workspace(p, M, ctx, "conv2d");
    const TensorView rows_x(x.data, x.dtype, {M, g.Ci}, Device::CUDA, x.device_index);
    const TensorView rows_y(y.data, y.dtype, {M, N}, Device::CUDA, y.device_index);
    cuda::WoStreamParams k = kernel_params(p, rows_x, rows_y, ep, ws, tickets);
    k.conv_on = 1;
    k.conv = g;
    k.conv.Ck = cuda::im2col_tap_columns(g);  // the kernel reads Ck
    cuda::launch_wo_wgmma(k, p, stream);
  }

  void linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
              const ExecContext& ctx) const override {
    cuda::check_call_device(x, y, device_);
    const int64_t M = x.shape[0];
    cuda::WoCall c;
    c.M = M;
    c.x_type = int(io_type(x.dtype));
    c.y_type = int(io_type(y.dtype));
    // the wgmma kernel loads X rows by TMA (16-byte aligned rows)
    c.x_aligned = reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && x.ld() % 8 == 0;
    c.y_tma = y_tma(y);
    const WoPlan p = plan(c);
    log_plan(p, M);
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    DeviceGuard guard(device_);
    const auto [ws, tickets] = call_workspace(p, M, ctx, "linear");
    if (L_.fp8_act) return run_w4a8(p, x, y, ep, ws, tickets, stream);
    switch (p.id.family) {
      case Family::WoStream: return run_stream(p, x, y, ep, ws, tickets, stream);
      case Family::WoWgmma: return run_wgmma(p, x, y, ep, ws, tickets, stream);
      default: return run_cublas(p, x, y, ep, ws, stream);
    }
  }

  // W4A8 on the caller's e4m3 codes and block scales (validated by ops.cpp); other weights: the
  // default (unsupported).
  void linear_quantized(const QuantizedActivations& xq, const TensorView& y, const Epilogue& ep,
                        const ExecContext& ctx) const override {
    if (!L_.fp8_act) return PreparedImpl::linear_quantized(xq, y, ep, ctx);
    cuda::check_call_device(xq.q, y, device_);
    const int64_t M = xq.q.shape[0];
    cuda::WoCall c;
    c.M = M;
    c.x_type = c.y_type = int(io_type(y.dtype));
    c.y_tma = y_tma(y);
    const WoPlan p = plan(c);
    log_plan(p, M);
    DeviceGuard guard(device_);
    const auto [ws, tickets] = call_workspace(p, M, ctx, "linear");
    // the caller's codes; their block factors into the workspace's activation region
    const auto stream = static_cast<cudaStream_t>(ctx.stream);
    const uint8_t* q = static_cast<const uint8_t*>(xq.q.data);
    float* f = reinterpret_cast<float*>(ws + cuda::wo_workspace_offsets(p).gather + cuda::wo_a8_factors_offset(M, K));
    cuda::launch_w4a8_factors(q, xq.q.stride[0], static_cast<const float*>(xq.scale.data), xq.scale.stride[0], M, K, f,
                              cuda::act_meta_pitch(M), a8_factor_zero(), stream);
    run_w4a8_codes(p, q, xq.q.stride[0], f, M, y, ep, ws, tickets, stream);
  }

 private:
  // The wgmma kernel's TMA-store epilogue can write y (16-bit rows TMA can address).
  bool y_tma(const TensorView& y) const {
    return (y.dtype == DType::F16 || y.dtype == DType::BF16) && cuda::tma_stores_16bit_rows(y.data, y.ld(), N);
  }

  // Largest M the internal scratch serves (calls without a workspace of their own).
  static constexpr int64_t kScratchRows = 4096;

  cuda::WoPlan plan(const cuda::WoCall& c) const {
    return cuda::plan_weight_only(c, w_, caps_, opts.tuning, force_);
  }
  // The implicit-GEMM conv's plan: always the wgmma kernel (the only one with an im2col load).
  cuda::WoPlan conv_plan(const cuda::WoCall& c) const {
    return cuda::plan_weight_only(c, w_, caps_, opts.tuning, "sm90_wo_ws");
  }

  // The call's workspace and split-K tickets: the caller's (tickets zeroed on the stream), else
  // the scratch reserved at prepare time. `op` names the call in the errors.
  std::pair<char*, unsigned*> call_workspace(const WoPlan& p, int64_t M, const ExecContext& ctx,
                                             const char* op) const {
    const size_t need = cuda::wo_workspace_bytes(p);
    if (ctx.workspace) {
      MIXQ_CHECK_ARG(ctx.workspace_bytes >= need, op, ": workspace of ", ctx.workspace_bytes,
                     " bytes is smaller than the ", need, " bytes this call needs (", op,
                     "_workspace_size)");
      char* ws = static_cast<char*>(ctx.workspace);
      unsigned* tickets = reinterpret_cast<unsigned*>(ws + cuda::wo_workspace_offsets(p).tickets);
      if (cuda::wo_plan_reads_tickets(p))
        MIXQ_CUDA_CHECK(cudaMemsetAsync(tickets, 0, p.tickets * 4, static_cast<cudaStream_t>(ctx.stream)));
      return {ws, tickets};
    }
    MIXQ_CHECK_ARG(need <= scratch_->size(), op, ": M = ", M, " needs ", need,
                   " bytes of workspace, more than the ", scratch_->size(),
                   " reserved at prepare time; pass ExecContext::workspace (", op, "_workspace_size)");
    MIXQ_CHECK(p.tickets * 4 <= internal_tickets_.size(), ErrorCode::Internal, op, ": M = ", M,
               " needs ", p.tickets, " split-K tickets, more than the ", internal_tickets_.size() / 4,
               " reserved at prepare time");
    return {static_cast<char*>(scratch_->data()), static_cast<unsigned*>(internal_tickets_.data())};
  }

  // e4m3 has no infinities and its NaN (0x7F / 0xFF) has no place in a weight; the kernels would
  // decode it as a finite value (sm_80 bit trick) or NaN (sm_90 cvt), so refuse it up front.
  static void check_no_nan_codes(const QuantizedWeight& w) {
    const int64_t rb = w.row_bytes();
    for (int64_t n = 0; n < w.N; ++n)
      for (int64_t k = 0; k < w.K; ++k) {
        const uint8_t b = w.codes[size_t(n * rb + k)];
        MIXQ_CHECK_ARG((b & 0x7F) != 0x7F, "prepare (cuda): e4m3 weight code at [", n, ", ", k,
                       "] is NaN (byte ", int(b), "); FP8 weights must be finite");
      }
  }

  // W4A8: the integer zero point that every group of the pairs (s, o) shares, as the kernel's fold
  // derives it (rint(-o / s), sm90_wgmma_dequant.cuh's integer_zero), or -1 where groups differ.
  // Groups with s = 0 add nothing whatever their zero point; all of them so: 0.
  int shared_zero_point(const std::vector<float>& s, const std::vector<float>& o) const {
    const int64_t G = L_.groups;
    int shared = -2;  // none seen yet
    for (int64_t n = 0; n < N; ++n)
      for (int64_t g = 0; g < G; ++g) {
        const size_t i = size_t(n * G + g);
        if (s[i] == 0.f) continue;
        const float z = std::rint(-o[i] / s[i]);
        if (!(z >= 0.f && z <= 15.f)) return -1;
        if (shared == -2) shared = int(z);
        else if (shared != int(z)) return -1;
      }
    return shared == -2 ? 0 : shared;
  }

  // (s, o') per (row, group) so that w = s * u + o' with u the unsigned code (wo_layout.hpp);
  // e4m3: (s of the row's block, 0), u the e4m3 value.
  void build_pairs(const QuantizedWeight& w) {
    const int32_t cmin = L_.e4m3 ? 0 : code_min(w.code_type);
    const int64_t G = L_.groups, Gc = w.n_blocks_k();
    std::vector<float> s(size_t(L_.Np * G), 0.f), o(size_t(L_.Np * G), 0.f);
    bool half_exact = true;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t g = 0; g < G; ++g) {
        const int64_t b = kk_.block_of_group(g);  // the canonical block of kernel group g
        if (b >= Gc) continue;                    // kernel padding past the last block
        const int64_t nb = w.n_block(n);          // FP8 blocks of a column shard: n_phase
        const double sc = w.scale(nb, b);
        double off = 0;
        // q = u + cmin, so s*q + o = s*u + (o + cmin*s); s*(q - z) = s*u + s*(cmin - z).
        switch (w.zero_kind) {
          case ZeroKind::None: off = double(cmin) * sc; break;
          case ZeroKind::Offset: off = double(w.offset(nb, b)) + double(cmin) * sc; break;
          case ZeroKind::ZeroPoint: off = sc * double(cmin - w.zero_point(nb, b)); break;
        }
        const float sf = float(sc), of = float(off);
        s[n * G + g] = sf;
        o[n * G + g] = of;
        half_exact = half_exact && f16_to_f32(f32_to_f16(sf)) == sf && f16_to_f32(f32_to_f16(of)) == of;
      }
    // Half pairs halve the scale traffic; used only when every value is exact in f16.
    L_.pair_f32 = !half_exact;
    if (L_.fp8_act) L_.a8_zero = shared_zero_point(s, o);
    std::vector<uint8_t> buf(size_t(L_.pair_bytes()));
    for (size_t i = 0; i < s.size(); ++i) {
      if (L_.pair_f32) {
        std::memcpy(buf.data() + 8 * i, &s[i], 4);
        std::memcpy(buf.data() + 8 * i + 4, &o[i], 4);
      } else {
        const uint16_t hs = f32_to_f16(s[i]), ho = f32_to_f16(o[i]);
        std::memcpy(buf.data() + 4 * i, &hs, 2);
        std::memcpy(buf.data() + 4 * i + 2, &ho, 2);
      }
    }
    pairs_ = DeviceBuffer(buf.size(), device_);
    pairs_.copy_from_host(buf.data(), buf.size());
    // the streaming kernel's lane-order copy (wo_layout.hpp: stream_pair_index)
    const size_t psz = L_.pair_f32 ? 8 : 4;
    std::vector<uint8_t> lane(size_t(L_.stream_pair_bytes()), 0);
    for (int64_t n = 0; n < L_.Np; ++n)
      for (int64_t g = 0; g < G; ++g)
        std::memcpy(lane.data() + size_t(cuda::stream_pair_index(n, g, G)) * psz,
                    buf.data() + size_t(n * G + g) * psz, psz);
    pairs_stream_ = DeviceBuffer(lane.size(), device_);
    pairs_stream_.copy_from_host(lane.data(), lane.size());
  }

  // Group-major copy of the pairs for the warp-specialized wgmma kernel: the pairs of one group
  // for 128 consecutive rows are contiguous (one bulk copy per stage instead of 128 per-row
  // cp.async, which cost 10-17% at M >= 256: docs/decisions/wo-repack-and-pairs.md).
  void build_pairs_group_major() {
    const size_t psz = L_.pair_f32 ? 8 : 4;
    const int64_t G = L_.groups;
    pairs_gm_ld_ = cuda::round_up(N, 128);
    std::vector<uint8_t> rm(size_t(L_.pair_bytes()));
    pairs_.copy_to_host(rm.data(), rm.size());
    std::vector<uint8_t> gm(size_t(G * pairs_gm_ld_) * psz, 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t g = 0; g < G; ++g)
        std::memcpy(gm.data() + size_t(g * pairs_gm_ld_ + n) * psz, rm.data() + size_t(n * G + g) * psz, psz);
    pairs_gm_ = DeviceBuffer(gm.size(), device_);
    pairs_gm_.copy_from_host(gm.data(), gm.size());
    // The bf16 integer-zero path's copy: (bf16 s, bf16 128 + zc) per word for int4, what the kernel
    // derived from (s, o') per stage and row before (a division and two conversions per pair, ~15%
    // of the stage's dequantization work at mt = 32); (bf16 s, bf16 (128 - zc) s) for int8, whose
    // kernel adds the second term to (u - 128) s with one rounding, so it is built only where that
    // product is exact in bf16 for every pair (symmetric codes: zc = 128, the term is 0); other
    // int8 weights keep the f32 path. zc = rint(-o' / s) (an approximate quotient rounds to it
    // exactly, so it equals the kernel's old __fdividef result); 0 where s is 0.
    if (!int_zero_ || L_.e4m3 || (L_.bits != 4 && L_.bits != 8)) return;
    std::vector<uint32_t> bz(size_t(G * pairs_gm_ld_), 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t g = 0; g < G; ++g) {
        const uint8_t* src = rm.data() + size_t(n * G + g) * psz;
        float s, o;
        if (L_.pair_f32) {
          std::memcpy(&s, src, 4);
          std::memcpy(&o, src + 4, 4);
        } else {
          uint16_t h[2];
          std::memcpy(h, src, 4);
          s = f16_to_f32(h[0]);
          o = f16_to_f32(h[1]);
        }
        const float zc = s != 0.f ? float(std::rint(-double(o) / double(s))) : 0.f;
        const uint16_t s_bf = f32_to_bf16(s);
        uint16_t hi = f32_to_bf16(128.f + zc);
        if (L_.bits == 8) {
          const double term = (128.0 - zc) * double(bf16_to_f32(s_bf));  // exact: 8 x 8 significant bits
          hi = f32_to_bf16(float(term));
          if (double(bf16_to_f32(hi)) != term) return;  // not exact in bf16: this weight keeps the f32 path
        }
        bz[size_t(g * pairs_gm_ld_ + n)] = uint32_t(s_bf) | uint32_t(hi) << 16;
      }
    pairs_gm_bz_ = DeviceBuffer(bz.size() * 4, device_);
    pairs_gm_bz_.copy_from_host(bz.data(), bz.size() * 4);
  }

  void upload_codes(const QuantizedWeight& w) {
    // a shard laid over a wider kernel axis is first rewritten over it on the host
    const std::vector<uint8_t> laid = kk_.identity() ? std::vector<uint8_t>() : codes_in_kernel_layout(w, kk_);
    const std::vector<uint8_t>& src = kk_.identity() ? w.codes : laid;
    DeviceBuffer canon(src.size(), device_);
    canon.copy_from_host(src.data(), src.size());
    codes_ = DeviceBuffer(size_t(L_.packed_bytes()), device_);
    const bool is_signed = w.code_type == DType::I4 || w.code_type == DType::I8;
    cuda::launch_wo_repack(static_cast<const uint8_t*>(canon.data()), dtype_bytes(w.code_type, L_.K),
                           is_signed, L_, static_cast<uint32_t*>(codes_.data()), nullptr);
    MIXQ_CUDA_CHECK(cudaDeviceSynchronize());
  }

  void run_stream(const WoPlan& p, const TensorView& x, const TensorView& y, const Epilogue& ep,
                  char* ws, unsigned* tickets, cudaStream_t stream) const {
    cuda::launch_wo_stream(kernel_params(p, x, y, ep, ws, tickets), p, stream);
  }

  // The Hopper wgmma kernel; act-order gathers X into the workspace first (16-byte aligned rows).
  void run_wgmma(const WoPlan& p, const TensorView& x, const TensorView& y, const Epilogue& ep,
                 char* ws, unsigned* tickets, cudaStream_t stream) const {
    cuda::WoStreamParams k = kernel_params(p, x, y, ep, ws, tickets);
    if (perm_.size()) {
      char* gathered = ws + cuda::wo_workspace_offsets(p).gather;
      const int64_t ldg = cuda::round_up(L_.K, 8);
      cuda::launch_gather_columns(x.data, x.ld(), 2, static_cast<const int32_t*>(perm_.data()),
                                  x.shape[0], L_.K, gathered, ldg, stream);
      k.x = gathered;
      k.ldx = ldg;
      k.k_perm = nullptr;
    }
    cuda::launch_wo_wgmma(k, p, stream);
  }

  // W4A8: X quantized to e4m3 in 1 x 128 blocks into the workspace with the blocks' factors
  // (launch/act_quant.hpp), then the wgmma kernel's e4m3 instance on those codes and factors.
  void run_w4a8(const WoPlan& p, const TensorView& x, const TensorView& y, const Epilogue& ep, char* ws,
                unsigned* tickets, cudaStream_t stream) const {
    const int64_t M = x.shape[0];
    const int64_t ldq = cuda::act_row_pitch(K);
    char* act = ws + cuda::wo_workspace_offsets(p).gather;
    uint8_t* q = reinterpret_cast<uint8_t*>(act);
    float* f = reinterpret_cast<float*>(act + cuda::wo_a8_factors_offset(M, K));
    cuda::launch_quantize_fp8_w4a8(x.data, int(io_type(x.dtype)), x.ld(), M, K, q, ldq, f, cuda::act_meta_pitch(M),
                                   a8_factor_zero(), stream, cuda::act_quant_tuning(opts.tuning));
    run_w4a8_codes(p, q, ldq, f, M, y, ep, ws, tickets, stream);
  }
  // f: the codes' block factors, [K blocks][act_meta_pitch(M)] float2
  void run_w4a8_codes(const WoPlan& p, const uint8_t* q, int64_t ldq, const float* f, int64_t M,
                      const TensorView& y, const Epilogue& ep, char* ws, unsigned* tickets,
                      cudaStream_t stream) const {
    const TensorView rows_x(const_cast<uint8_t*>(q), DType::F16, {M, K}, Device::CUDA, y.device_index);
    cuda::WoStreamParams k = kernel_params(p, rows_x, y, ep, ws, tickets);
    k.x = q;
    k.ldx = ldq;  // bytes
    k.x_factors = f;
    k.ld_x_factors = cuda::act_meta_pitch(M);
    k.a8_zero_in_factors = cuda::w4a8_factor_zero(L_, opts.tuning) >= 0 ? 1 : 0;
    cuda::launch_wo_wgmma(k, p, stream);
  }
  // the factors' zero (launch_quantize_fp8_w4a8): the shared zero point, or 1 for the fold to apply
  // each row's
  float a8_factor_zero() const {
    const int z = cuda::w4a8_factor_zero(L_, opts.tuning);
    return z >= 0 ? float(z) : 1.f;
  }

  cuda::WoStreamParams kernel_params(const WoPlan& p, const TensorView& x, const TensorView& y,
                                     const Epilogue& ep, char* ws, unsigned* tickets) const {
    cuda::WoStreamParams k{};
    k.x = x.data;
    k.ldx = x.ld();
    k.x_type = io_type(x.dtype);
    k.k_perm = perm_.size() ? static_cast<const int32_t*>(perm_.data()) : nullptr;
    k.x_shift = int(kk_.x_shift);
    k.M = int(x.shape[0]);
    k.N = int(N);
    k.K = int(L_.K);
    k.x_rows = p.x_rows;
    k.codes = static_cast<const uint4*>(codes_.data());
    k.pairs = pairs_.data();
    k.pairs_stream = pairs_stream_.data();
    k.pairs_gm = pairs_gm_.size() ? pairs_gm_.data() : nullptr;
    k.pairs_gm_ld = pairs_gm_ld_;
    k.pairs_gm_bz = pairs_gm_bz_.size() ? pairs_gm_bz_.data() : nullptr;
    k.pair_f32 = L_.pair_f32;
    k.int_zero = int_zero_;
    k.Kp = int(L_.Kp);
    k.group_shift = group_shift_;
    k.groups = int(L_.groups);
    k.chunks_per_split = p.chunks_per_split;
    k.chunks_per_stage = p.chunks_per_stage;
    k.splits = p.splits;
    k.cluster = p.cluster;
    k.pdl = p.pdl;
    k.partial = reinterpret_cast<float*>(ws);
    k.tickets = tickets;
    k.y = y.data;
    k.ldy = y.ld();
    k.y_type = io_type(y.dtype);
    k.bias = ep.bias.empty() ? nullptr : ep.bias.data;
    k.bias_type = ep.bias.empty() ? IoType::F32 : io_type(ep.bias.dtype);
    k.clamp_lo = ep.clamp_lo;
    k.clamp_hi = ep.clamp_hi;
    return k;
  }

  void run_cublas(const WoPlan& p, const TensorView& x, const TensorView& y, const Epilogue& ep,
                  char* ws, cudaStream_t stream) const {
    const int64_t M = x.shape[0];
    const bool x_f32 = x.dtype == DType::F32;
    // cuBLAS needs A and B of one type: 16-bit weights for 16-bit activations, f32 for f32.
    const DType wt = x.dtype;
    const int out_type = wt == DType::F16 ? 0 : wt == DType::BF16 ? 1 : 2;
    const cuda::WoWorkspaceOffsets off = cuda::wo_workspace_offsets(p);
    char* chunk = ws + off.chunk;
    char* gathered = ws + off.gather;
    const void* xp = x.data;
    int64_t ldx = x.ld();
    const int xb = x_f32 ? 4 : 2;
    // cuBLAS multiplies the kernel axis (gathered X) or, for a shifted shard, the dequantized
    // weight from its column x_shift on (the leading holes are skipped, X is read in place)
    int64_t gemm_k = K, w_col0 = kk_.x_shift;
    if (perm_.size()) {
      cuda::launch_gather_columns(x.data, x.ld(), xb, static_cast<const int32_t*>(perm_.data()), M,
                                  L_.K, gathered, L_.K, stream);
      xp = gathered;
      ldx = L_.K;
      gemm_k = L_.K;
      w_col0 = 0;
    }
    // cuBLAS writes C in the activation dtype or f32; any other output goes through f32 staging.
    const bool direct = p.out_bytes == 0;
    char* staged = ws + off.out;
    void* c_ptr = direct ? y.data : staged;
    const DType c_type = direct ? y.dtype : DType::F32;
    const int64_t ldc = direct ? y.ld() : N;
    {
      std::lock_guard<std::mutex> lock(ctx_->cublas_mutex());  // the handle's stream is per call
      cublasHandle_t cublas = ctx_->cublas();
      MIXQ_CUBLAS_CHECK(cublasSetStream(cublas, stream));
      const float alpha = 1.f, beta = 0.f;
      for (int64_t n0 = 0; n0 < N; n0 += p.chunk_rows) {
        const int64_t rows = std::min(p.chunk_rows, N - n0);
        cuda::launch_wo_dequant(static_cast<const uint32_t*>(codes_.data()), pairs_.data(), pairs_stream_.data(), L_, n0,
                                rows, out_type, chunk, L_.Kp, caps_.sm_count, stream);
        MIXQ_CUBLAS_CHECK(cublasGemmEx(
            cublas, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), int(M), int(gemm_k), &alpha,
            chunk + w_col0 * (dtype_bits(wt) / 8), cublas_type(wt), int(L_.Kp), xp,
            cublas_type(x.dtype), int(ldx), &beta,
            static_cast<char*>(c_ptr) + n0 * (dtype_bits(c_type) / 8), cublas_type(c_type),
            int(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
    }
    const bool clamp = std::isfinite(ep.clamp_lo) || std::isfinite(ep.clamp_hi);
    if (!ep.bias.empty() || clamp || !direct)
      cuda::launch_epilogue(c_ptr, ldc, int(io_type(c_type)), y.data, y.ld(), int(io_type(y.dtype)),
                            M, N, ep.bias.empty() ? nullptr : ep.bias.data,
                            ep.bias.empty() ? 2 : int(io_type(ep.bias.dtype)), ep.clamp_lo,
                            ep.clamp_hi, stream);
  }

  // MIXQ_LOG=plan: every call's plan on stderr (the switch is read once per process).
  static void log_plan(const WoPlan& p, int64_t M) {
    if (cuda::log_plans()) cuda::print_plan("linear (weight-only)", M, p.id.name());
  }

  int device_ = 0;
  DeviceCaps caps_;
  cuda::WoWeight w_;  // what the planner knows of this weight
  std::string force_;  // a forced weight-only family (PrepareOptions::force_kernel / MIXQ_FORCE_KERNEL)
  KernelKLayout kk_;  // where the weight's columns sit in the kernels' K axis
  WoLayout L_;
  int group_shift_ = 30;
  bool int_zero_ = false;  // offsets are -zc s with zc an integer (not ZeroKind::Offset)
  cuda::DeviceContext* ctx_ = nullptr;
  DeviceBuffer codes_, pairs_, pairs_stream_, pairs_gm_, pairs_gm_bz_, perm_, internal_tickets_;
  int64_t pairs_gm_ld_ = 0;
  std::shared_ptr<DeviceBuffer> scratch_;
  mutable std::mutex ws_mutex_;
  mutable std::unordered_map<int64_t, size_t> ws_sizes_;  // workspace_size(M) by M
};

}  // namespace

namespace cuda {
WoExpertView weight_only_expert_view(const PreparedImpl& impl) {
  const auto* w = dynamic_cast<const CudaWeightOnly*>(&impl);
  MIXQ_CHECK(w != nullptr, ErrorCode::Unsupported, "cuda grouped linear: the experts must be "
             "prepared weight-only (act = none)");
  return w->expert_view();
}

std::shared_ptr<const PreparedImpl> prepare_weight_only(const QuantizedWeight& w,
                                                        const PrepareOptions& opts) {
  return std::make_shared<CudaWeightOnly>(w, opts);
}

bool conv_igemm_serves(const PreparedImpl& linear_weight, const Im2colConv& g, const TensorView& x) {
  const auto* w = dynamic_cast<const CudaWeightOnly*>(&linear_weight);
  return w != nullptr && w->conv_igemm_serves(g, x);
}

std::string conv_igemm_kernel_name(const PreparedImpl& linear_weight, int64_t M, DType act) {
  const auto* w = dynamic_cast<const CudaWeightOnly*>(&linear_weight);
  MIXQ_CHECK(w != nullptr, ErrorCode::Internal, "conv2d (cuda): the implicit GEMM needs a weight-only "
             "linear weight");
  return w->conv_kernel_name(M, act);
}

void conv_igemm(const PreparedImpl& linear_weight, const Im2colConv& g, const TensorView& x,
                const TensorView& y, const Epilogue& ep, const ExecContext& ctx) {
  const auto* w = dynamic_cast<const CudaWeightOnly*>(&linear_weight);
  MIXQ_CHECK(w != nullptr, ErrorCode::Internal, "conv2d (cuda): the implicit GEMM needs a weight-only "
             "linear weight");
  w->conv_igemm(g, x, y, ep, ctx);
}
}  // namespace cuda

std::shared_ptr<const PreparedImpl> prepare_cuda(const QuantizedWeight& w, const ConvGeometry* conv,
                                                 const PrepareOptions& opts) {
  MIXQ_CHECK(cuda_available(), ErrorCode::Unsupported, "backend cuda: no CUDA device is available");
  if (conv) {
    if (opts.act == ActQuant::Int8PerTensor) return cuda::prepare_conv_int8_tensor(w, *conv, opts);
    MIXQ_CHECK(opts.act == ActQuant::None, ErrorCode::Unsupported, "prepare (cuda conv2d): act = ",
               act_quant_name(opts.act), " is not implemented on the cuda backend (none and "
               "int8-per-tensor are; use the cpu or reference backend)");
    return cuda::prepare_conv_weight_only(w, *conv, opts);
  }
  if (cuda::use_ggml_native(w, opts)) return cuda::prepare_ggml_native(w, opts);
  switch (opts.act) {
    case ActQuant::None: return cuda::prepare_weight_only(w, opts);
    case ActQuant::Fp8Block:
      // W4A8: the weight-only wgmma kernel's e4m3 path
      return w4a8_weight(w) ? cuda::prepare_weight_only(w, opts) : cuda::prepare_fp8_block(w, opts);
    case ActQuant::Int8Block: return cuda::prepare_int8_block(w, opts);
    case ActQuant::Int8PerTensor: return cuda::prepare_int8_tensor(w, opts);
  }
  MIXQ_FAIL(ErrorCode::InvalidArgument, "prepare: unknown act mode ", int(opts.act));
}

}  // namespace mixq
