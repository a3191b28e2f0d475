// The child processes of `mixq bench --tp --launch procs` (bench_tp.cpp): one per rank, started
// from this executable and killed together, and the private directory of their result files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mixq::cli {

// --launch procs: the rank processes of one TP size, started from this executable
// (/proc/self/exe) and waited for with a deadline. The destructor kills (SIGKILL) any still
// running, so that no way out of the parent leaves a rank behind holding a GPU.
class RankProcesses {
 public:
  explicit RankProcesses(int64_t tp) : tp_(tp) {}
  ~RankProcesses() { kill_running(); }
  RankProcesses(const RankProcesses&) = delete;
  RankProcesses& operator=(const RankProcesses&) = delete;

  // Starts rank `rank` with arguments `args` (args[0] is its argv[0]) and this process's own
  // environment (environ): the children keep every NCCL_* variable and CUDA_MODULE_LOADING.
  void spawn(int rank, const std::vector<std::string>& args);
  // Returns once every rank exited with status 0. A rank that fails or dies makes the others be
  // killed (they would wait for it in a collective forever) and throws naming it; so does the
  // deadline of timeout_s seconds.
  void wait_all(int64_t timeout_s);

 private:
  struct Proc {
    pid_t pid;
    int rank;
    bool reaped;
  };
  static std::string describe(int status);
  // SIGKILL to every rank not yet reaped, then reap them (10 s at most: a process inside the GPU
  // driver can take a moment to go). Returns their ranks, "0, 2".
  std::string kill_running() noexcept;

  int64_t tp_;
  std::vector<Proc> procs_;
};

// A private directory for the rank processes' result files, removed with everything in it (a
// rank killed while writing may leave its temporary file there).
class ResultDir {
 public:
  ResultDir();
  ~ResultDir();
  ResultDir(const ResultDir&) = delete;
  ResultDir& operator=(const ResultDir&) = delete;
  std::string file(int rank) const { return path_ + "/rank" + std::to_string(rank) + ".txt"; }

 private:
  std::string path_;
};

}  // namespace mixq::cli
