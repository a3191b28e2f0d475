// CUDA prepared weight for ActQuant::Int8PerTensor (placeholder until its kernels land).
#include "cuda/backend_factories.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

std::shared_ptr<const PreparedImpl> prepare_int8_tensor(const QuantizedWeight& /*w*/,
                                        const PrepareOptions& /*opts*/) {
  MIXQ_FAIL(ErrorCode::Unsupported, "cuda backend: Int8PerTensor activations are not implemented yet");
}

}  // namespace mixq::cuda
