// Tensor-parallel tests (tests/unit/test_parallel_linear.cpp, tests/gpu/test_cuda_tensor_parallel.cpp):
// every rank a thread of the test process, a barrier they meet at, and their random data.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace mixq::test {

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Runs fn(rank) on one thread per rank and rethrows the first rank's failure after joining all.
inline void on_ranks(int64_t world, const std::function<void(int64_t)>& fn) {
  std::vector<std::thread> ts;
  std::vector<std::exception_ptr> errs(static_cast<size_t>(world));
  for (int64_t r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errs[size_t(r)] = std::current_exception();
      }
    });
  for (auto& t : ts) t.join();
  for (auto& e : errs)
    if (e) std::rethrow_exception(e);
}

// A reusable barrier of `n` rank threads; a wait gives up after a minute (a test fails rather
// than hangs when a rank is gone).
class RankBarrier {
 public:
  explicit RankBarrier(int64_t n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> l(m_);
    const uint64_t g = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait_for(l, std::chrono::seconds(60), [&] { return gen_ != g; });
    }
  }

 private:
  int64_t n_, count_ = 0;
  uint64_t gen_ = 0;
  std::mutex m_;
  std::condition_variable cv_;
};

}  // namespace mixq::test
