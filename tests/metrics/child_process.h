// A subprocess for integration tests (the server, a Prometheus server): its
// output goes to a log file that the test prints on failure; it is stopped
// with SIGTERM (then SIGKILL after a grace period) when the handle dies, so a
// failing test leaves no process behind; if the test process itself dies, the
// kernel kills the child (ForkTiedToParent).
#ifndef SPECVERIFY_TESTS_METRICS_CHILD_PROCESS_H_
#define SPECVERIFY_TESTS_METRICS_CHILD_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/testing/subprocess.h"

namespace specverify::testing {

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { Stop(); }

  absl::Status Start(const std::vector<std::string>& argv, const std::string& log_path) {
    log_path_ = log_path;
    command_ = absl::StrJoin(argv, " ");
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // Killed with this process even when the destructor never runs (a
    // crash or SIGKILL of the test; issue #15).
    pid_ = ForkTiedToParent();
    if (pid_ < 0) return absl::InternalError("fork() failed");
    if (pid_ == 0) {
      const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
        ::close(fd);
      }
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    return absl::OkStatus();
  }

  // True while the process runs (reaps it once it has exited).
  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_status_ = status;
      return false;
    }
    return true;
  }

  // SIGTERM, up to `grace` for a clean exit, then SIGKILL. Returns the
  // process's wait status (or -1 if it was not running).
  int Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000)) {
    if (!Running()) return exit_status_;
    ::kill(pid_, SIGTERM);
    const auto give_up = std::chrono::steady_clock::now() + grace;
    while (std::chrono::steady_clock::now() < give_up) {
      if (!Running()) return exit_status_;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_status_ = status;
    return status;
  }

  // The command and the tail of its log, for failure messages.
  std::string Describe() const {
    std::ifstream in(log_path_);
    std::stringstream log;
    log << in.rdbuf();
    std::string text = log.str();
    if (text.size() > 4000) text = "..." + text.substr(text.size() - 4000);
    return absl::StrCat("$ ", command_, "\n", text);
  }

 private:
  pid_t pid_ = -1;
  int exit_status_ = -1;
  std::string log_path_;
  std::string command_;
};

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_METRICS_CHILD_PROCESS_H_
