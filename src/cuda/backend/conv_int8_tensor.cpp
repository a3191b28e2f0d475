// The CUDA INT8 per-tensor conv2d (quantized CNN inference): x i8 with input quant (S_I, Z_I), the
// weight i8 symmetric per output channel, y i8 requantized with (S_O, Z_O) or f32 real values.
// prepare() repacks the codes and precomputes, per output channel, the code sum (for the Z_I term)
// and S_I * S_W[n] in double. conv2d() enqueues one of two implicit GEMMs, whose outputs equal the
// reference's (ref::conv2d_int8_requant) exactly:
// - NHWC input with Ci a multiple of 16 (16-byte runs of channels): the INT8 GEMM's pipelined
//   kernels with A gathered from the image (launch_conv_int8_gemm; codes [Np][Kp], KhKwCi order);
// - otherwise (NCHW, other Ci): kernels/conv/sm80_conv_igemm_i8.cuh (codes [Co][tap][Cip]).
// When Ci is a multiple of 32 the two layouts are one buffer (the GEMM's rows, pitch Kp).
// On Hopper an NCHW call that the wgmma kernel would take in NHWC runs it on NHWC copies of x and
// y, as the weight-only conv does (docs/decisions/conv-nchw-through-nhwc.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/prepared.hpp"
#include "cuda/backend/common.hpp"
#include "cuda/backend/conv_call_geometry.hpp"
#include "cuda/backend/conv_nchw_copies.hpp"
#include "cuda/backend/conv_stem_image.hpp"
#include "cuda/backend/factories.hpp"
#include "cuda/dispatch/conv_int8_tile.hpp"
#include "cuda/dispatch/force_kernel.hpp"
#include "cuda/kernels/common/int8_params.hpp"
#include "cuda/launch/conv_kernels.hpp"
#include "cuda/launch/sm90_w8a8_gemm.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/device_context.hpp"
#include "cuda/runtime/tensor_map.hpp"
#include "mixq/error.hpp"

