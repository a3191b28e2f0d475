// Hopper warpgroup MMA plumbing: shared-memory matrix descriptors for 128-byte-swizzled K-major
// tiles (the layout TMA writes with CU_TENSOR_MAP_SWIZZLE_128B) and the fence / commit / wait
// instructions around wgmma.mma_async. sm_90a only (guard callers with __CUDA_ARCH_FEAT_SM90_ALL).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/kernels/common/sm90_wgmma_ops.cuh"

// Defined while compiling the sm_90a image: kernels guard wgmma/TMA code with it.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MIXQ_SM90A 1
#endif

namespace mixq::cuda::sm90 {

// Descriptor of a K-major tile whose rows are 128 bytes, stored as 8-row x 128-byte swizzle atoms
// (1024 bytes each) one after another along M/N. The tile base must be 1024-byte aligned so the
// hardware's swizzle phase (address bits 7..9) matches what TMA wrote.
//   bits  0..13  start address >> 4
//   bits 16..29  leading byte offset >> 4 (unused for swizzled K-major layouts; 1 by convention)
//   bits 32..45  stride byte offset >> 4: 1024 bytes between consecutive 8-row atoms
//   bits 62..63  layout: 1 = 128-byte swizzle
// Built as two 32-bit words: the low word (start address >> 4, leading byte offset) of the tile at
// smem_addr and the constant high word. Stepping through the tiles of a ring is then 32-bit
// arithmetic on the low word (the 14-bit address field spans all 228 KB of shared memory, so it
// never carries into the offset field).
__device__ __forceinline__ uint32_t desc_lo_kmajor_sw128(uint32_t smem_addr) {
  return ((smem_addr & 0x3FFFF) >> 4) | (1u << 16);
}
__device__ __forceinline__ uint64_t desc_from_lo_sw128(uint32_t lo) {
  return (uint64_t((1024 >> 4) | (1u << 30)) << 32) | lo;
}
__device__ __forceinline__ uint64_t desc_kmajor_sw128(uint32_t smem_addr) {
  return desc_from_lo_sw128(desc_lo_kmajor_sw128(smem_addr));
}

// Descriptor of a K-major tile whose rows are 32 bytes (8 tf32 values: one k8 step), as TMA writes
// it with CU_TENSOR_MAP_SWIZZLE_32B: 8-row x 32-byte atoms (256 bytes) one after another along N,
// tile base 256-byte aligned. Layout field 3 = 32-byte swizzle; stride byte offset 256.
__device__ __forceinline__ uint64_t desc_kmajor_sw32(uint32_t smem_addr) {
  const uint32_t lo = ((smem_addr & 0x3FFFF) >> 4) | (1u << 16);
  return (uint64_t((256 >> 4) | (3u << 30)) << 32) | lo;
}

// Orders this warpgroup's register/smem accesses before the following wgmma.mma_async.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving accumulator reads/writes across the asynchronous MMA.
__device__ __forceinline__ void reg_fence(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void reg_fence(int32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// d += A(registers) . B(shared, K-major), m64 N k16, f16/bf16 in, f32 accumulators; A is the
// warp's 16x16 fragment in the mma.sync m16n8k16 A layout (the per-warp layout of wgmma's A).
template <typename T, int N>
struct WgmmaRS;
// d += A(registers) . B(shared, K-major), m64 N k8, tf32 in, f32 accumulators (always accumulate);
// A is the warp's 16x8 fragment in the mma.sync m16n8k8 tf32 A layout.
template <int N>
struct WgmmaTf32RS;
#include "cuda/kernels/common/sm90_wgmma_rs.inc"

}  // namespace mixq::cuda::sm90
