// Dequantizing tensor-core kernel instances (f16 / bf16 X, 16 / 32 / 64-token tiles) of the GGUF types
// Q2_K, Q3_K, IQ4_XS (ggml_gemv_launch.cuh).
#include "cuda/launch/ggml_gemv_launch.cuh"

namespace mixq::cuda::ggml {
MIXQ_GGML_HMMA_TYPE(Q2_K)
MIXQ_GGML_HMMA_TYPE(Q3_K)
MIXQ_GGML_HMMA_TYPE(IQ4_XS)
}  // namespace mixq::cuda::ggml
