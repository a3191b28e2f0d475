// Block-wide inclusive prefix sum of one int per thread in shared memory (scan[blockDim.x]), for
// the one-block scheduling kernels (moe routing and tile schedule): a shuffle scan in each warp,
// one over the warps' totals, three barriers (a shared-memory Hillis-Steele scan over 1024 threads
// took twenty, a large part of the tile schedule's 4 us on the critical path of a decode step).
#pragma once

namespace mixq::cuda {

// Every thread of the block calls it; scan[tid] holds the thread's value before, the sum of
// scan[0 .. tid] after. nt (the block size) is a multiple of 32, at most 1024.
__device__ __forceinline__ void block_inclusive_scan(int* scan, int tid, int nt) {
  __shared__ int warp_sums[32];
  __syncthreads();  // every thread's value is in scan[]
  const int lane = tid & 31, warp = tid >> 5, warps = nt >> 5;
  int v = scan[tid];
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int u = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += u;
  }
  if (lane == 31) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int s = lane < warps ? warp_sums[lane] : 0;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int u = __shfl_up_sync(0xffffffffu, s, d);
      if (lane >= d) s += u;
    }
    if (lane < warps) warp_sums[lane] = s;
  }
  __syncthreads();
  if (warp > 0) v += warp_sums[warp - 1];
  scan[tid] = v;
  __syncthreads();
}

}  // namespace mixq::cuda
