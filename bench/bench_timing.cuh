// Shared by the standalone CUDA bench harnesses (bench/cuda_*.cu): the error check, list parsing
// and the cold-L2 graph-replay timer (the method of shared/bench/peers.py: median of 7 replays of
// a graph of >= 10 calls rotating over enough input copies to cover >= 4x the L2).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));             \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

namespace bench_timing {

inline std::vector<std::string> split(const std::string& s, char c) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a <= s.size()) {
    size_t b = s.find(c, a);
    if (b == std::string::npos) b = s.size();
    if (b > a) out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

// L2 size of the device (set from cudaGetDeviceProperties by main).
inline size_t g_l2 = 50u << 20;

// Copies of a `bytes` input that keep the rotated working set >= 4x the L2 (at most 16).
inline int rot_count(size_t bytes, size_t min_copies = 1) {
  return int(std::min<size_t>(16, std::max<size_t>(min_copies, (4 * g_l2 + bytes - 1) / bytes)));
}

// Median microseconds per call of call(i, stream), i rotating over n_rot, via graph replay.
inline double time_graph(const std::function<void(int, cudaStream_t)>& call, int n_rot,
                         cudaStream_t s) {
  const int calls = std::max(n_rot, 10);
  for (int i = 0; i < 3; ++i) call(i % n_rot, s);
  CK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) call(i % n_rot, s);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  std::vector<double> ts;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int r = 0; r < 7; ++r) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    ts.push_back(ms * 1e3 / calls);
  }
  std::sort(ts.begin(), ts.end());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ts[3];
}

}  // namespace bench_timing
