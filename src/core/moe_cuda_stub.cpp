// Built only when mixq is configured without CUDA: the MoE ops' CUDA entry points say so.
#include "core/moe_prepared.hpp"
#include "mixq/error.hpp"

namespace mixq {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  MIXQ_FAIL(ErrorCode::Unsupported, what, ": this build of mixq has no CUDA support (configure "
            "with -DMIXQ_CUDA=ON on a machine with nvcc)");
}
}  // namespace

std::shared_ptr<const PreparedExpertsImpl> prepare_experts_cuda(std::vector<PreparedWeight>,
                                                                const PrepareOptions&) {
  no_cuda("prepare_experts (cuda)");
}
size_t moe_route_workspace_size_cuda(int64_t) { return 0; }
void moe_route_cuda(const TensorView&, int64_t, const TensorView&, const TensorView&,
                    const TensorView&, const TensorView&, const ExecContext&) {
  no_cuda("moe_route");
}
void moe_gather_cuda(const TensorView&, const TensorView&, int64_t, const TensorView&,
                     const ExecContext&) {
  no_cuda("moe_gather");
}
void moe_scatter_add_cuda(const TensorView&, const TensorView&, const TensorView&,
                          const TensorView&, bool, const ExecContext&) {
  no_cuda("moe_scatter_add");
}
void moe_activation_mul_cuda(const TensorView&, const TensorView&, MoeActivation,
                             const ExecContext&) {
  no_cuda("moe_mlp");
}

}  // namespace mixq
