// A full stream boundary for a library that launches its kernels with programmatic dependent
// launch but does not wait for the previous grid in them. NCCL 2.28.0 - 2.30.6 launches its
// symmetric-window kernels (sm_90+) with programmatic stream serialization and, by an omission
// NCCL fixed in 2.30.7, without cudaGridDependencySynchronize: such a kernel may read a buffer
// before the stores of the kernel before it have landed. An empty kernel launched normally
// between the two starts only once every earlier operation of the stream has completed and its
// memory is visible; the programmatic launch after it may overlap only that empty kernel.
#pragma once

#include <cuda_runtime.h>

namespace mixq::cuda {

// Launches the boundary on `stream` (capturable: one kernel node). Throws on a launch error.
void launch_stream_fence(cudaStream_t stream);

}  // namespace mixq::cuda
