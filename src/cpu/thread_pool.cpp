// Persistent worker threads for the CPU backend.
#include "cpu/thread_pool.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace mixq::cpu {

int resolve_num_threads(int requested) {
  if (requested > 0) return requested;
  static const int env = [] {  // read once per process
    const char* e = std::getenv("MIXQ_NUM_THREADS");
    return e ? std::atoi(e) : 0;
  }();
  if (env > 0) return env;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

namespace {

constexpr int kMaxWorkers = 255;

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
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
      active_ = helpers;
      pending_ = helpers;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    work();
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [this] { return pending_ == 0; });
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
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || (generation_ != seen && id < active_); });
        if (stop_) return;
        seen = generation_;
      }
      work();
      std::lock_guard<std::mutex> lk(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }

  std::mutex call_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t)>* body_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_{0};
  int active_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
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
