// CUDA prepared weight for ActQuant::Int8PerTensor (quantized CNN inference, mission.md §2):
// x i8 [M][K] (input quant S_I, Z_I), weights i8 symmetric per output channel, output i8
// requantized with (S_O, Z_O) or f32 real values.
//
// The GEMM accumulates Σ xq*wq over all of K in int32 on the tensor cores and subtracts Z_I*Σqw
// (precomputed per channel); the epilogue then evaluates, per element and in double, exactly the
// reference's real = clamp((S_I*S_W[n])*acc + bias), y = clamp(nearbyint(real/S_O) + Z_O) — the
// same value as O_q = M*(Acc32 + FusedBias), but computed in the reference's order so that the
// codes match it exactly rather than within one code.
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

namespace mixq::cuda {

namespace {

using int8b::align256;
using int8b::round_up;

constexpr int64_t kScratchRows = 4096;

class CudaInt8Tensor final : public PreparedImpl {
 public:
  CudaInt8Tensor(const QuantizedWeight& w, const PrepareOptions& o)
      : dev_(o, "cuda int8-per-tensor") {
    backend = BackendKind::CUDA;
    opts = o;
    N = w.N;
    K = w.K;
    int8b::DeviceGuard guard(dev_.id);
    MIXQ_CHECK(K <= kInt8TensorMaxK, ErrorCode::Unsupported, "cuda int8-per-tensor: K (", K,
               ") must be <= ", kInt8TensorMaxK, " (exact int32 accumulation)");
    MIXQ_CHECK(N < (int64_t(1) << 30), ErrorCode::Unsupported, "cuda int8-per-tensor: N (", N,
               ") must be < 2^30");
    nb_ = (K + kInt8TensorBlockK - 1) / kInt8TensorBlockK;
    Kp_ = nb_ * kInt8TensorBlockK;
    Np_ = round_up(N, kInt8PadN);
    std::vector<int8_t> codes(size_t(Np_ * Kp_), 0);
    std::vector<int32_t> wsum(size_t(Np_), 0);
    std::vector<double> wscale(size_t(Np_), 0.0);
    for (int64_t n = 0; n < N; ++n) {
      std::memcpy(&codes[size_t(n * Kp_)], w.codes.data() + n * w.row_bytes(), size_t(K));
      int32_t s = 0;
      for (int64_t k = 0; k < K; ++k) s += codes[size_t(n * Kp_ + k)];
      wsum[size_t(n)] = s;
      wscale[size_t(n)] = double(o.input_quant.scale) * double(w.scale(n, 0));
    }
    codes_ = dev_.upload(codes.data(), codes.size());
    wsum_ = dev_.upload(wsum.data(), wsum.size() * 4);
    wscale_ = dev_.upload(wscale.data(), wscale.size() * 8);
    scratch_ = dev_.ctx->reserve_scratch(workspace_size(kScratchRows));
    MIXQ_CUDA_CHECK(cudaDeviceSynchronize());
  }

  std::string kernel_name(int64_t M) const override {
    return pick(M).id(int(kInt8TensorBlockK), false, true).name();
  }

  // Only used when x's rows cannot feed 16-byte copies directly (see direct()): a padded copy.
  size_t workspace_size(int64_t M) const override {
    return align256(size_t(M * act_row_pitch(K)));
  }

  void linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
              const ExecContext& ctx) const override {
    check_call_device(x, y, dev_.id);
    const int64_t M = x.shape[0];
    MIXQ_CHECK(M < INT_MAX / 2, ErrorCode::Unsupported, "cuda int8-per-tensor: M (", M,
               ") must be < 2^30");
    int8b::DeviceGuard guard(dev_.id);
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    const int8_t* a = static_cast<const int8_t*>(x.data);
    int64_t lda = x.ld();
    // The GEMM reads whole 16-byte chunks of each row up to round_up(K, 16): x serves directly
    // when that stays inside its rows and every chunk is 16-byte aligned; else a padded copy.
    const bool direct = K % 16 == 0 && lda % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
    if (!direct) {
      const size_t need = workspace_size(M);
      char* ws = call_workspace(ctx.workspace, ctx.workspace_bytes, need, *scratch_, M);
      const int64_t ldq = act_row_pitch(K);
      // Pad columns multiply zero weight codes; cleared anyway so no uninitialised byte is read.
      MIXQ_CUDA_CHECK(cudaMemsetAsync(ws, 0, size_t(M * ldq), stream));
      MIXQ_CUDA_CHECK(cudaMemcpy2DAsync(ws, size_t(ldq), x.data, size_t(lda), size_t(K),
                                        size_t(M), cudaMemcpyDeviceToDevice, stream));
      a = reinterpret_cast<const int8_t*>(ws);
      lda = ldq;
    }
    Int8GemmParams p;
    p.mode = Int8Mode::Tensor;
    p.M = int(M);
    p.N = int(N);
    p.K = int(K);
    p.kb = int(kInt8TensorBlockK);
    p.n_kblocks = int(nb_);
    p.a = a;
    p.lda = lda;
    p.b = static_cast<const int8_t*>(codes_.data());
    p.ldb = Kp_;
    p.Np = Np_;
    p.wsum = static_cast<const int32_t*>(wsum_.data());
    p.wscale = static_cast<const double*>(wscale_.data());
    p.in_zero = opts.input_quant.zero;
    p.out_scale = opts.output_quant.scale;
    p.out_zero = opts.output_quant.zero;
    int8b::set_output(p, y, ep);
    pick(M).launch(p, stream);
  }

 private:
  Int8GemmKernel pick(int64_t M) const {
    return select_int8_gemm(dev_.caps, Int8Mode::Tensor, int(kInt8TensorBlockK), false, M, K,
                            int8b::force_kernel(opts));
  }

  int8b::Int8Device dev_;
  int64_t nb_ = 0, Kp_ = 0, Np_ = 0;
  DeviceBuffer codes_, wsum_, wscale_;
  std::shared_ptr<DeviceBuffer> scratch_;
};

}  // namespace

std::shared_ptr<const PreparedImpl> prepare_int8_tensor(const QuantizedWeight& w,
                                                        const PrepareOptions& opts) {
  return std::make_shared<CudaInt8Tensor>(w, opts);
}

}  // namespace mixq::cuda
