// CUDA prepared weight for ActQuant::Int8Block (W8A8 per block, mission.md §2).
//
// prepare: the i8 codes are copied into a zero-padded [Np][Kp] matrix (K contiguous, the layout
// the GEMM's cp.async + ldmatrix want) and the per-(K block, row) epilogue values are precomputed
// block-major: sw, ow and dw = sw*Σqw + g_i*ow, each row in the int8_meta_col order
// (int8_gemm.hpp); where the Hopper kernel can run, also dw (and ow) K-major as tf32 hi / lo pairs
// for its rank-1 stages (r1w, int8_gemm.hpp).
// linear: quantize X into the workspace (act_quant.hpp layout), then one GEMM launch that applies
// the four-term per-block scaling in registers. Stream-ordered, no synchronisation. For few tokens
// on Hopper the GEMM is the skinny kernel (sm90_i8_skinny.cu), whose stream-K partial sums and
// tickets follow the activations in the workspace, and both launches are dependent launches.
// linear(QuantizedActivations): the same GEMM on the caller's codes and meta; the skinny kernel's
// partial sums and tickets then start the workspace.
#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "core/prepared.hpp"
#include "cuda/launch/act_quant.hpp"
#include "cuda/backend/factories.hpp"
#include "cuda/runtime/device_context.hpp"
#include "cuda/backend/common.hpp"
#include "cuda/launch/int8_gemm.hpp"
#include "cuda/launch/sm90_skinny_gemm.hpp"
#include "cuda/dispatch/plan_log.hpp"
#include "cuda/launch/sm90_w8a8_gemm.hpp"

namespace mixq::cuda {

namespace {

using int8b::align256;
using int8b::round_up;

// Quantized activations in the act_quant.hpp layout, as the GEMM reads them.
struct Int8QuantizedActs {
  int64_t M = 0;
  const int8_t* q = nullptr;  // [M][ldq], ldq >= act_row_pitch(K), a multiple of 16
  int64_t ldq = 0;
  const float* scale = nullptr;   // [n_blocks][ld_meta]
  const float* offset = nullptr;
  const int32_t* sums = nullptr;
  int64_t ld_meta = 0;            // >= M, a multiple of 4 (act_meta_pitch)
};

// Rows of activations the internal scratch (no ExecContext::workspace) is sized for.
constexpr int64_t kScratchRows = 4096;

// f32 -> the nearest tf32 value (10 explicit mantissa bits, ties away from zero), as an f32 whose
// low 13 bits are zero; a finite value that would round past the largest one is truncated instead.
float tf32_nearest(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7F800000u) == 0x7F800000u) return v;
  uint32_t r = (u + 0x1000u) & 0xFFFFE000u;
  if ((r & 0x7F800000u) == 0x7F800000u) r = u & 0xFFFFE000u;
  float out;
  std::memcpy(&out, &r, 4);
  return out;
}

