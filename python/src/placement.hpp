// What every call binding checks and builds the same way: that a borrowed array lives where the
// prepared weight (or expert stack) does, and the ExecContext of the call.
#pragma once

#include <cstdint>

#include "mixq/ops.hpp"
#include "views.hpp"

namespace mixq_py {

// Throws InvalidArgument naming `arg` when v (if not empty) is not on the device of a weight
// prepared for `backend` (CUDA: ordinal `device`). `owner` completes the message: "the weight
// is", "the experts are".
void check_place(const mixq::TensorView& v, const char* arg, mixq::BackendKind backend,
                 int device, const char* owner);

// Stream, CPU threads and the caller's workspace (must be contiguous) of one call.
mixq::ExecContext exec_context(uintptr_t stream, const Borrowed& workspace, int threads);

}  // namespace mixq_py
