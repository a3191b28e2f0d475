// Zeroing a caller workspace's split-K tickets as a kernel of the stream instead of a memset node.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace mixq::cuda {

// Sets n words at p to zero on `stream`. With pdl (sm_90), the kernel is a programmatic dependent
// launch that lets the next one start at once: a GEMM launched the same way then runs its
// prologue and its first weight loads while the words are cleared, and waits for them (its
// grid_dependency_wait covers this grid's completion). The kernel itself waits for the previous
// kernel of the stream before writing (it may still be using the same workspace). A memset node
// would serialize both neighbours. Nothing is launched when n == 0.
void launch_zero_words(unsigned* p, size_t n, bool pdl, cudaStream_t stream);

}  // namespace mixq::cuda
