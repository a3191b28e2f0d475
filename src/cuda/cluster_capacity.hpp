// How many thread-block clusters the GPU holds at once, for each cluster size and blocks-per-SM
// count (DeviceCaps::cluster_capacity). Clusters are placed within one GPC, so near full
// occupancy fewer fit than SMs x blocks / size; the streaming kernel's planner uses a cluster only
// where its whole grid of clusters fits.
#pragma once

#include "cuda/wo_plan.hpp"

namespace mixq::cuda {

// Fills caps.cluster_capacity on a 9.x device (cudaOccupancyMaxActiveClusters on a probe kernel
// whose shared memory admits exactly b blocks of 128 threads per SM); leaves it zero elsewhere.
void probe_cluster_capacity(int device, DeviceCaps& caps);

}  // namespace mixq::cuda
