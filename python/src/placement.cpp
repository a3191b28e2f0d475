#include "placement.hpp"

#include "mixq/error.hpp"

namespace mixq_py {

void check_place(const mixq::TensorView& v, const char* arg, mixq::BackendKind backend,
                 int device, const char* owner) {
  if (v.empty()) return;
  const bool cuda = backend == mixq::BackendKind::CUDA;
  const mixq::Device want = cuda ? mixq::Device::CUDA : mixq::Device::CPU;
  MIXQ_CHECK_ARG(v.device == want, arg, ": expected a ", mixq::device_name(want), " array (",
                 owner, " prepared for the ", mixq::backend_name(backend), " backend), got ",
                 v.describe());
  if (cuda)
    MIXQ_CHECK_ARG(v.device_index == device, arg, ": on cuda:", v.device_index, " but ", owner,
                   " prepared for cuda:", device);
}

mixq::ExecContext exec_context(uintptr_t stream, const Borrowed& workspace, int threads) {
  mixq::ExecContext ctx;
  ctx.stream = reinterpret_cast<void*>(stream);
  ctx.num_threads = threads;
  if (!workspace.view.empty()) {
    MIXQ_CHECK_ARG(workspace.view.is_contiguous(), "workspace: must be contiguous, got ",
                   workspace.view.describe());
    ctx.workspace = workspace.view.data;
    ctx.workspace_bytes = static_cast<size_t>(workspace.view.nbytes());
  }
  return ctx;
}

}  // namespace mixq_py