class CudaInt8Block final : public PreparedImpl {
 public:
  CudaInt8Block(const QuantizedWeight& w, const PrepareOptions& o) : dev_(o, "cuda int8-block") {
    backend = BackendKind::CUDA;
    opts = o;
    N = w.N;
    K = w.K;
    int8b::DeviceGuard guard(dev_.id);
    // ops.cpp checked: i8 codes, symmetric or offset, block_n 1, no k_perm, act_block == block_k.
    g_ = w.block_k;
    MIXQ_CHECK(g_ == 64 || g_ == 128, ErrorCode::Unsupported, "cuda int8-block: the K block (",
               g_, ") must be 64 or 128 (weight ", w.describe(), ")");
    MIXQ_CHECK(N < (int64_t(1) << 30) && K < (int64_t(1) << 30), ErrorCode::Unsupported,
               "cuda int8-block: N (", N, ") and K (", K, ") must be < 2^30");
    offset_ = w.zero_kind == ZeroKind::Offset;
    nb_ = (K + g_ - 1) / g_;
    Kp_ = nb_ * g_;
    Np_ = round_up(N, kInt8PadN);
    std::vector<int8_t> codes(size_t(Np_ * Kp_), 0);
    std::vector<float> sw(size_t(nb_ * Np_), 0.f), ow(offset_ ? sw.size() : 0, 0.f),
        dw(sw.size(), 0.f);
    // The Hopper kernel's rank-1 planes (on an sm_90a-capable device only).
    const bool rank1 = dev_.caps.sm90a && dev_.caps.cc_major == 9 && dev_.caps.cc_minor == 0;
    r1_ld_ = rank1 ? int8_rank1_pitch(nb_) : 0;
    std::vector<float> r1w(size_t((offset_ ? 4 : 2) * Np_ * r1_ld_), 0.f);
    for (int64_t n = 0; n < N; ++n) {
      std::memcpy(&codes[size_t(n * Kp_)], w.codes.data() + n * w.row_bytes(), size_t(K));
      for (int64_t b = 0; b < nb_; ++b) {
        const int64_t k0 = b * g_, k1 = std::min(K, k0 + g_);
        int64_t qsum = 0;
        for (int64_t k = k0; k < k1; ++k) qsum += codes[size_t(n * Kp_ + k)];
        const float s = float(w.scale(n, b));
        const double off = offset_ ? w.offset(n, b) : 0.0;
        const size_t at = size_t(b * Np_ + int8_meta_col(n));
        sw[at] = s;
        if (offset_) ow[at] = float(off);
        const double d = double(s) * double(qsum) + double(k1 - k0) * off;
        dw[at] = float(d);
        if (rank1) {  // hi / lo planes of dw (term 0) and ow (term 1), column n, K block b
          const double v[2] = {d, off};
          for (int term = 0; term < (offset_ ? 2 : 1); ++term) {
            const float hi = tf32_nearest(float(v[term]));
            r1w[size_t(((2 * term) * Np_ + n) * r1_ld_ + b)] = hi;
            r1w[size_t(((2 * term + 1) * Np_ + n) * r1_ld_ + b)] =
                tf32_nearest(float(v[term] - double(hi)));
          }
        }
      }
    }
    codes_ = dev_.upload(codes.data(), codes.size());
    sw_ = dev_.upload(sw.data(), sw.size() * 4);
    dw_ = dev_.upload(dw.data(), dw.size() * 4);
    if (offset_) ow_ = dev_.upload(ow.data(), ow.size() * 4);
    if (rank1) r1w_ = dev_.upload(r1w.data(), r1w.size() * 4);
    // The skinny kernel's workspace grows with its token tile, not with M: size for each tile.
    size_t scratch = workspace_size(kScratchRows);
    for (int64_t m : {int64_t(16), int64_t(32), int64_t(64), kSm90SkinnyMaxM})
      scratch = std::max(scratch, workspace_size(m));
    scratch_ = dev_.ctx->reserve_scratch(scratch);
    internal_tickets_ = sm90_skinny_tickets(N, dev_.id);  // calls without a caller workspace
    MIXQ_CUDA_CHECK(cudaDeviceSynchronize());  // prepare is not on the hot path
  }

  std::string kernel_name(int64_t M) const override {
    return pick(M).id(int(g_), offset_).name();
  }

  Int8ExpertView expert_view() const {
    Int8ExpertView v;
    v.w.codes = static_cast<const int8_t*>(codes_.data());
    v.w.ldb = Kp_;
    v.w.Np = Np_;
    v.w.sw = static_cast<const float*>(sw_.data());
    v.w.dw = static_cast<const float*>(dw_.data());
    v.w.ow = offset_ ? static_cast<const float*>(ow_.data()) : nullptr;
    v.w.r1w = r1_ld_ > 0 ? static_cast<const float*>(r1w_.data()) : nullptr;
    v.w.r1_ld = r1_ld_;
    v.g = int(g_);
    v.offset = offset_;
    v.device = dev_.id;
    return v;
  }

  // Quantized activations (codes, then scale / offset / sums), 256-byte aligned parts; then the
  // skinny kernel's part (gemm_workspace_size). linear(QuantizedActivations) needs the latter
  // only, at the start of its workspace: linear_workspace_size bounds both calls.
  size_t workspace_size(int64_t M) const override {
    return acts_bytes(M) + gemm_workspace_size(pick(M), M);
  }

