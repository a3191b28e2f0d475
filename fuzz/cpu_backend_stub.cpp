// The fuzz library leaves the CPU backend's kernels out (fuzz/CMakeLists.txt): its prepare entry
// point, which core's dispatcher names, refuses here. No fuzzer prepares a weight.
#include "core/prepared.hpp"
#include "mixq/error.hpp"

namespace mixq {

std::shared_ptr<const PreparedImpl> prepare_cpu(const QuantizedWeight&, const ConvGeometry*,
                                                const PrepareOptions&) {
  MIXQ_FAIL(ErrorCode::Unsupported, "prepare (cpu): the fuzz build has no CPU kernels");
}

}  // namespace mixq
