// Dequantizing tensor-core kernel instances (f16 / bf16 X, 16 / 32 / 64-token tiles) of the GGUF types
// Q4_0, Q4_1, IQ4_NL (ggml_gemv_launch.cuh).
#include "cuda/launch/ggml_gemv_launch.cuh"

namespace mixq::cuda::ggml {
MIXQ_GGML_HMMA_TYPE(Q4_0)
MIXQ_GGML_HMMA_TYPE(Q4_1)
MIXQ_GGML_HMMA_TYPE(IQ4_NL)
}  // namespace mixq::cuda::ggml