namespace mixq {

namespace {

class CudaConvInt8Tensor final : public PreparedImpl {
 public:
  CudaConvInt8Tensor(const QuantizedWeight& w, const ConvGeometry& g, const PrepareOptions& o)
      : dev_(o, "cuda conv2d int8-per-tensor") {
    backend = BackendKind::CUDA;
    opts = o;
    N = w.N;
    K = w.K;
    conv = g;
    cuda::DeviceGuard guard(dev_.id);
    // ops.cpp has checked the scheme (i8 symmetric per output channel) and the quant parameters
    MIXQ_CHECK(K <= cuda::kInt8TensorMaxK, ErrorCode::Unsupported, "prepare (cuda conv2d "
               "int8-per-tensor): K = Ci*Kh*Kw (", K, ") must be <= ", cuda::kInt8TensorMaxK,
               " (exact int32 accumulation)");
    MIXQ_CHECK(g.Ci < (int64_t(1) << 24) && N < (int64_t(1) << 24), ErrorCode::Unsupported,
               "prepare (cuda conv2d int8-per-tensor): Ci (", g.Ci, ") and Co (", N,
               ") must be < 2^24");
    taps_ = g.Kh * g.Kw;
    Cip_ = cuda::round_up(g.Ci, cuda::kConvBK);
    // the GEMM form: k = tap * Ci + ci, rows padded to the GEMM's N tile, K to its K block
    gemm_ = g.Ci % 16 == 0;
    Kp_ = cuda::round_up(taps_ * g.Ci, cuda::kInt8TensorBlockK);
    Np_ = cuda::round_up(N, cuda::kInt8PadN);
    // one buffer for both kernels where their layouts agree (Cip = Ci)
    shared_codes_ = gemm_ && Cip_ == g.Ci;
    row_bytes_ = shared_codes_ ? Kp_ : taps_ * Cip_;
    // Hopper (sm_90a): the wgmma s8 kernel with an im2col A map where a 128-K stage is 128
    // channels of one tap: Ci a multiple of 128, or (Ci >= 32, 16-byte pixels) each tap's
    // channels padded to ck_ = Ci rounded up to 128 (zero codes; the map reads x past Ci as
    // zeros, so the padding adds nothing and the code sums stay the real ones); at most 64 taps
    // (the epilogue's border masks)
    ck_ = g.Ci % 128 == 0                ? g.Ci
          : g.Ci % 16 == 0 && g.Ci >= 32 ? cuda::round_up(g.Ci, int64_t(128))
                                         : 0;
    hopper_ = dev_.caps.cc_major == 9 && dev_.caps.cc_minor == 0 && dev_.caps.sm90a && ck_ > 0 &&
              taps_ <= 64;
    force_ = cuda::forced_kernel(o, {"sm80_i8", "sm80_conv", "sm90_i8", "sm90_conv"});
    MIXQ_CHECK_ARG(
        force_.empty() || force_ == kDirectName || tile_of(force_) >= 0 || is_stem_name(force_),
        "prepare (cuda conv2d int8-per-tensor): force_kernel '", force_, "' is not one of ",
        kDirectName, tile_list(), ", ", cuda::conv_stem_i8_name(false), ", ",
        cuda::conv_stem_i8_name(true));
    // Few input channels (an RGB stem): the 16-bit stem kernel on an f16 copy of x less Z_I with
    // the INT8 epilogue, exact (conv_stem.hpp, ConvStemParams::requant): Ci <= 4, more than one
    // tap, the padded K within the kernel's tables (Z_I is in [-128, 127]: ops.cpp)
    static_assert(cuda::kStemInt8MaxZero >= 128, "every int8 zero point");
    stem_ = taps_ > 1 && g.Ci <= cuda::kStemMaxCi &&
            cuda::conv_stem_kpad(int(g.Ci), int(g.Kh), int(g.Kw)) <= cuda::kStemMaxK;
    MIXQ_CHECK_ARG(!is_stem_name(force_) || stem_,
                   "prepare (cuda conv2d int8-per-tensor): force_kernel ", force_,
                   " needs Ci <= ", cuda::kStemMaxCi, " (got ", g.Ci, "), more than one tap (",
                   g.Kh, "x", g.Kw, ") and Kh * round_up(Kw * Ci, 2) <= ", cuda::kStemMaxK);
    MIXQ_CHECK(force_ != cuda::conv_stem_i8_name(true) || dev_.caps.sm90a, ErrorCode::Unsupported,
               "prepare (cuda conv2d int8-per-tensor): force_kernel ", force_,
               " needs an sm_90 device (TMA), device ", dev_.id, " is ", dev_.caps.cc_major, ".",
               dev_.caps.cc_minor);
    stem_ = stem_ && (force_.empty() || is_stem_name(force_));
    stem_tma_ = dev_.caps.sm90a && force_ != cuda::conv_stem_i8_name(false);
    MIXQ_CHECK_ARG(force_.empty() || force_ == kDirectName || is_stem_name(force_) || gemm_,
                   "prepare (cuda conv2d int8-per-tensor): force_kernel '", force_, "' needs Ci (",
                   g.Ci, ") a multiple of 16");
    MIXQ_CHECK(!is_hopper(tile_of(force_)) || hopper_, ErrorCode::Unsupported,
               "prepare (cuda conv2d int8-per-tensor): force_kernel '", force_,
               "' needs a compute capability 9.0 device with the sm_90a build, Ci (", g.Ci,
               ") a multiple of 128 or one of 16 from 32 on, and at most 64 taps (", taps_, ")");
    std::vector<int8_t> codes(size_t((shared_codes_ ? Np_ : N) * row_bytes_), 0);
    std::vector<int8_t> gemm_codes(gemm_ && !shared_codes_ ? size_t(Np_ * Kp_) : 0, 0);
    std::vector<int32_t> wsum(size_t(N), 0), wsum_tap(hopper_ ? size_t(N * taps_) : 0, 0);
    // the Hopper kernel's own codes where its taps are padded: [Np][taps ck_], k = tap ck_ + ci
    std::vector<int8_t> padded_codes(hopper_ && ck_ != g.Ci ? size_t(Np_ * taps_ * ck_) : 0, 0);
    std::vector<double> wscale(size_t(N), 0.0);
    for (int64_t n = 0; n < N; ++n) {
      int32_t s = 0;
      for (int64_t tap = 0; tap < taps_; ++tap)
        for (int64_t ci = 0; ci < g.Ci; ++ci) {
          const int64_t k = g.order == ConvKOrder::KhKwCi ? tap * g.Ci + ci : ci * taps_ + tap;
          const int32_t q = w.code_int(n, k);
          codes[size_t(n * row_bytes_ + tap * Cip_ + ci)] = int8_t(q);
          if (!gemm_codes.empty()) gemm_codes[size_t(n * Kp_ + tap * g.Ci + ci)] = int8_t(q);
          if (!padded_codes.empty()) padded_codes[size_t((n * taps_ + tap) * ck_ + ci)] = int8_t(q);
          if (hopper_) wsum_tap[size_t(n * taps_ + tap)] += q;
          s += q;
        }
      wsum[size_t(n)] = s;
      wscale[size_t(n)] = double(o.input_quant.scale) * double(w.scale(n, 0));
    }
    if (stem_) {  // the codes themselves, in the stem's K order (exact in f16)
      const std::vector<uint16_t> img = cuda::build_stem_image(
          N, int(g.Ci), int(g.Kh), int(g.Kw),
          [&](int64_t n, int kh, int j) {
            const int64_t tap = kh * g.Kw + j / g.Ci, ci = j % g.Ci;
            return float(
                w.code_int(n, g.order == ConvKOrder::KhKwCi ? tap * g.Ci + ci : ci * taps_ + tap));
          },
          &stem_shape_);
      stem_image_ = dev_.upload(img.data(), img.size() * 2);
    }
    codes_ = dev_.upload(codes.data(), codes.size());
    if (!gemm_codes.empty()) gemm_codes_ = dev_.upload(gemm_codes.data(), gemm_codes.size());
    if (!padded_codes.empty())
      padded_codes_ = dev_.upload(padded_codes.data(), padded_codes.size());
    wsum_ = dev_.upload(wsum.data(), wsum.size() * 4);
    if (hopper_) wsum_tap_ = dev_.upload(wsum_tap.data(), wsum_tap.size() * 4);
    wscale_ = dev_.upload(wscale.data(), wscale.size() * 8);
    sm_count_ = std::max(dev_.caps.sm_count, 1);
    // the NCHW copies of calls without a workspace (nchw_copies), from the device's shared scratch
    if (hopper_ || stem_) scratch_ = dev_.ctx->reserve_scratch(kCopiesScratchBytes);
    MIXQ_CUDA_CHECK(cudaDeviceSynchronize());  // prepare is not on the hot path
  }

