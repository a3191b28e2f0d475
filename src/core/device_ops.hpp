// Internal: the few memory operations the tensor-parallel layers run around a product, on the
// host or, stream-ordered, on a CUDA device (src/cuda/backend/device_ops.cpp; a build without
// CUDA throws Unsupported from src/core/cuda_stub.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mixq/ops.hpp"

namespace mixq {

// Columns [n0, n0 + n) of a [N] vector (a bias) or of every row of an [M][N] matrix, as a view
// of their own (empty stays empty).
inline TensorView column_slice(const TensorView& v, int64_t n0, int64_t n) {
  if (v.empty()) return v;
  char* p = static_cast<char*>(v.data) + dtype_bytes(v.dtype, n0);
  if (v.rank == 1) return TensorView::strided(p, v.dtype, {n}, {1}, v.device, v.device_index);
  return TensorView::strided(p, v.dtype, {v.shape[0], n}, {v.ld(), 1}, v.device, v.device_index);
}

// rows x width bytes from src (rows spitch bytes apart) to dst (dpitch apart).
void copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
               int64_t rows, Device device, int device_index, void* stream);
// y = clamp(y + bias, lo, hi) in place (y [M][N] F32/F16/BF16, rows contiguous).
void epilogue_in_place(const TensorView& y, const Epilogue& ep, const ExecContext& ctx);

// A second stream on one CUDA device and the events that fork work from a caller's stream onto it
// and join it back (capturable: inside a capture the fork pulls the side stream into the graph).
// The row-parallel layers run their all-reduces there, so that a chunk's sum overlaps the next
// chunk's product.
class StreamFork {
 public:
  StreamFork(int device_index, int events);
  ~StreamFork();
  StreamFork(const StreamFork&) = delete;
  StreamFork& operator=(const StreamFork&) = delete;
  void* side() const { return side_; }
  // The side stream waits for what `stream` has queued so far (event i of the fork).
  void fork(int i, void* stream);
  // `stream` waits for everything queued on the side stream so far.
  void join(void* stream);

 private:
  int device_ = 0;
  void* side_ = nullptr;
  std::vector<void*> events_;
  void* joined_ = nullptr;
};

// Stream-ordered device memory (cudaMallocAsync / cudaFreeAsync: graph capturable) for scratch a
// call needs when the caller passed no workspace.
void* cuda_alloc_async(size_t bytes, int device_index, void* stream);
void cuda_free_async(void* ptr, int device_index, void* stream);

// The CUDA halves (stream-ordered, capturable).
void cuda_copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                    int64_t rows, int device_index, void* stream);
void cuda_epilogue_in_place(const TensorView& y, const Epilogue& ep, void* stream);

}  // namespace mixq
