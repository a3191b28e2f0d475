// Empty kernels the runtime launches nothing with: their attributes answer questions about the
// device and the loaded image (how many clusters fit; whether the sm_90a image is the one that runs).
#pragma once

namespace mixq::cuda {

// 128-thread blocks, as the streaming kernel's: cudaOccupancyMaxActiveClusters for its clusters.
__global__ void __launch_bounds__(128) cluster_probe_kernel() {}

// Compiled into every architecture's image like every kernel: its binaryVersion says which image runs.
__global__ void image_probe_kernel() {}

}  // namespace mixq::cuda
