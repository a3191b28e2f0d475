// q8 GEMV instances of the GGUF types Q4_0, Q4_1, IQ4_NL (ggml_gemv_launch.cuh).
#include "cuda/launch/ggml_gemv_launch.cuh"

namespace mixq::cuda::ggml {
MIXQ_GGML_GEMV_TYPE(Q4_0)
MIXQ_GGML_GEMV_TYPE(Q4_1)
MIXQ_GGML_GEMV_TYPE(IQ4_NL)
}  // namespace mixq::cuda::ggml
