// A small persistent thread pool (the ggml way: workers spin a short while, then sleep on a
// condition variable between calls; tasks are claimed from an atomic counter, the calling thread
// works too and spins on the helpers' end before it sleeps).
#pragma once

#include <cstdint>
#include <functional>

namespace mixq::cpu {

// The CPUs this process may run on: its affinity mask where the OS reports one (taskset, cgroup
// cpusets), else std::thread::hardware_concurrency() (at least 1).
int available_cpus();

// Threads to use for a call: `requested` when > 0, else MIXQ_NUM_THREADS when set (> 0), else
// available_cpus() (both read once per process).
int resolve_num_threads(int requested);

// Runs body(task) for task in [0, n_tasks) on up to `threads` threads (the caller included) and
// returns when all are done. Calls from different threads are serialized; a call from inside a
// task runs its tasks inline on that thread. An exception thrown by a task is rethrown here (the
// first one) after all tasks finished.
void parallel_for(int threads, int64_t n_tasks, const std::function<void(int64_t)>& body);

}  // namespace mixq::cpu
