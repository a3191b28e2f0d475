// Dequantizing tensor-core kernel instances (f16 / bf16 X, 16 / 32 / 64-token tiles) of the GGUF types
// Q4_K, Q5_K, Q6_K (ggml_gemv_launch.cuh).
#include "cuda/launch/ggml_gemv_launch.cuh"

namespace mixq::cuda::ggml {
MIXQ_GGML_HMMA_TYPE(Q4_K)
MIXQ_GGML_HMMA_TYPE(Q5_K)
MIXQ_GGML_HMMA_TYPE(Q6_K)
}  // namespace mixq::cuda::ggml