  // what an NHWC call (16-byte aligned x) runs
  std::string kernel_name(int64_t M) const override {
    if (stem_) return cuda::conv_stem_i8_name(stem_tma_);
    const int t = gemm_ ? tile_for(M) : kDirect;
    return t == kDirect ? kDirectName : std::string("im2col ") + kTileNames[t];
  }

  // The stem's f16 copy of x (all the call's images); else no workspace, except for the NCHW
  // copies of a call that runs the Hopper kernel on them (y counted at 4 bytes an element: y's
  // dtype is not an argument).
  size_t conv_workspace_size(const TensorView& x, const Conv2dParams& p, int64_t) const override {
    const cuda::ConvCallGeometry g = cuda::conv_call_geometry(x, *conv, p);
    if (stem_) return stem_copy_bytes(g, g.B);
    if (p.layout != Layout::NCHW) return 0;
    return copies_tile(g, p) == kDirect ? 0 : nchw_copies(g, 4).total;
  }

  void linear(const TensorView&, const TensorView&, const Epilogue&,
              const ExecContext&) const override {
    MIXQ_FAIL(ErrorCode::InvalidArgument, "linear: the prepared weight is a convolution weight; "
              "call conv2d");
  }

  void conv2d(const TensorView& x, const TensorView& y, const Conv2dParams& p, const Epilogue& ep,
              const ExecContext& ctx) const override {
    MIXQ_CHECK_ARG(x.device_index == dev_.id && y.device_index == dev_.id, "conv2d: x (device ",
                   x.device_index, ") and y (device ", y.device_index,
                   ") must be on the prepared weight's device ", dev_.id);
    if (!ep.bias.empty())
      MIXQ_CHECK_ARG(ep.bias.device_index == dev_.id, "conv2d: bias (device ",
                     ep.bias.device_index, ") must be on the prepared weight's device ", dev_.id);
    for (const auto& [v, arg] : {std::pair<const TensorView*, const char*>{&y, "y"},
                                 std::pair<const TensorView*, const char*>{&ep.bias, "bias"}}) {
      if (v->empty()) continue;
      const int eb = int(dtype_bytes(v->dtype, 1));
      MIXQ_CHECK_ARG(reinterpret_cast<uintptr_t>(v->data) % uintptr_t(eb) == 0, "conv2d (cuda): ",
                     arg, " (at ", v->data, ", ", v->describe(), ") must be aligned to its ", eb,
                     "-byte element size");
    }
    const cuda::ConvCallGeometry g = cuda::conv_call_geometry(x, *conv, p);
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    if (run_stem(g, p, x, y, ep, ctx)) return;
    if (g.nchw && run_nchw_through_copies(g, p, x, y, ep, ctx)) return;
    if (gemm_ && !g.nchw && reinterpret_cast<uintptr_t>(x.data) % 16 == 0) {
      cuda::Im2colConv shape{};
      cuda::set_conv_shape(shape, g, *conv, p);
      if (const int t = tile_for(g.B * g.Ho * g.Wo, cuda::im2col_map_fits(shape, 1)); t != kDirect) {
        launch_gemm(x, y, g, p, ep, t, stream);
        return;
      }
    }
    cuda::ConvI8Params k{};
    k.x = static_cast<const int8_t*>(x.data);
    cuda::set_conv_geometry(k, g, *conv, N, p);
    k.vec_x = !g.nchw && conv->Ci % 16 == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
    k.codes = static_cast<const int8_t*>(codes_.data());
    k.Cip = int(Cip_);
    k.row_bytes = row_bytes_;
    k.wsum = static_cast<const int32_t*>(wsum_.data());
    k.wscale = static_cast<const double*>(wscale_.data());
    k.in_zero = opts.input_quant.zero;
    k.out_scale = double(opts.output_quant.scale);
    k.out_zero = opts.output_quant.zero;
    k.y = y.data;
    k.y_i8 = y.dtype == DType::I8;
    k.bias = ep.bias.empty() ? nullptr : ep.bias.data;
    k.bias_type = ep.bias.empty() ? cuda::IoType::F32
                                  : cuda::IoType(cuda::float_type_code(ep.bias.dtype, "cuda conv2d bias"));
    k.clamp_lo = ep.clamp_lo;
    k.clamp_hi = ep.clamp_hi;
    cuda::DeviceGuard guard(dev_.id);
    cuda::launch_conv_igemm_i8(k, stream);
  }

