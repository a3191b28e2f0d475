// Dequantizing tensor-core kernel instances (f16 / bf16 X, 16 / 32 / 64-token tiles) of the GGUF types
// Q5_0, Q5_1, Q8_0 (ggml_gemv_launch.cuh).
#include "cuda/launch/ggml_gemv_launch.cuh"

namespace mixq::cuda::ggml {
MIXQ_GGML_HMMA_TYPE(Q5_0)
MIXQ_GGML_HMMA_TYPE(Q5_1)
MIXQ_GGML_HMMA_TYPE(Q8_0)
}  // namespace mixq::cuda::ggml
