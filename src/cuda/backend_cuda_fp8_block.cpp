// CUDA prepared weight for ActQuant::Fp8Block (placeholder until its kernels land).
#include "cuda/backend_factories.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

std::shared_ptr<const PreparedImpl> prepare_fp8_block(const QuantizedWeight& /*w*/,
                                        const PrepareOptions& /*opts*/) {
  MIXQ_FAIL(ErrorCode::Unsupported, "cuda backend: Fp8Block activations are not implemented yet");
}

}  // namespace mixq::cuda
