// The CPU backend's thread pool: how many threads a call gets by default (the affinity mask, so
// that a pool under taskset or a container's cpuset does not put several spinning threads on each
// CPU it may use), and that every task runs once on any thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#include "cpu/thread_pool.hpp"

using mixq::cpu::available_cpus;
using mixq::cpu::parallel_for;
using mixq::cpu::resolve_num_threads;

TEST(ThreadPool, DefaultThreadsFollowTheAffinityMask) {
  EXPECT_GE(available_cpus(), 1);
  EXPECT_LE(available_cpus(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_EQ(resolve_num_threads(3), 3);
#if defined(__linux__)
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
    if (CPU_ISSET(c, &saved)) first = c;
  ASSERT_GE(first, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const int seen = available_cpus();
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(seen, 1) << "a one-CPU affinity mask";
  EXPECT_EQ(available_cpus(), CPU_COUNT(&saved));
  if (std::getenv("MIXQ_NUM_THREADS") == nullptr) {
    EXPECT_EQ(resolve_num_threads(0), CPU_COUNT(&saved));
  }
#endif
}

TEST(ThreadPool, EveryTaskRunsOnceOnAnyThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(1000)}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_for(threads, n, [&](int64_t t) { hits[static_cast<size_t>(t)].fetch_add(1); });
      for (int64_t t = 0; t < n; ++t) EXPECT_EQ(hits[static_cast<size_t>(t)].load(), 1) << threads << " threads, task " << t;
    }
  }
}

// Regions of different sizes back to back, as a call sequence does (a prepare on every CPU, then
// two-thread calls): a helper outside one region must never join it, nor join a region twice.
// A helper that did would end a region early (tasks still running: wrong or dangling results)
// or leave its count below zero (the caller asleep for ever). Every task once, every region.
TEST(ThreadPool, RegionsOfChangingWidthRunEveryTaskOnce) {
  const int widths[] = {16, 2, 9, 1, 3, 16, 2, 5};
  std::vector<std::atomic<int>> hits(64);
  for (int round = 0; round < 4000; ++round) {
    const int threads = widths[round % 8];
    const int64_t n = 1 + (round * 7) % 64;
    for (int64_t t = 0; t < n; ++t) hits[static_cast<size_t>(t)].store(0);
    parallel_for(threads, n, [&](int64_t t) { hits[static_cast<size_t>(t)].fetch_add(1); });
    for (int64_t t = 0; t < n; ++t)
      ASSERT_EQ(hits[static_cast<size_t>(t)].load(), 1) << "round " << round << ", " << threads << " threads, task " << t;
  }
}

// A task that calls parallel_for itself (a grouped call running one expert per task, each expert
// a threaded call) runs the inner tasks inline instead of waiting for the pool it occupies.
TEST(ThreadPool, NestedCallsRunInline) {
  std::vector<std::atomic<int>> hits(8 * 50);
  parallel_for(4, 8, [&](int64_t o) {
    parallel_for(4, 50, [&](int64_t i) { hits[static_cast<size_t>(o * 50 + i)].fetch_add(1); });
  });
  for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i].load(), 1) << "task " << i;
}