  void linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
              const ExecContext& ctx) const override {
    check_call_device(x, y, dev_.id);
    const int64_t M = x.shape[0];
    const Int8GemmKernel k = pick_for_call(M);
    const size_t need = acts_bytes(M) + gemm_workspace_size(k, M);
    char* ws = call_workspace(ctx.workspace, ctx.workspace_bytes, need, *scratch_, M);
    int8b::DeviceGuard guard(dev_.id);
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    // A caller workspace's tickets are zeroed by the quantizer, so that no memset node precedes it
    // and the kernel's dependent launch follows it directly.
    const Sm90SkinnyWork sk = skinny_work(k, M, ws + acts_bytes(M), ctx, stream, true);
    const Int8QuantizedActs a = quantize(x, ws, stream, k.skinny_mt && skinny_pdl(),
                                         ActQuantClear{sk.tickets, sk.n_clear});
    gemm(k, a, &y, nullptr, ep, stream, sk);
  }

  // The caller's codes and meta (validated by ops.cpp, alignment included) straight into the
  // GEMM; the workspace holds the skinny kernel's part only.
  void linear_quantized(const QuantizedActivations& xq, const TensorView& y, const Epilogue& ep,
                        const ExecContext& ctx) const override {
    const int64_t M = xq.q.shape[0];
    const Int8GemmKernel k = pick_for_call(M);
    char* ws = call_workspace(ctx.workspace, ctx.workspace_bytes, gemm_workspace_size(k, M),
                              *scratch_, M);
    int8b::DeviceGuard guard(dev_.id);
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    gemm(k, acts_of(xq), &y, nullptr, ep, stream, skinny_work(k, M, ws, ctx, stream));
  }

  // The Hopper block kernel's 128-wide tiles (sm90_i8_128x128 and its pairs) quantize their
  // outputs (kernels/common/epilogue_quant.cuh); the other kernels' calls take ops.cpp's f32
  // staging.
  bool quantizes_output(int64_t M, ActQuant kind, int64_t block) const override {
    const Family f = pick(M).family;
    if (f != Family::I8Sm90 && f != Family::I8Sm90Pair) return false;
    return kind == ActQuant::Fp8Block || (kind == ActQuant::Int8Block && block <= 128);
  }

  void linear_quantized_output(const TensorView* x, const QuantizedActivations* xq,
                               const QuantizedActivations& yq, const Epilogue& ep,
                               const ExecContext& ctx) const override {
    const int64_t M = x ? x->shape[0] : xq->q.shape[0];
    const Int8GemmKernel k = pick_for_call(M);
    const sm90::QuantOut quant = quant_out_of(yq, N);
    int8b::DeviceGuard guard(dev_.id);
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    Int8QuantizedActs a;
    if (xq != nullptr) {
      a = acts_of(*xq);
    } else {
      char* ws = call_workspace(ctx.workspace, ctx.workspace_bytes, acts_bytes(M), *scratch_, M);
      a = quantize(*x, ws, stream, false, ActQuantClear{});
    }
    gemm(k, a, nullptr, &quant, ep, stream, {});
  }

 private:
  // x quantized into the start of the workspace `ws` (codes, then scale / offset / sums, the
  // parts acts_bytes sizes) on `stream`; pdl and clear as launch_quantize_int8_block takes them.
  Int8QuantizedActs quantize(const TensorView& x, char* ws, cudaStream_t stream, bool pdl,
                             ActQuantClear clear) const {
    const int64_t M = x.shape[0];
    Int8QuantizedActs a;
    a.M = M;
    a.ldq = act_row_pitch(K);
    a.ld_meta = act_meta_pitch(M);
    const size_t meta = align256(size_t(nb_ * a.ld_meta) * 4);
    int8_t* q = reinterpret_cast<int8_t*>(ws);
    char* m = ws + align256(size_t(M * a.ldq));
    float* scale = reinterpret_cast<float*>(m);
    float* offset = reinterpret_cast<float*>(m + meta);
    int32_t* sums = reinterpret_cast<int32_t*>(m + 2 * meta);
    launch_quantize_int8_block(x.data, int8b::type_code(x.dtype), x.ld(), M, K, g_, q, a.ldq,
                               scale, offset, sums, a.ld_meta, stream, pdl,
                               act_quant_tuning(opts.tuning), clear);
    a.q = q;
    a.scale = scale;
    a.offset = offset;
    a.sums = sums;
    return a;
  }
  // The caller's quantized activations (validated by ops.cpp).
  static Int8QuantizedActs acts_of(const QuantizedActivations& xq) {
    Int8QuantizedActs a;
    a.M = xq.q.shape[0];
    a.q = static_cast<const int8_t*>(xq.q.data);
    a.ldq = xq.q.stride[0];
    a.scale = static_cast<const float*>(xq.scale.data);
    a.offset = static_cast<const float*>(xq.offset.data);
    a.sums = static_cast<const int32_t*>(xq.sums.data);
    a.ld_meta = xq.scale.stride[0];
    return a;
  }

  // The GEMM on quantized activations; sk: the skinny kernel's partial sums and tickets.
  // Either y or quant (the Hopper block kernel's quantizing epilogue) receives the output.
  void gemm(const Int8GemmKernel& k, const Int8QuantizedActs& a, const TensorView* y,
            const sm90::QuantOut* quant, const Epilogue& ep, cudaStream_t stream,
            Sm90SkinnyWork sk) const {
    Int8GemmParams p;
    p.mode = Int8Mode::Block;
    p.M = int(a.M);
    p.N = int(N);
    p.K = int(K);
    p.kb = int(g_);
    p.n_kblocks = int(nb_);
    p.a = a.q;
    p.lda = a.ldq;
    p.b = static_cast<const int8_t*>(codes_.data());
    p.ldb = Kp_;
    p.Np = Np_;
    p.sx = a.scale;
    p.ox = a.offset;
    p.sumx = a.sums;
    p.ld_meta = a.ld_meta;
    p.sw = static_cast<const float*>(sw_.data());
    p.ow = offset_ ? static_cast<const float*>(ow_.data()) : nullptr;
    p.dw = static_cast<const float*>(dw_.data());
    p.r1w = r1_ld_ > 0 ? static_cast<const float*>(r1w_.data()) : nullptr;
    p.r1_ld = r1_ld_;
    int8b::set_epilogue(p, ep);
    if (y != nullptr) int8b::set_y(p, *y);
    else p.quant = *quant;
    p.num_sms = dev_.caps.sm_count;
    p.partial = sk.partial;
    p.tickets = sk.tickets;
    p.group_n = opts.tuning.w8a8_group_n;
    p.y_tma = opts.tuning.w8a8_y_tma == Toggle::Off ? 0 : -1;
    p.pdl = skinny_pdl();
    if (log_plans())
      print_plan(quant ? "linear (int8 block, quantized output)" : "linear (int8 block)", a.M,
                 k.id(int(g_), offset_).name());
    k.launch(p, stream);
  }

  // The kernel a call with M rows runs (M checked against a forced skinny kernel's tile).
  Int8GemmKernel pick_for_call(int64_t M) const {
    MIXQ_CHECK(M < INT_MAX / 2, ErrorCode::Unsupported, "cuda int8-block: M (", M,
               ") must be < 2^30");
    const Int8GemmKernel k = pick(M);
    MIXQ_CHECK_ARG(k.skinny_mt == 0 || M <= k.skinny_mt, "cuda int8-block: force_kernel '",
                   k.name(), "' serves M <= ", k.skinny_mt, ", got M = ", M);
    return k;
  }
  // Kernel k's part of the workspace: a skinny kernel's partial sums (and tickets in a caller's
  // workspace); nothing for the others.
  size_t gemm_workspace_size(const Int8GemmKernel& k, int64_t M) const {
    const int mt = k.skinny_mt;
    // (a forced skinny kernel refuses a larger M at the call)
    return mt && M <= mt ? sm90_skinny_workspace_bytes(skinny_plan(M, mt)) : 0;
  }
  // Where kernel k's partial sums and tickets go: `at` in the call's workspace (the caller's,
  // whose tickets are cleared on the stream, or the internal scratch with the weight's own
  // tickets). None for the other kernels.
  Sm90SkinnyWork skinny_work(const Int8GemmKernel& k, int64_t M, char* at, const ExecContext& ctx,
                             cudaStream_t stream, bool quantizer_clears = false) const {
    if (!k.skinny_mt) return {};
    return sm90_skinny_work(at, skinny_plan(M, k.skinny_mt),
                            static_cast<unsigned*>(internal_tickets_.data()),
                            ctx.workspace != nullptr, stream, quantizer_clears);
  }
  Sm90SkinnyPlan skinny_plan(int64_t M, int mt) const {
    return sm90_skinny_plan(M, N, K, dev_.caps.sm_count, mt);
  }
  // The quantized activations' part of the workspace.
  size_t acts_bytes(int64_t M) const {
    const size_t meta = align256(size_t(nb_ * act_meta_pitch(M)) * 4);
    return align256(size_t(M * act_row_pitch(K))) + 3 * meta;
  }
  Int8GemmKernel pick(int64_t M) const {
    return select_int8_gemm(dev_.caps, Int8Mode::Block, int(g_), offset_, M, K,
                            int8b::force_kernel(opts));
  }

  // The few-token kernels (and the quantizer before them) are programmatic dependent launches unless
  // the tuning turns it off.
  bool skinny_pdl() const { return opts.tuning.w8a8_skinny_pdl != Toggle::Off; }

  int8b::Int8Device dev_;
  int64_t g_ = 128, nb_ = 0, Kp_ = 0, Np_ = 0, r1_ld_ = 0;
  bool offset_ = false;
  DeviceBuffer codes_, sw_, ow_, dw_, r1w_, internal_tickets_;
  std::shared_ptr<DeviceBuffer> scratch_;
};

}  // namespace

bool int8_block_expert_view(const PreparedImpl& impl, Int8ExpertView& view) {
  const auto* w = dynamic_cast<const CudaInt8Block*>(&impl);
  if (w == nullptr) return false;
  view = w->expert_view();
  return true;
}

std::shared_ptr<const PreparedImpl> prepare_int8_block(const QuantizedWeight& w,
                                                       const PrepareOptions& opts) {
  return std::make_shared<CudaInt8Block>(w, opts);
}

}  // namespace mixq::cuda
