// mixq::cpu::DenseGemmF32 / dense_gemm_f32: the dense FP32 baseline of the benchmarks, through
// the same panels and kernels as the quantized paths (a dense f32 QuantizedWeight without
// scales prepared for the CPU backend; its GEMM tiles read the f32 panels in place).
#include <cstring>

#include "core/prepared.hpp"
#include "cpu/kernels.hpp"
#include "mixq/cpu.hpp"
#include "mixq/error.hpp"

namespace mixq::cpu {

namespace {
PreparedWeight prepare_dense(const float* W, int64_t N, int64_t K) {
  MIXQ_CHECK_ARG(W, "DenseGemmF32: null weight pointer");
  MIXQ_CHECK_ARG(N >= 1 && K >= 1 && N <= (int64_t(1) << 31) && K <= (int64_t(1) << 31),
                 "DenseGemmF32: N (", N, ") and K (", K, ") must be in [1, 2^31]");
  QuantizedWeight q;
  q.N = N;
  q.K = K;
  q.code_type = DType::F32;
  q.block_k = K;
  q.has_scales = false;
  q.zero_kind = ZeroKind::None;
  q.codes.resize(static_cast<size_t>(N * K * 4));
  std::memcpy(q.codes.data(), W, q.codes.size());
  PrepareOptions o;
  o.backend = BackendKind::CPU;
  o.force_kernel = "cpu_f32";
  return prepare(q, o);
}
}  // namespace

DenseGemmF32::DenseGemmF32(const float* W, int64_t N, int64_t K, int num_threads)
    : N_(N), K_(K), threads_(num_threads), pw_(prepare_dense(W, N, K)) {}

void DenseGemmF32::run(const float* X, int64_t M, float* Y) const {
  MIXQ_CHECK_ARG(X && Y, "DenseGemmF32::run: null pointer");
  MIXQ_CHECK_ARG(M >= 0, "DenseGemmF32::run: M (", M, ") must be >= 0");
  if (M == 0) return;
  std::lock_guard<std::mutex> lk(mu_);
  const size_t need = linear_workspace_size(pw_, M);
  if (ws_.size() < need) ws_.resize(need);
  ExecContext ctx;
  ctx.num_threads = threads_;
  ctx.workspace = ws_.data();
  ctx.workspace_bytes = ws_.size();
  linear(TensorView(const_cast<float*>(X), DType::F32, {M, K_}), pw_,
         TensorView(Y, DType::F32, {M, N_}), Epilogue{}, ctx);
}

void dense_gemm_f32(const float* X, int64_t M, const float* W, int64_t N, int64_t K, float* Y,
                    int num_threads) {
  MIXQ_CHECK_ARG(X && W && Y, "dense_gemm_f32: null pointer");
  MIXQ_CHECK_ARG(M >= 0 && N >= 1 && K >= 1, "dense_gemm_f32: M (", M, "), N (", N, "), K (", K,
                 ") must be >= 0, >= 1, >= 1");
  DenseGemmF32(W, N, K, num_threads).run(X, M, Y);
}

const char* isa_name() { return select_kernels().isa; }

}  // namespace mixq::cpu
