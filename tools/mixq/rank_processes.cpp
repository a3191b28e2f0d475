#include "rank_processes.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "mixq/error.hpp"

extern char** environ;

namespace mixq::cli {

void RankProcesses::spawn(int rank, const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ);
    MIXQ_CHECK(rc == 0, ErrorCode::Io, "bench --tp: TP ", tp_, ": starting rank ", rank,
               " (posix_spawn of /proc/self/exe): ", std::strerror(rc));
    procs_.push_back({pid, rank, false});
  }

void RankProcesses::wait_all(int64_t timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    for (;;) {
      bool running = false;
      for (Proc& p : procs_) {
        if (p.reaped) continue;
        int status = 0;
        const pid_t w = waitpid(p.pid, &status, WNOHANG);
        if (w == 0 || (w < 0 && errno == EINTR)) {
          running = true;
          continue;
        }
        p.reaped = true;
        const int err = errno;
        if (w > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
        const std::string how = w < 0 ? std::string("could not be waited for: ") + std::strerror(err)
                                      : describe(status);
        const std::string killed = kill_running();
        MIXQ_FAIL(ErrorCode::Cuda, "bench --tp: TP ", tp_, ": rank ", p.rank, " (pid ", p.pid, ") ",
                  how, " (its own message, if any, is above)",
                  killed.empty() ? std::string() : "; killed the other ranks: " + killed);
      }
      if (!running) return;
      if (std::chrono::steady_clock::now() >= deadline) {
        const std::string killed = kill_running();
        MIXQ_FAIL(ErrorCode::Cuda, "bench --tp: TP ", tp_, ": the rank processes did not finish within ",
                  timeout_s, " s (--tp-timeout); killed the ranks still running: ", killed,
                  " (a hang inside NCCL? NCCL_DEBUG=INFO shows how far each rank got)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

std::string RankProcesses::describe(int status) {
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status))
      return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
             strsignal(WTERMSIG(status)) + ")";
    return "stopped with wait status " + std::to_string(status);
  }

std::string RankProcesses::kill_running() noexcept {
    std::string ranks;
    for (const Proc& p : procs_)
      if (!p.reaped) {
        kill(p.pid, SIGKILL);
        ranks += (ranks.empty() ? "" : ", ") + std::to_string(p.rank);
      }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (Proc& p : procs_)
      while (!p.reaped) {
        const pid_t w = waitpid(p.pid, nullptr, WNOHANG);
        if (w == p.pid || (w < 0 && errno != EINTR) || std::chrono::steady_clock::now() >= until)
          p.reaped = true;  // gone, or left to init when this process exits
        else
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    return ranks;
  }

ResultDir::ResultDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/mixq-bench-tp-XXXXXX";
    MIXQ_CHECK(mkdtemp(templ.data()) != nullptr, ErrorCode::Io, "bench --tp: creating a directory ",
               templ, " for the ranks' results: ", std::strerror(errno));
    path_ = templ;
  }

ResultDir::~ResultDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

}  // namespace mixq::cli
