// mixq::cpu::dense_gemm_f32: the dense FP32 baseline of the benchmarks, through the same panel
// kernels as the quantized paths (the weight is repacked into f32 panels on every call, which
// costs one extra pass over W; callers timing large M are not affected).
#include <cstring>

#include "core/prepared.hpp"
#include "mixq/cpu.hpp"
#include "cpu/kernels.hpp"
#include "mixq/error.hpp"

namespace mixq::cpu {

void dense_gemm_f32(const float* X, int64_t M, const float* W, int64_t N, int64_t K, float* Y,
                    int num_threads) {
  MIXQ_CHECK_ARG(X && W && Y, "dense_gemm_f32: null pointer");
  MIXQ_CHECK_ARG(M >= 0 && N >= 1 && K >= 1, "dense_gemm_f32: M (", M, "), N (", N, "), K (", K,
                 ") must be >= 0, >= 1, >= 1");
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
  const PreparedWeight pw = prepare(q, o);
  ExecContext ctx;
  ctx.num_threads = num_threads;
  linear(TensorView(const_cast<float*>(X), DType::F32, {M, K}), pw,
         TensorView(Y, DType::F32, {M, N}), Epilogue{}, ctx);
}

const char* isa_name() { return select_kernels().isa; }

}  // namespace mixq::cpu
