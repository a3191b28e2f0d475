// Tensor-parallel tests (tests/unit/test_parallel_linear.cpp, tests/gpu/test_cuda_tensor_parallel.cpp):
// every rank a thread of the test process, a barrier they meet at, and their random data.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <cstdio>
#include <thread>
#include <vector>

#include "test_random.hpp"

namespace mixq::test {

// A reusable barrier of `n` rank threads. A wait throws instead of returning when a rank has
// failed (abort) or when the others have not arrived within a minute: a rank that went on alone
// would wait in a collective forever.
class RankBarrier {
 public:
  explicit RankBarrier(int64_t n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> l(m_);
    if (aborted_) throw std::runtime_error("rank barrier: another rank failed");
    const uint64_t g = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(l, std::chrono::seconds(60), [&] { return gen_ != g || aborted_; }))
      throw std::runtime_error("rank barrier: the other ranks did not arrive within 60 s");
    if (gen_ == g) throw std::runtime_error("rank barrier: another rank failed");
  }
  void abort() {
    std::lock_guard<std::mutex> l(m_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  int64_t n_, count_ = 0;
  uint64_t gen_ = 0;
  bool aborted_ = false;
  std::mutex m_;
  std::condition_variable cv_;
};

// Runs fn(rank) on one thread per rank and rethrows the first rank's failure after joining all.
// A failing rank prints its error at once and aborts `barrier` (if given), so that the ranks
// waiting for it there stop instead of going on into a collective alone.
inline void on_ranks(int64_t world, const std::function<void(int64_t)>& fn, RankBarrier* barrier = nullptr) {
  std::vector<std::thread> ts;
  std::vector<std::exception_ptr> errs(static_cast<size_t>(world));
  std::mutex m;
  int64_t first = -1;
  for (int64_t r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        {
          std::lock_guard<std::mutex> l(m);
          if (first < 0) first = r;
          std::fprintf(stderr, "[ rank %lld ] failed: %s\n", static_cast<long long>(r), e.what());
        }
        errs[size_t(r)] = std::current_exception();
        if (barrier) barrier->abort();
      }
    });
  for (auto& t : ts) t.join();
  if (first >= 0) std::rethrow_exception(errs[size_t(first)]);
}

}  // namespace mixq::test
