// Whether a kernel's image that runs on a device is sm_90 code on a compute-capability 9.x GPU:
// the check before launching a kernel that uses Hopper-only features (wgmma, clusters). A build
// without sm_90 code would run its sm_80 image there (compatible binary), where such paths are
// compiled out.
#pragma once

namespace mixq::cuda {

// One answer per device ordinal (0-63), computed on first use: 0 unknown, 1 yes, 2 no.
struct PerDeviceFlag {
  int state[64] = {};
};

// `kernel` is a __global__ function's address; ordinals outside 0-63 answer false.
bool runs_sm90_image(PerDeviceFlag& cache, int device, const void* kernel);

}  // namespace mixq::cuda
