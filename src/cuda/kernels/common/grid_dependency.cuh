// Programmatic dependent launch (sm_90): a kernel launched with the programmatic stream
// serialization attribute may start while the previous kernel of its stream is still running.
// It must call grid_dependency_wait() before it touches anything that kernel may write
// (activations, outputs, workspaces): the wait returns once the previous grid has completed and
// its memory is visible. Reading data that no kernel of the stream writes (a prepared weight:
// prepare synchronizes the device) may come first, which is the point for a memory-bound decode
// kernel: its weight loads are in flight while the previous kernel drains.
// allow_dependent_launch() lets the next PDL launch of the stream start before this grid ends.
// Both are no-ops on a kernel that was not launched that way, and compile to nothing before sm_90.
#pragma once

namespace mixq::cuda {

__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace mixq::cuda
