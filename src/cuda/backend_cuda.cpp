#include "core/prepared.hpp"
#include "mixq/error.hpp"

namespace mixq {
std::shared_ptr<const PreparedImpl> prepare_cuda(const QuantizedWeight&, const ConvGeometry*,
                                                 const PrepareOptions&) {
  MIXQ_FAIL(ErrorCode::Unsupported, "backend cuda: kernels not yet built in this revision");
}
}  // namespace mixq