 private:
  static constexpr const char* kDirectName = "sm80_conv_igemm_64x64_i8";
  static constexpr const char* kTileNames[9] = {
      "sm80_i8_16x32",     "sm80_i8_64x64",     "sm80_i8_128x128",
      "sm80_i8_64x64_s3",  "sm90_i8_128x128",   "sm90_i8_128x64",
      "sm90_i8_128x64_k2", "sm90_i8_128x64_k4", "sm90_i8_128x64_k8"};
  // The Hopper tiles: 128 x 128, 128 x 64, and 128 x 64 with each tile's K blocks split over a
  // cluster of 2, 4 or 8 CTAs.
  static constexpr int kDirect = -1, kHopperTile = 4, kHopperTile64 = 5, kHopperSplit2 = 6,
                       kHopperSplit8 = 8;
  static bool is_hopper(int t) { return t >= kHopperTile && t <= kHopperSplit8; }
  static int split_of(int t) { return t >= kHopperSplit2 ? 2 << (t - kHopperSplit2) : 1; }

  static constexpr int kTiles = int(std::size(kTileNames));
  static int tile_of(const std::string& name) {
    for (int t = 0; t < kTiles; ++t)
      if (name == kTileNames[t]) return t;
    return kDirect;
  }
  static std::string tile_list() {  // ", name" for every tile
    std::string s;
    for (const char* name : kTileNames) s += std::string(", ") + name;
    return s;
  }

