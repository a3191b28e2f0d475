// The streaming-read ceiling of a GPU, measured the way anchors.md defines it: a kernel that reads
// a cold buffer once with 16-byte loads, several in flight per thread. Benchmarks report their
// bandwidth against this figure measured in the same run.
#pragma once

#include <cstddef>

namespace mixq::cuda {

struct ReadCeiling {
  size_t bytes = 0;
  double us = 0;        // median per read of `bytes`
  double tb_per_s = 0;
};

// Reads rotating copies of a `bytes` buffer (>= 4x L2 in total where memory allows); median of
// 7 CUDA-graph replays of >= 10 reads.
ReadCeiling measure_read_ceiling(size_t bytes, int device = 0);

}  // namespace mixq::cuda
