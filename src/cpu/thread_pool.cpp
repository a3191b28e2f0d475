// Persistent worker threads for the CPU backend.
#include "cpu/thread_pool.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <immintrin.h>
#endif

namespace mixq::cpu {

namespace {
// the machine's hardware threads (1 where the library cannot tell)
int hardware_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}
}  // namespace

int resolve_num_threads(int requested) {
  if (requested > 0) return requested;
  static const int env = [] {  // read once per process
    const char* e = std::getenv("MIXQ_NUM_THREADS");
    return e ? std::atoi(e) : 0;
  }();
  if (env > 0) return env;
  return hardware_threads();
}

namespace {

constexpr int kMaxWorkers = 255;

// How long a thread spins on the pool's state before it sleeps. A call is one or two parallel
// regions, and a decode step is many calls back to back: a helper asleep on the condition
// variable between them is woken by a futex call, and the caller, asleep on the helpers' end,
// by another; on a small VM each wake took tens of µs of a 400-600 µs one-token call, so that two
// threads ran some GGUF decode rows slower than one. Spinning this long covers the gaps inside
// a call and between the calls of a step, and bounds the time a helper burns once work stops.
constexpr auto kSpin = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or kSpin has passed (not at all where `spin` is false); whether done() held.
template <class Done>
bool spin_until(bool spin, Done&& done) {
  if (!spin) return done();
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= until) return done();
  }
}

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_.store(true);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  void run(int threads, int64_t n_tasks, const std::function<void(int64_t)>& body) {
    std::lock_guard<std::mutex> call_lock(call_mu_);  // one parallel region at a time
    const int helpers = static_cast<int>(
        std::min<int64_t>(std::min(threads, kMaxWorkers + 1), n_tasks)) - 1;
    if (helpers <= 0) {
      for (int64_t t = 0; t < n_tasks; ++t) body(t);
      return;
    }
    while (static_cast<int>(workers_.size()) < helpers)
      workers_.emplace_back([this, id = static_cast<int>(workers_.size())] { loop(id); });
    {
      std::lock_guard<std::mutex> lk(mu_);
      body_ = &body;
      n_tasks_ = n_tasks;
      next_.store(0);
      active_.store(helpers);
      pending_.store(helpers);
      // spinning only where every thread of the region has a core: oversubscribed, a spinning
      // helper would take the time of a thread with work
      spin_.store(helpers + 1 <= cores_);
      error_ = nullptr;
      generation_.fetch_add(1, std::memory_order_release);  // spinning helpers start on this
    }
    cv_.notify_all();
    work();
    // the helpers end about when this thread does: spin on their count before sleeping
    if (!spin_until(spin_.load(), [this] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lk(mu_);
      done_cv_.wait(lk, [this] { return pending_.load() == 0; });
    }
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work() {
    for (;;) {
      const int64_t t = next_.fetch_add(1);
      if (t >= n_tasks_) return;
      try {
        (*body_)(t);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void loop(int id) {
    uint64_t seen = 0;
    auto ready = [&] {
      return stop_.load(std::memory_order_acquire) ||
             (generation_.load(std::memory_order_acquire) != seen && id < active_.load(std::memory_order_acquire));
    };
    for (;;) {
      if (!spin_until(spin_.load(std::memory_order_relaxed), ready)) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, ready);
      }
      if (stop_.load()) return;
      seen = generation_.load(std::memory_order_acquire);
      work();
      std::lock_guard<std::mutex> lk(mu_);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_cv_.notify_one();
    }
  }

  std::mutex call_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t)>* body_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_{0};
  // read by spinning threads without the lock; written under it (generation_ last, with release:
  // a helper that sees a new generation sees the region's body_ and n_tasks_)
  std::atomic<int> active_{0}, pending_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false}, spin_{false};
  const int cores_ = hardware_threads();
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void parallel_for(int threads, int64_t n_tasks, const std::function<void(int64_t)>& body) {
  if (n_tasks <= 0) return;
  // One thread: run inline, without the pool's call lock, so a task of an outer parallel region
  // (grouped calls run one expert per task) may call single-threaded code that uses parallel_for.
  if (threads == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) body(t);
    return;
  }
  pool().run(threads, n_tasks, body);
}

}  // namespace mixq::cpu
