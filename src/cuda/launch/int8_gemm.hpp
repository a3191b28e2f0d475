// Host-side interface of the INT8 GEMMs: the kernel families, their choice and launchers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/dispatch/device_caps.hpp"
#include "cuda/dispatch/kernel_id.hpp"
#include "cuda/kernels/common/int8_params.hpp"

namespace mixq::cuda {

// A kernel family that runs Int8GemmParams. The prepared weights pick one per call from the
// device's compute capability and M (select_int8_gemm); an alternative kernel (e.g. a Hopper
// wgmma one) plugs in by returning another launcher there. `launch` must be stream-ordered,
// synchronisation-free and graph-capturable; it reads only what the params point at.
using Int8GemmLaunchFn = void (*)(const Int8GemmParams& p, cudaStream_t stream);
struct Int8GemmKernel {
  Family family = Family::I8Sm80Small;
  Int8GemmLaunchFn launch = nullptr;
  int skinny_mt = 0;  // > 0: a few-token kernel of this token tile (needs partial and tickets)
  // The instantiation this kernel runs for a weight with K block kb (offset: weights with offsets;
  // tensor: the per-tensor mode).
  KernelId id(int kb, bool offset, bool tensor = false) const {
    KernelId k;
    k.family = family;
    k.codes = uint8_t(kb);
    k.tile_m = uint16_t(skinny_mt);
    k.offset = offset;
    k.tensor = tensor;
    return k;
  }
  const char* name() const { return id(128, false).family_name(); }
};

// force: "" (automatic) or a kernel name from int8_gemm_kernel_names() (PrepareOptions /
// MIXQ_FORCE_KERNEL); an unknown name throws InvalidArgument listing the valid ones. K: the
// weight's K (the Hopper choice between the 128-token tile and the 128 x 128 kernel).
Int8GemmKernel select_int8_gemm(const DeviceCaps& caps, Int8Mode mode, int kb, bool offset,
                                int64_t M, int64_t K, const std::string& force);
std::string int8_gemm_kernel_names(Int8Mode mode, int kb, bool offset);

// The sm_80 mma.sync kernels (what runs on Hopper too below kSm90Int8MinM, or without sm_90a), by CTA
// tile: "sm80_i8_16x32" (2 warps; small M, weight streaming), "sm80_i8_64x64" (4 warps) and
// "sm80_i8_128x128" (8 warps of 64x32).
void launch_sm80_int8_small(const Int8GemmParams& p, cudaStream_t stream);
void launch_sm80_int8_medium(const Int8GemmParams& p, cudaStream_t stream);
void launch_sm80_int8_large(const Int8GemmParams& p, cudaStream_t stream);
// Largest M served by the small / medium tiles (docs/decisions/int8-block-gemm.md).
int64_t int8_small_max_m(const DeviceCaps& caps);
int64_t int8_medium_max_m(const DeviceCaps& caps);
// Smallest M served by the Hopper wgmma kernel "sm90_i8_128x128" (sm90_w8a8_gemm.hpp; block mode,
// K block kb = 64 or 128, compute capability 9.0 with the sm_90a image); the skinny kernels below.
int64_t int8_sm90_min_m(const DeviceCaps& caps, int kb);

}  // namespace mixq::cuda
