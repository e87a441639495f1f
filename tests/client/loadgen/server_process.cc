#include "tests/client/loadgen/server_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/subprocess.h"

namespace specverify::testing {

absl::StatusOr<ServerProcess> ServerProcess::Start(const std::string& binary,
                                                   const std::vector<std::string>& args,
                                                   double timeout_s) {
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  std::vector<std::string> argv_storage = {binary, "--listen_address=127.0.0.1:0"};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Dies with the test process even if ~ServerProcess never runs (issue #15).
  const pid_t pid = ForkTiedToParent();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int port = 0;
  while (port == 0 && std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buffer[256];
    const ssize_t n = read(out[0], buffer, sizeof(buffer));
    if (n <= 0) break;  // the child exited
    text.append(buffer, static_cast<size_t>(n));
    const size_t at = text.find("listening on port ");
    const size_t end = at == std::string::npos ? at : text.find('\n', at);
    if (end != std::string::npos) {
      // A line that does not parse leaves port at 0: reported below with the text.
      if (!absl::SimpleAtoi(text.substr(at + 18, end - at - 18), &port)) port = 0;
    }
  }
  // The read end stays open while the server runs (closing it would turn a
  // later line on its stdout into SIGPIPE); the server prints one line.
  if (port == 0) {
    close(out[0]);
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return absl::UnavailableError(absl::StrCat(binary, " did not report its port; stdout: ", text));
  }
  return ServerProcess(pid, port, out[0]);
}

ServerProcess::ServerProcess(ServerProcess&& other) noexcept
    : pid_(other.pid_), port_(other.port_), stdout_fd_(other.stdout_fd_) {
  other.pid_ = -1;
  other.stdout_fd_ = -1;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

absl::StatusOr<int> ServerProcess::Stop(double timeout_s) {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
      return absl::DeadlineExceededError("the server did not stop after SIGTERM");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  if (!WIFEXITED(status)) {
    return absl::InternalError(absl::StrCat("the server died of signal ", WTERMSIG(status)));
  }
  return WEXITSTATUS(status);
}

int PickFreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

}  // namespace specverify::testing
