// Block-wide inclusive prefix sum of one int per thread in shared memory (scan[blockDim.x]), for
// the one-block scheduling kernels (moe routing and tile schedule): log2(threads) steps.
#pragma once

namespace mixq::cuda {

// Every thread of the block calls it; scan[tid] holds the thread's value before, the sum of
// scan[0 .. tid] after (Hillis-Steele).
__device__ __forceinline__ void block_inclusive_scan(int* scan, int tid, int nt) {
  __syncthreads();
  for (int d = 1; d < nt; d *= 2) {
    const int v = tid >= d ? scan[tid - d] : 0;
    __syncthreads();
    scan[tid] += v;
    __syncthreads();
  }
}

}  // namespace mixq::cuda