  // The kernel for M output pixels (NHWC, Ci a multiple of 16): a GEMM tile (launch_conv_int8_gemm)
  // from the measured rule (docs/cuda-conv.md, "The INT8 per-tensor kernels"): the 3-stage 64 x 64
  // tile where its tiles give at least every second SM one (4 CTAs per SM hide the short K
  // loops' pipeline fill and the double-precision epilogue better than the deeper pipelines, the
  // 128 x 128 tile or the direct kernel), else 16 x 32 (few pixels, deep layers: the K loop over
  // many small CTAs). The others are reached by force_kernel.
  // Hopper: the wgmma kernel wherever the weight and the call's geometry allow it (map_fits: the
  // im2col map's ranges), its tile from hopper_tile(). Every kernel forced on the ResNet-50
  // layers with Ci a multiple of 128 at batch 1, 8, 32 (H200, bench/results/cuda_conv.md): with
  // the looped epilogue and the 128 x 64 tile the wgmma kernel was the fastest on all 15 (at
  // batch 1 11.5-23.0 us against 12.5-32.0 for the best sm_80 tile).
  // With its taps padded (Ci not a multiple of 128) the wgmma kernel runs where the sm_80 rule
  // would take the 64 x 64 tile (calls small enough for the 16 x 32 tile keep it) and, with more
  // than half of each tap padding (Ci < 64), from four rounds of 128-pixel tiles over the SMs on
  // (H100, every kernel forced, bench/results/cuda_conv.md "Padded taps": 3x3 64->64 @80 batch 1
  // 14.5 -> 11.9 us, 3x3/2 32->64 @320 batch 8 / 32 84.4 -> 82.4 / 317.7 -> 282.5; at batch 1
  // (1.5 rounds) that layer's 64 x 64 tile is faster, 16.1 against 18.2).
  int tile_for(int64_t M, bool map_fits = true) const {
    if (force_ == kDirectName) return kDirect;
    if (const int t = tile_of(force_); t != kDirect && (!is_hopper(t) || map_fits)) return t;
    const int64_t tiles64 = ((M + 63) / 64) * ((N + 63) / 64);
    const bool many = 2 * tiles64 >= sm_count_;
    const bool padded_pays =
        ck_ == conv->Ci || (2 * conv->Ci >= ck_ ? many : (M + 127) / 128 >= 4 * sm_count_);
    if (hopper_ && map_fits && force_.empty() && padded_pays) return hopper_tile(M);
    return many ? 3 : 0;
  }

  // The Hopper kernel's tile and K split (dispatch/conv_int8_tile.hpp) as a tile index.
  int hopper_tile(int64_t M) const {
    const cuda::ConvInt8HopperTile t =
        cuda::conv_int8_hopper_tile(M, N, taps_ * ck_ / 128, sm_count_);
    if (t.k_split > 1) return kHopperSplit2 + (t.k_split >> 2);  // 2, 4, 8 -> _k2, _k4, _k8
    return t.tile_n == 64 ? kHopperTile64 : kHopperTile;
  }

  static bool is_stem_name(const std::string& name) {
    return name == cuda::conv_stem_i8_name(false) || name == cuda::conv_stem_i8_name(true);
  }

