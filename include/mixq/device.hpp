// Device measurements the benchmarks report against (CUDA builds; a build without CUDA throws
// Unsupported).
#pragma once

#include <cstddef>

namespace mixq {

// The streaming-read ceiling of a GPU, measured as anchors define it: a kernel that reads a cold
// buffer once with 16-byte loads, several in flight per thread, over rotating copies (>= 4x the
// L2 where memory allows); median of 7 CUDA-graph replays of >= 10 reads.
struct ReadCeiling {
  size_t bytes = 0;
  double us = 0;  // median per read of `bytes`
  double tb_per_s = 0;
};
ReadCeiling measure_read_ceiling(size_t bytes, int device = 0);

}  // namespace mixq
