// Placeholder until the optimized CPU backend lands (same session): routes to the reference.
#include "core/prepared.hpp"

namespace mixq {
std::shared_ptr<const PreparedImpl> prepare_cpu(const QuantizedWeight& w, const ConvGeometry* conv,
                                                const PrepareOptions& opts) {
  return prepare_reference(w, conv, opts);
}
}  // namespace mixq