  // ---- The stem (few input channels) on an f16 copy of x
  // bytes of the f16 NHWC copy of `images` images
  size_t stem_copy_bytes(const cuda::ConvCallGeometry& g, int64_t images) const {
    return size_t((images * g.H * g.W * conv->Ci * 2 + 255) / 256 * 256);
  }
  // The stem's plan for `images` images of the call, reading x's copy at xc and writing y at yd.
  bool stem_plan(const cuda::ConvCallGeometry& g, const Conv2dParams& p, int64_t images,
                 const void* xc, void* yd, const TensorView& y, const Epilogue& ep,
                 cuda::ConvStemParams* s) const {
    cuda::ConvCallGeometry gc = g;
    gc.B = images;
    gc.nchw = false;  // the copy
    cuda::ConvIgemmParams k{};
    cuda::set_conv_geometry(k, gc, *conv, N, p);
    k.x = xc;
    k.x_type = cuda::IoType::F16;
    k.packed = true;
    k.y = yd;
    k.bias = ep.bias.empty() ? nullptr : ep.bias.data;
    k.bias_type = ep.bias.empty()
                      ? cuda::IoType::F32
                      : cuda::IoType(cuda::float_type_code(ep.bias.dtype, "cuda conv2d bias"));
    k.clamp_lo = ep.clamp_lo;
    k.clamp_hi = ep.clamp_hi;
    // the TMA form reads the copy (256-byte aligned) as [B][H][W * Ci] with 16-byte rows
    const bool tma = stem_tma_ && p.dilation_h == 1 && (g.W * conv->Ci * 2) % 16 == 0;
    if (!cuda::conv_stem_plan(k, true, sm_count_, dev_.caps.smem_per_block_optin, s, tma, 1))
      return false;
    if (force_ == cuda::conv_stem_i8_name(true) && !s->tma) return false;
    s->w_image = stem_shape_.at(stem_image_.data(), s->sigma, false);
    s->img_pitch = stem_shape_.pitch;
    s->requant = true;
    s->y_nchw = g.nchw;
    s->y_i8 = y.dtype == DType::I8;
    s->wscale = static_cast<const double*>(wscale_.data());
    s->out_scale = double(opts.output_quant.scale);
    s->out_zero = opts.output_quant.zero;
    return true;
  }
  // The stem's call: per batch of images that the copy's memory holds (the caller's workspace,
  // conv2d_workspace_size bytes: all of them; else the device's reserved scratch), x's images
  // into the f16 copy less Z_I, then the stem kernel on them. Returns false, having enqueued
  // nothing, where the stem does not take the call (dilation along W, a forced TMA form the call
  // does not admit) or no memory holds one image's copy; the direct kernel then runs it.
  bool run_stem(const cuda::ConvCallGeometry& g, const Conv2dParams& p, const TensorView& x,
                const TensorView& y, const Epilogue& ep, const ExecContext& ctx) const {
    if (!stem_) return false;
    // all the images at once where the memory holds them (the NCHW copies' rule), else, without a
    // workspace, as many a round as the scratch holds
    char* base = cuda::nchw_copies_base(ctx, scratch_.get(), stem_copy_bytes(g, g.B));
    int64_t per_round = base ? g.B : 0;
    if (!base && !ctx.workspace && scratch_) {
      base = static_cast<char*>(scratch_->data());
      per_round = std::min<int64_t>(g.B, int64_t(scratch_->size() / stem_copy_bytes(g, 1)));
    }
    cuda::ConvStemParams s{};
    if (per_round < 1 || !stem_plan(g, p, per_round, base, y.data, y, ep, &s)) {
      const size_t room = ctx.workspace ? ctx.workspace_bytes : scratch_ ? scratch_->size() : 0;
      MIXQ_CHECK_ARG(!is_stem_name(force_), "conv2d (cuda int8-per-tensor): force_kernel ", force_,
                     " cannot run this call (dilation ", p.dilation_h, "x", p.dilation_w, ", W ",
                     g.W, ", Ci ", conv->Ci, ", the f16 copy of x ", stem_copy_bytes(g, 1),
                     " bytes an image, ", ctx.workspace ? "the workspace " : "the scratch ", room,
                     " bytes)");
      return false;
    }
    cuda::DeviceGuard guard(dev_.id);
    const auto stream = static_cast<cudaStream_t>(ctx.stream);
    const int64_t x_image = g.H * g.W * conv->Ci;                                // bytes
    const int64_t y_image = N * g.Ho * g.Wo * int64_t(dtype_bytes(y.dtype, 1));  // bytes
    for (int64_t b0 = 0; b0 < g.B; b0 += per_round) {
      const int64_t nb = std::min(per_round, g.B - b0);
      char* yd = static_cast<char*>(y.data) + b0 * y_image;
      if (nb != per_round)
        MIXQ_CHECK(stem_plan(g, p, nb, base, yd, y, ep, &s), ErrorCode::Internal,
                   "conv2d (cuda int8-per-tensor): no stem plan for the last images");
      s.g.y = yd;
      cuda::launch_conv_stem_i8_input(static_cast<const int8_t*>(x.data) + b0 * x_image, base, nb,
                                      int(conv->Ci), g.H * g.W, g.nchw, opts.input_quant.zero,
                                      sm_count_, stream);
      cuda::launch_conv_stem(s, sm_count_, stream);
    }
    return true;
  }

