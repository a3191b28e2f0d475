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
#if defined(__linux__)
#include <sched.h>
#endif

namespace mixq::cpu {

int available_cpus() {
#if defined(__linux__)
  // The affinity mask, not the machine: under taskset, a cgroup cpuset (containers, batch
  // schedulers) or numactl the process runs on fewer CPUs than the machine has, and a pool sized
  // to the machine puts several spinning threads on each of them.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

int resolve_num_threads(int requested) {
  if (requested > 0) return requested;
  static const int env = [] {  // read once per process
    const char* e = std::getenv("MIXQ_NUM_THREADS");
    return e ? std::atoi(e) : 0;
  }();
  if (env > 0) return env;
  static const int cpus = available_cpus();  // (a system call: read once per process)
  return cpus;
}

namespace {

constexpr int kMaxWorkers = 255;

// Set while this thread runs a task of a region (helpers and the calling thread alike).
thread_local bool tls_in_task = false;

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
      pending_.store(helpers);
      // spinning only where every thread of the region has a core: oversubscribed, a spinning
      // helper would take the time of a thread with work
      spin_.store(helpers + 1 <= cores_);
      error_ = nullptr;
      // the new region, last (release): spinning helpers start on it
      const uint64_t generation = (region_.load(std::memory_order_relaxed) >> kWidthBits) + 1;
      region_.store(generation << kWidthBits | static_cast<uint64_t>(helpers), std::memory_order_release);
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
    tls_in_task = true;
    struct Leave {
      ~Leave() { tls_in_task = false; }
    } leave;
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
    // the generation this helper last worked in, and the one `ready` found it is part of: both
    // taken from one read of region_, since a generation and a width read apart could belong to
    // two regions (a helper outside the running region reading the next one's width would join
    // the running one, and then the next one too: two decrements of one pending_ count)
    uint64_t seen = 0, joined = 0;
    auto ready = [&] {
      if (stop_.load(std::memory_order_acquire)) return true;
      const uint64_t r = region_.load(std::memory_order_acquire);
      if (r >> kWidthBits == seen || id >= static_cast<int>(r & kWidthMask)) return false;
      joined = r >> kWidthBits;
      return true;
    };
    for (;;) {
      if (!spin_until(spin_.load(std::memory_order_relaxed), ready)) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, ready);
      }
      if (stop_.load()) return;
      seen = joined;
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
  // read by spinning threads without the lock; written under it (region_ last, with release: a
  // helper that sees a new region sees its body_, n_tasks_, next_ and pending_)
  std::atomic<int> pending_{0};
  // the running region: its generation (counting from 1) above kWidthBits, its helper count
  // (helpers with id below it work in it) in the bits below
  static constexpr int kWidthBits = 16;
  static constexpr uint64_t kWidthMask = (uint64_t(1) << kWidthBits) - 1;
  static_assert(kMaxWorkers <= int(kWidthMask), "the helper count fits its bits");
  std::atomic<uint64_t> region_{0};
  std::atomic<bool> stop_{false}, spin_{false};
  const int cores_ = available_cpus();
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void parallel_for(int threads, int64_t n_tasks, const std::function<void(int64_t)>& body) {
  if (n_tasks <= 0) return;
  // One thread, or a call from inside a task: run inline, without the pool's call lock, so a task
  // of an outer parallel region (grouped calls run one expert per task) may call code that uses
  // parallel_for. (The pool runs one region at a time: a task waiting for a region of its own
  // would wait for itself.)
  if (threads == 1 || tls_in_task) {
    for (int64_t t = 0; t < n_tasks; ++t) body(t);
    return;
  }
  pool().run(threads, n_tasks, body);
}

}  // namespace mixq::cpu
