// The float64 references split over the CPU backend's threads: each output element is still
// summed by one thread in the serial loop's order, so the bits do not depend on the thread count.
// (They are the oracle of every test, GPU tests included, where a serial reference of a large
// GEMM or conv took most of the time.)
#pragma once

#include <algorithm>
#include <cstdint>

#include "cpu/thread_pool.hpp"

namespace mixq::ref {

// f(begin, end) for [0, n) in pieces of `chunk`, on every CPU the process may use (inline when
// called from inside a parallel task).
template <class F>
void for_each_chunk(int64_t n, int64_t chunk, F&& f) {
  cpu::parallel_for(cpu::resolve_num_threads(0), (n + chunk - 1) / chunk,
                    [&](int64_t t) { f(t * chunk, std::min(n, (t + 1) * chunk)); });
}

}  // namespace mixq::ref