  // ---- NCHW on Hopper through NHWC copies
  static constexpr size_t kCopiesScratchBytes = size_t(16) << 20;
  // x's NHWC copy (int8), then y's (y_elem_bytes an element); the GEMM needs no workspace
  cuda::NchwCopies nchw_copies(const cuda::ConvCallGeometry& g, size_t y_elem_bytes) const {
    return cuda::nchw_copies_layout(0, size_t(g.B * g.H * g.W * conv->Ci),
                                    size_t(g.B * g.Ho * g.Wo * N) * y_elem_bytes);
  }
  // The Hopper tile an NCHW call runs on NHWC copies, or kDirect: the tile its NHWC form would
  // run (tile_for on the NHWC geometry) where that is the wgmma kernel. A forced sm_80 tile or the
  // direct kernel keeps NCHW calls on the direct kernel, as before.
  int copies_tile(const cuda::ConvCallGeometry& g, const Conv2dParams& p) const {
    if (!hopper_ || !g.nchw) return kDirect;
    cuda::ConvCallGeometry gn = g;
    gn.nchw = false;
    cuda::Im2colConv shape{};
    cuda::set_conv_shape(shape, gn, *conv, p);
    const int t = tile_for(g.B * g.Ho * g.Wo, cuda::im2col_map_fits(shape, 1));
    return is_hopper(t) ? t : kDirect;
  }
  // x [B][Ci][H W] into an NHWC copy, the Hopper kernel into an NHWC copy of y (its epilogue
  // requantizes per output channel as in any layout), that copy into y [B][Co][Ho Wo]; all on the
  // call's stream, both transposes with programmatic dependent launch. The copies go into the
  // caller's workspace (at least conv2d_workspace_size bytes, 16-byte aligned: the im2col map
  // reads x's copy) or, without one, into the device's reserved scratch (such calls must not run
  // concurrently: include/mixq/ops.hpp). Returns false, having enqueued nothing, where the call
  // does not take the Hopper kernel or the copies have no room; the direct kernel then runs it.
  bool run_nchw_through_copies(const cuda::ConvCallGeometry& g, const Conv2dParams& p,
                               const TensorView& x, const TensorView& y, const Epilogue& ep,
                               const ExecContext& ctx) const {
    const int tile = copies_tile(g, p);
    if (tile == kDirect) return false;
    const size_t y_bytes = dtype_bytes(y.dtype, 1);
    const cuda::NchwCopies at = nchw_copies(g, y_bytes);
    char* const base = cuda::nchw_copies_base(ctx, scratch_.get(), at.total);
    if (!base) return false;
    cuda::ConvCallGeometry gn = g;
    gn.nchw = false;
    const TensorView xc(base + at.x_at, x.dtype, {g.B, g.H, g.W, conv->Ci}, Device::CUDA, dev_.id);
    const TensorView yc(base + at.y_at, y.dtype, {g.B, g.Ho, g.Wo, N}, Device::CUDA, dev_.id);
    cuda::DeviceGuard guard(dev_.id);
    const auto stream = static_cast<cudaStream_t>(ctx.stream);
    const bool pdl = opts.tuning.conv_copies_pdl != Toggle::Off;
    cuda::launch_image_transpose(x.data, xc.data, 1, g.B, conv->Ci, g.H * g.W, stream, pdl);
    launch_gemm(xc, yc, gn, p, ep, tile, stream);
    cuda::launch_image_transpose(yc.data, y.data, int(y_bytes), g.B, g.Ho * g.Wo, N, stream, pdl);
    return true;
  }

