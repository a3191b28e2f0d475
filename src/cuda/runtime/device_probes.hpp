// What the device and the loaded image can do, asked once per device (runtime/device_context.cpp):
// how many thread-block clusters the GPU holds at once, for each cluster size and blocks-per-SM
// count (DeviceCaps::cluster_capacity), and whether the sm_90a image is the one that runs. Clusters are placed within one GPC, so near full
// occupancy fewer fit than SMs x blocks / size; the streaming kernel's planner uses a cluster only
// where its whole grid of clusters fits.
#pragma once

#include "cuda/dispatch/device_caps.hpp"

namespace mixq::cuda {

// Fills caps.cluster_capacity on a 9.x device (cudaOccupancyMaxActiveClusters on a probe kernel
// whose shared memory admits exactly b blocks of 128 threads per SM); leaves it zero elsewhere.
void probe_cluster_capacity(int device, DeviceCaps& caps);
// True when the library carries sm_90a code and device `device` (compute capability 9.x) runs it:
// the Hopper kernels (wgmma, TMA, setmaxnreg) may be launched.
bool probe_sm90a_image(int device);

}  // namespace mixq::cuda
