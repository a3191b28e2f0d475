// CPU backend extras: the dense FP32 GEMM baseline used by benchmarks, and the ISA in use.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "mixq/ops.hpp"

namespace mixq::cpu {

// A dense FP32 weight W[N][K] (row-major) packed once into the CPU backend's f32 panels, then
// Y[M][N] = X[M][K] . W^T in f32 as often as needed: M <= 8 streams W once (memory-bound GEMV),
// larger M runs the register-blocked AVX-512 GEMM tile reading the panels in place. The fair
// dense baseline for the quantized kernels (same threads, same panel code).
class DenseGemmF32 {
 public:
  // Copies and packs W (on the backend's default threads). num_threads is what run() uses:
  // 0 = MIXQ_NUM_THREADS, else every CPU this process may run on (its affinity mask).
  DenseGemmF32(const float* W, int64_t N, int64_t K, int num_threads = 0);
  // X [M][K], Y [M][N], row-major contiguous. Calls on one object are serialized (they share a
  // workspace that grows to the largest M seen).
  void run(const float* X, int64_t M, float* Y) const;
  int64_t N() const { return N_; }
  int64_t K() const { return K_; }
  std::string kernel_name(int64_t M) const { return pw_.kernel_name(M); }

 private:
  int64_t N_, K_;
  int threads_;
  PreparedWeight pw_;
  mutable std::mutex mu_;
  mutable std::vector<uint8_t> ws_;
};

// One-shot Y[M][N] = X[M][K] . W[N][K]^T in f32 (packs W on every call: prefer DenseGemmF32
// when W is reused). Row-major, contiguous.
void dense_gemm_f32(const float* X, int64_t M, const float* W, int64_t N, int64_t K, float* Y,
                    int num_threads);

// "avx512", "avx2vnni", "avx2" or "scalar": the kernel set this CPU (and MIXQ_CPU_ISA) selects.
const char* isa_name();

}  // namespace mixq::cpu