  void launch_gemm(const TensorView& x, const TensorView& y, const cuda::ConvCallGeometry& g,
                   const Conv2dParams& cp, const Epilogue& ep, int tile, cudaStream_t stream) const {
    cuda::Int8GemmParams p;
    p.mode = cuda::Int8Mode::Tensor;
    cuda::set_conv_shape(p.conv, g, *conv, cp);
    p.M = int(g.B * g.Ho * g.Wo);
    p.N = int(N);
    p.K = int(taps_ * conv->Ci);
    p.kb = int(cuda::kInt8TensorBlockK);
    p.n_kblocks = int(Kp_ / cuda::kInt8TensorBlockK);
    p.a = static_cast<const int8_t*>(x.data);
    p.b = static_cast<const int8_t*>(shared_codes_ ? codes_.data() : gemm_codes_.data());
    p.ldb = Kp_;
    p.Np = Np_;
    p.wsum = static_cast<const int32_t*>(wsum_.data());
    p.wscale = static_cast<const double*>(wscale_.data());
    p.in_zero = opts.input_quant.zero;
    p.out_scale = double(opts.output_quant.scale);
    p.out_zero = opts.output_quant.zero;
    p.y = y.data;
    p.ldy = N;  // NHWC: output pixel m's Co channels are a row
    p.y_type = y.dtype == DType::I8 ? 3 : 2;
    p.bias = ep.bias.empty() ? nullptr : ep.bias.data;
    p.bias_type = ep.bias.empty() ? 2 : cuda::int8b::type_code(ep.bias.dtype);
    p.clamp_lo = ep.clamp_lo;
    p.clamp_hi = ep.clamp_hi;
    cuda::DeviceGuard guard(dev_.id);
    if (is_hopper(tile)) {
      p.conv.Ck = int(ck_);
      if (ck_ != conv->Ci) {  // the padded taps' codes
        p.K = int(taps_ * ck_);
        p.n_kblocks = int(taps_ * ck_ / 128);
        p.b = static_cast<const int8_t*>(padded_codes_.data());
        p.ldb = taps_ * ck_;
      }
      p.conv_on = 1;
      p.tile_n = tile == kHopperTile ? 128 : 64;
      p.k_split = split_of(tile);
      while (p.k_split > p.n_kblocks) p.k_split /= 2;  // a forced split of a short K: fewer CTAs
      p.wsum_tap = static_cast<const int32_t*>(wsum_tap_.data());
      p.num_sms = sm_count_;
      cuda::launch_sm90_int8_block(p, stream);
      return;
    }
    cuda::launch_conv_int8_gemm(p, tile, stream);
  }

  cuda::int8b::Int8Device dev_;
  int64_t taps_ = 1, Cip_ = 0, row_bytes_ = 0, Kp_ = 0, Np_ = 0;
  int64_t ck_ = 0;  // the Hopper kernel's columns per tap (Ci, or Ci padded to 128), 0: none
  bool gemm_ = false, shared_codes_ = false, hopper_ = false;
  bool stem_ = false;      // the stem kernel serves calls (few input channels)
  bool stem_tma_ = false;  // ... in its TMA form where the call admits it (sm_90, not forced off)
  cuda::StemImageShape stem_shape_;
  DeviceBuffer stem_image_;  // the stem kernel's weight image: the codes as f16
  int sm_count_ = 1;
  std::string force_;
  DeviceBuffer codes_, gemm_codes_, padded_codes_, wsum_, wsum_tap_, wscale_;
  std::shared_ptr<DeviceBuffer> scratch_;  // the device's shared scratch (Hopper: NCHW copies)
};

}  // namespace

namespace cuda {
std::shared_ptr<const PreparedImpl> prepare_conv_int8_tensor(const QuantizedWeight& w,
                                                             const ConvGeometry& g,
                                                             const PrepareOptions& opts) {
  return std::make_shared<CudaConvInt8Tensor>(w, g, opts);
}
}  // namespace cuda

}  // namespace mixq
