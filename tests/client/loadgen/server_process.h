// Runs specverify-server as a child process for the load generator's
// integration tests: starts it on a free loopback port, reads the port from
// its "listening on port N" line, and stops it with SIGTERM, returning the
// exit status so tests can require a clean drain.
#ifndef SPECVERIFY_TESTS_CLIENT_LOADGEN_SERVER_PROCESS_H_
#define SPECVERIFY_TESTS_CLIENT_LOADGEN_SERVER_PROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace specverify::testing {

class ServerProcess {
 public:
  // Starts `binary` with `args` plus --listen_address=127.0.0.1:0 and waits
  // (up to `timeout_s`) for its port. Its stderr goes to this process's.
  static absl::StatusOr<ServerProcess> Start(const std::string& binary,
                                             const std::vector<std::string>& args,
                                             double timeout_s = 30.0);
  ServerProcess(ServerProcess&& other) noexcept;
  ServerProcess& operator=(ServerProcess&&) = delete;
  ~ServerProcess();  // SIGKILL if still running

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

  // SIGTERM, then waits up to `timeout_s`; the exit code, or an error if it
  // died of a signal or did not stop in time (then it is killed).
  absl::StatusOr<int> Stop(double timeout_s = 20.0);

 private:
  ServerProcess(int pid, int port, int stdout_fd)
      : pid_(pid), port_(port), stdout_fd_(stdout_fd) {}
  int pid_ = -1;
  int port_ = 0;
  int stdout_fd_ = -1;
};

// A TCP port on 127.0.0.1 that was free a moment ago (for servers whose port
// 0 cannot be read back, such as the metrics endpoint).
int PickFreeLoopbackPort();

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_CLIENT_LOADGEN_SERVER_PROCESS_H_
