// Hopper (sm_90a) warpgroup MMA primitives: fences, commit/wait, shared-memory matrix descriptors
// and the register-A wgmma instructions. Only meaningful inside code compiled for sm_90a; callers
// guard their kernel bodies with MIXQ_SM90A.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MIXQ_SM90A 1
#endif

namespace mixq::cuda::sm90 {

// Orders this thread's earlier register writes (A fragments, accumulators) before the next
// wgmma reads them.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N committed wgmma groups of this warp are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving reads/writes of an accumulator across the asynchronous MMAs
// (it sees the asm as synchronous otherwise).
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void fence_operand(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// Descriptor of a K-major tile of 16-bit elements stored with the 128-byte swizzle: rows of 64
// elements (128 bytes), 16-byte chunk c of row r at chunk c ^ (r % 8), 8-row groups 1024 bytes
// apart, tile base 1024-byte aligned. A k16 step inside the 64-wide row is +32 bytes on the start
// address (the swizzle is applied by the hardware on the final address bits).
__device__ __forceinline__ uint64_t desc_k_major_sw128(uint32_t smem_byte_addr) {
  uint64_t d = 0;
  d |= uint64_t((smem_byte_addr & 0x3FFFF) >> 4);  // start address
  d |= uint64_t(1) << 16;                           // leading byte offset (unused here)
  d |= uint64_t(1024 >> 4) << 32;                   // stride byte offset: next 8-row group
  d |= uint64_t(1) << 62;                           // swizzle mode: 128 B
  return d;
}

template <typename T, int N>
struct WgmmaRS;  // d += A(registers) . B(shared, K-major), m64 N k16, f32 accumulators

#include "cuda/kernels/sm90_wgmma_rs.inc"

}  // namespace mixq::cuda::sm90
