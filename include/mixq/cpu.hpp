// CPU backend extras: the dense FP32 GEMM baseline used by benchmarks, and the ISA in use.
#pragma once

#include <cstdint>

namespace mixq::cpu {

// Y[M][N] = X[M][K] . W[N][K]^T in f32 with the CPU backend's blocked SIMD kernels, on
// `num_threads` threads (0 = MIXQ_NUM_THREADS or all hardware threads). Row-major, contiguous.
void dense_gemm_f32(const float* X, int64_t M, const float* W, int64_t N, int64_t K, float* Y,
                    int num_threads);

// "avx512", "avx2" or "scalar": the kernel set this CPU (and MIXQ_CPU_ISA) selects.
const char* isa_name();

}  // namespace mixq::cpu
