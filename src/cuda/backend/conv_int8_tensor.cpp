// The CUDA INT8 per-tensor conv2d (quantized CNN inference): x i8 with input quant (S_I, Z_I), the
// weight i8 symmetric per output channel, y i8 requantized with (S_O, Z_O) or f32 real values.
// prepare() repacks the codes to [Co][tap][Ci] (either K order) and precomputes, per output
// channel, the code sum (for the Z_I term) and S_I * S_W[n] in double; conv2d() enqueues the
// implicit GEMM (kernels/conv/sm80_conv_igemm_i8.cuh), whose outputs equal the reference's
// (ref::conv2d_int8_requant) exactly.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/prepared.hpp"
#include "cuda/backend/common.hpp"
#include "cuda/backend/conv_call_geometry.hpp"
#include "cuda/backend/factories.hpp"
#include "cuda/kernels/common/int8_params.hpp"
#include "cuda/launch/conv_kernels.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/device_context.hpp"
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
    row_bytes_ = taps_ * Cip_;
    std::vector<int8_t> codes(size_t(N * row_bytes_), 0);
    std::vector<int32_t> wsum(size_t(N), 0);
    std::vector<double> wscale(size_t(N), 0.0);
    for (int64_t n = 0; n < N; ++n) {
      int32_t s = 0;
      for (int64_t tap = 0; tap < taps_; ++tap)
        for (int64_t ci = 0; ci < g.Ci; ++ci) {
          const int64_t k = g.order == ConvKOrder::KhKwCi ? tap * g.Ci + ci : ci * taps_ + tap;
          const int32_t q = w.code_int(n, k);
          codes[size_t(n * row_bytes_ + tap * Cip_ + ci)] = int8_t(q);
          s += q;
        }
      wsum[size_t(n)] = s;
      wscale[size_t(n)] = double(o.input_quant.scale) * double(w.scale(n, 0));
    }
    codes_ = dev_.upload(codes.data(), codes.size());
    wsum_ = dev_.upload(wsum.data(), wsum.size() * 4);
    wscale_ = dev_.upload(wscale.data(), wscale.size() * 8);
    MIXQ_CUDA_CHECK(cudaDeviceSynchronize());  // prepare is not on the hot path
  }

  std::string kernel_name(int64_t) const override { return "sm80_conv_igemm_64x64_i8"; }

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
    cuda::launch_conv_igemm_i8(k, static_cast<cudaStream_t>(ctx.stream));
  }

 private:
  cuda::int8b::Int8Device dev_;
  int64_t taps_ = 1, Cip_ = 0, row_bytes_ = 0;
  DeviceBuffer codes_, wsum_, wscale_;
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
