// NCHW conv calls run through the NHWC kernels on copies of x and y
// (docs/decisions/conv-nchw-through-nhwc.md): where the copies sit in the call's memory and which
// memory holds them, shared by the weight-only and the INT8 per-tensor convs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mixq/ops.hpp"
#include "mixq/tensor.hpp"

namespace mixq::cuda {

// After `gemm` bytes (the NHWC GEMM's own workspace, 0 where it needs none): x's NHWC copy, then
// y's, each part rounded up to 256 bytes so that every part starts as aligned as its base.
struct NchwCopies {
  size_t gemm = 0;
  size_t x_at = 0, y_at = 0, total = 0;
};
inline NchwCopies nchw_copies_layout(size_t gemm_bytes, size_t x_bytes, size_t y_bytes) {
  const auto round256 = [](size_t b) { return (b + 255) / 256 * 256; };
  NchwCopies c;
  c.gemm = round256(gemm_bytes);
  c.x_at = c.gemm;
  c.y_at = c.x_at + round256(x_bytes);
  c.total = c.y_at + round256(y_bytes);
  return c;
}

// The copies' base: the caller's workspace where it has `total` bytes and is 16-byte aligned (TMA
// reads x's copy), else the device's reserved scratch where that has room (calls on it must not
// run concurrently: include/mixq/ops.hpp). nullptr where a workspace is too small or misaligned,
// or the scratch has no room: not an error, the call runs its direct NCHW kernel instead.
inline char* nchw_copies_base(const ExecContext& ctx, const DeviceBuffer* scratch, size_t total) {
  if (ctx.workspace)
    return ctx.workspace_bytes >= total && reinterpret_cast<uintptr_t>(ctx.workspace) % 16 == 0
               ? static_cast<char*>(ctx.workspace)
               : nullptr;
  return scratch && total <= scratch->size() ? static_cast<char*>(scratch->data()) : nullptr;
}

}  // namespace mixq::cuda
