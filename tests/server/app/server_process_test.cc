// The specverify-server binary as a subprocess: start-up errors exit non-zero
// naming the flag; SIGTERM/SIGINT drain and exit 0 with no request lost.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "client/greedy_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"

#ifndef SPECVERIFY_SERVER_BINARY
#error "SPECVERIFY_SERVER_BINARY must name the server executable"
#endif

namespace specverify::server {
namespace {

using ::specverify::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;

struct Child {
  pid_t pid = -1;
  int out = -1;  // read ends
  int err = -1;
};

// `env`: NAME=value entries added to this process's environment.
Child Spawn(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  // Built before the fork: the child only execs.
  std::vector<std::string> environment = env;
  for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) return {};
  // Dies with this test process even if the test is killed (issue #15).
  const pid_t pid = ::specverify::testing::ForkTiedToParent();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    std::vector<char*> argv;
    std::string binary = SPECVERIFY_SERVER_BINARY;
    argv.push_back(binary.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execve(binary.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  return Child{pid, out[0], err[0]};
}

std::string ReadAll(int fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) s.append(buf, static_cast<size_t>(n));
  close(fd);
  return s;
}

int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Reads stdout up to the "listening on ..." line; returns what it names
// ("port N" or a unix: address), "" if stdout ends first.
std::string ReadListening(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1) {
    if (c != '\n') {
      line.push_back(c);
      continue;
    }
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "listening on ")) return std::string(rest);
    line.clear();
  }
  return "";
}

// The port of a "listening on port N" line, -1 if none.
int ReadPort(int fd) {
  int port;
  return absl::SimpleAtoi(absl::StripPrefix(ReadListening(fd), "port "), &port) ? port : -1;
}

struct Exit {
  int code;
  std::string err;
};
Exit RunToExit(const std::vector<std::string>& args) {
  Child c = Spawn(args);
  std::string err = ReadAll(c.err);
  ReadAll(c.out);
  return {WaitExit(c.pid), err};
}

// RunToExit for a server expected to stop by itself: one still running after
// `limit` is killed, and its code is -1 (a failure, not a hung test).
Exit RunToExitWithin(const std::vector<std::string>& args, absl::Duration limit) {
  Child c = Spawn(args);
  const absl::Time deadline = absl::Now() + limit;
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(c.pid, &status, WNOHANG)) == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (done == 0) {
    kill(c.pid, SIGKILL);
    waitpid(c.pid, &status, 0);
  }
  std::string err = ReadAll(c.err);
  ReadAll(c.out);
  if (done == 0) return {-1, err};
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), err};
}

// Exit 2 for flags that do not parse: the systemd unit does not restart on
// it (RestartPreventExitStatus=2), since the same flags would fail again.
TEST(ServerProcessTest, UnknownFlagStopsStartUpNamingIt) {
  Exit e = RunToExit({"--listen_address=127.0.0.1:0", "--max_batch_sequencez=8"});
  EXPECT_EQ(e.code, 2);
  EXPECT_THAT(e.err, HasSubstr("unknown flag --max_batch_sequencez"));
}

TEST(ServerProcessTest, InvalidValueStopsStartUpNamingIt) {
  Exit e = RunToExit({"--max_queue_delay_us=soon"});
  EXPECT_EQ(e.code, 2);
  EXPECT_THAT(e.err, HasSubstr("--max_queue_delay_us is \"soon\"; is not an integer"));
  e = RunToExit({"--max_draft_tokens=300"});
  EXPECT_EQ(e.code, 2);
  EXPECT_THAT(e.err, HasSubstr("--max_draft_tokens is 300; must lie in [1, 256]"));
}

TEST(ServerProcessTest, CudaDeviceIsAClearStartUpError) {
  Exit e = RunToExit({"--listen_address=127.0.0.1:0", "--metrics_address=", "--device=cuda:0"});
  // 1, not 2: a GPU missing at start-up may be a driver still loading, which
  // systemd's restarts (bounded by the unit's start limit) wait out.
  EXPECT_EQ(e.code, 1);
  // Without the CUDA executor: "CUDA backend not built yet"; with it but no
  // GPU: the device count. Either way the flag is named.
  EXPECT_THAT(e.err, HasSubstr("--device=cuda:0"));
}

TEST(ServerProcessTest, HelpExitsZero) {
  Exit e = RunToExit({"--help"});
  EXPECT_EQ(e.code, 0);
}

class SignalTest : public ::testing::TestWithParam<int> {};

TEST_P(SignalTest, DrainsInFlightWorkAndExitsZero) {
  Child c = Spawn({"--listen_address=127.0.0.1:0", "--metrics_address=", "--device=auto",
                   "--kv_arena_bytes=8388608", "--max_queue_delay_us=2000000",
                   "--drain_timeout_ms=5000"});
  ASSERT_GT(c.pid, 0);
  const int port = ReadPort(c.out);
  ASSERT_GT(port, 0);
  client::VerifierClientOptions options;
  options.address = absl::StrCat("127.0.0.1:", port);
  auto client = *client::VerifierClient::Create(options);

  GreedyWorkloadOptions w;
  w.num_sequences = 64;
  w.row_bytes = 32;
  auto workload = *GenerateGreedyWorkload(w);
  absl::StatusOr<v1::ServerInfo> info = client->GetServerInfo();
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->backend(), "cpu");

  constexpr int kCalls = 32;
  absl::BlockingCounter answered(kCalls);
  std::atomic<int> ok{0}, unavailable{0}, wrong{0};
  for (int i = 0; i < kCalls; ++i) {
    client::GreedyRequestOptions r;
    r.first_sequence = i;
    r.num_sequences = 2;
    r.kv_return = v1::KV_RETURN_INLINE;
    client->VerifyAsync(*client::BuildGreedyRequest(workload, r),
                        [&, i](absl::StatusOr<v1::VerifyResponse> resp) {
                          client::GreedyCheckOptions check;
                          check.first_sequence = i;
                          check.num_sequences = 2;
                          check.kv_return = v1::KV_RETURN_INLINE;
                          if (resp.ok() && client::CheckGreedyResponse(workload, check, *resp).ok()) {
                            ok.fetch_add(1);
                          } else if (!resp.ok() &&
                                     resp.status().code() == absl::StatusCode::kUnavailable) {
                            unavailable.fetch_add(1);
                          } else {
                            wrong.fetch_add(1);
                          }
                          answered.DecrementCount();
                        });
  }
  // Every request sits in the queue (2 s delay budget) when the signal comes:
  // the drain must flush and answer all of them.
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_EQ(kill(c.pid, GetParam()), 0);
  answered.Wait();
  const std::string err = ReadAll(c.err);
  ReadAll(c.out);
  EXPECT_EQ(WaitExit(c.pid), 0) << err;
  EXPECT_THAT(err, HasSubstr("draining"));
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(unavailable.load(), 0);
  EXPECT_EQ(ok.load(), kCalls);
}

INSTANTIATE_TEST_SUITE_P(TermAndInt, SignalTest, ::testing::Values(SIGTERM, SIGINT));

// The next datagram on `fd` within 10 s ("" if none).
std::string ReceiveNotification(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 10000) != 1) return "";
  char buf[512];
  const ssize_t n = recv(fd, buf, sizeof(buf), 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

TEST(ServerProcessTest, UnderSystemdReportsReadyOnceListeningAndStoppingOnSignal) {
  // systemd's side of Type=notify: a datagram socket named by NOTIFY_SOCKET
  // (abstract, so nothing is left on disk).
  const std::string name = absl::StrCat("@specverify-notify-test-", getpid());
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, name.data(), name.size());
  address.sun_path[0] = '\0';
  ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&address),
                 static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size())),
            0)
      << std::strerror(errno);

  Child c = Spawn({"--listen_address=127.0.0.1:0", "--metrics_address=", "--device=cpu",
                   "--kv_arena_bytes=8388608"},
                  {absl::StrCat("NOTIFY_SOCKET=", name)});
  ASSERT_GT(c.pid, 0);
  const int port = ReadPort(c.out);
  ASSERT_GT(port, 0);
  const std::string ready = ReceiveNotification(fd);
  EXPECT_THAT(ready, HasSubstr("READY=1\n"));
  EXPECT_THAT(ready, HasSubstr(absl::StrCat("STATUS=serving on port ", port, " (backend cpu)")));
  // Ready means serving: a client gets an answer at once.
  client::VerifierClientOptions options;
  options.address = absl::StrCat("127.0.0.1:", port);
  EXPECT_THAT((*client::VerifierClient::Create(options))->GetServerInfo(), IsOk());

  ASSERT_EQ(kill(c.pid, SIGTERM), 0);
  const std::string stopping = ReceiveNotification(fd);
  EXPECT_THAT(stopping, HasSubstr("STOPPING=1\n"));
  EXPECT_THAT(stopping, HasSubstr("STATUS=draining (signal received)"));
  const std::string err = ReadAll(c.err);
  ReadAll(c.out);
  EXPECT_EQ(WaitExit(c.pid), 0) << err;
  close(fd);
}

TEST(ServerProcessTest, AnUnreachableNotifySocketIsLoggedAndServingGoesOn) {
  Child c = Spawn({"--listen_address=127.0.0.1:0", "--metrics_address=", "--device=cpu",
                   "--kv_arena_bytes=8388608"},
                  {"NOTIFY_SOCKET=/nonexistent/specverify-notify"});
  ASSERT_GT(c.pid, 0);
  ASSERT_GT(ReadPort(c.out), 0);
  ASSERT_EQ(kill(c.pid, SIGTERM), 0);
  const std::string err = ReadAll(c.err);
  ReadAll(c.out);
  EXPECT_EQ(WaitExit(c.pid), 0) << err;
  EXPECT_THAT(err, HasSubstr("notifying NOTIFY_SOCKET=/nonexistent/specverify-notify: No such file"));
}

// A client on a connection of its own (not shared with earlier channels).
absl::StatusOr<v1::ServerInfo> InfoOverNewConnection(const std::string& address) {
  client::VerifierClientOptions options;
  options.address = address;
  options.own_connection = true;
  absl::StatusOr<std::unique_ptr<client::VerifierClient>> client =
      client::VerifierClient::Create(options);
  if (!client.ok()) return client.status();
  return (*client)->GetServerInfo();
}

// gRPC alone would let a second server bind the port (SO_REUSEPORT) and take
// half of the new connections; it must exit before touching a device, and
// the first must keep every connection.
TEST(ServerProcessTest, ASecondServerOnATakenPortExitsAndTheFirstKeepsServing) {
  Child first = Spawn({"--listen_address=127.0.0.1:0", "--metrics_address=", "--device=cpu",
                       "--kv_arena_bytes=8388608"});
  ASSERT_GT(first.pid, 0);
  const int port = ReadPort(first.out);
  ASSERT_GT(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);

  Exit second =
      RunToExitWithin({absl::StrCat("--listen_address=", address), "--metrics_address=",
                       "--device=cpu", "--kv_arena_bytes=8388608"},
                      absl::Seconds(20));
  EXPECT_EQ(second.code, 1);
  EXPECT_THAT(second.err, HasSubstr(absl::StrCat("cannot listen on ", address,
                                                 " (--listen_address): another process listens "
                                                 "on that port")));
  EXPECT_THAT(second.err, Not(HasSubstr("backend cpu")));  // no device was set up
  for (int i = 0; i < 8; ++i) EXPECT_THAT(InfoOverNewConnection(address), IsOk()) << i;

  ASSERT_EQ(kill(first.pid, SIGTERM), 0);
  const std::string err = ReadAll(first.err);
  ReadAll(first.out);
  EXPECT_EQ(WaitExit(first.pid), 0) << err;
}

class UnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/specverify-uds-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr) << std::strerror(errno);
    dir_ = pattern;
    path_ = dir_ + "/verifier.sock";
    address_ = "unix:" + path_;
  }
  void TearDown() override {
    unlink(path_.c_str());
    unlink(LockPath().c_str());
    rmdir(dir_.c_str());
  }
  // The server's lock file beside the socket (server/app/socket_path_lock.h).
  std::string LockPath() const { return path_ + ".lock"; }
  bool LockFileExists() const {
    struct stat st {};
    return stat(LockPath().c_str(), &st) == 0;
  }
  std::vector<std::string> ServerArgs() const {
    return {"--listen_address=" + address_, "--metrics_address=", "--device=cpu",
            "--kv_arena_bytes=8388608"};
  }
  Child StartServer() const { return Spawn(ServerArgs()); }
  static void Stop(Child& c) {
    ASSERT_EQ(kill(c.pid, SIGTERM), 0);
    const std::string err = ReadAll(c.err);
    ReadAll(c.out);
    EXPECT_EQ(WaitExit(c.pid), 0) << err;
  }
  bool SocketExists() const {
    struct stat st {};
    return stat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
  }

  std::string dir_, path_, address_;
};

TEST_F(UnixSocketTest, ServesOnThePathAndSaysSo) {
  Child c = StartServer();
  ASSERT_GT(c.pid, 0);
  EXPECT_EQ(ReadListening(c.out), address_);  // not "port 1", gRPC's number for it
  EXPECT_THAT(InfoOverNewConnection(address_), IsOk());
  Stop(c);
}

// TCP for remote workers and probes, the socket for workers on this host:
// one server, one line per address, both answered.
TEST_F(UnixSocketTest, ServesOnAPortAndASocketTogether) {
  Child c = Spawn({"--listen_address=127.0.0.1:0, " + address_, "--metrics_address=",
                   "--device=cpu", "--kv_arena_bytes=8388608"});
  ASSERT_GT(c.pid, 0);
  int port = -1;
  const std::string tcp = ReadListening(c.out);
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripPrefix(tcp, "port "), &port)) << tcp;
  EXPECT_EQ(ReadListening(c.out), address_);
  EXPECT_THAT(InfoOverNewConnection(absl::StrCat("127.0.0.1:", port)), IsOk());
  EXPECT_THAT(InfoOverNewConnection(address_), IsOk());

  // Either address taken stops a second server, which names the one.
  const Exit second = RunToExitWithin(
      {absl::StrCat("--listen_address=127.0.0.1:0,", address_), "--metrics_address=",
       "--device=cpu", "--kv_arena_bytes=8388608"},
      absl::Seconds(20));
  EXPECT_EQ(second.code, 1);
  EXPECT_THAT(second.err, HasSubstr(absl::StrCat("cannot listen on ", address_, " (")));
  Stop(c);
}

// gRPC alone would unlink the first server's socket and bind its own, leaving
// the first unreachable (and later unlinking the second's when it stops).
TEST_F(UnixSocketTest, ASecondServerOnTheSamePathExitsAndTheFirstKeepsItsSocket) {
  Child first = StartServer();
  ASSERT_GT(first.pid, 0);
  ASSERT_EQ(ReadListening(first.out), address_);

  const Exit second = RunToExitWithin(ServerArgs(), absl::Seconds(20));
  EXPECT_EQ(second.code, 1);
  const std::string& err = second.err;
  EXPECT_THAT(err, HasSubstr(absl::StrCat("cannot listen on ", address_,
                                          " (--listen_address): another process accepts "
                                          "connections on that socket")));
  EXPECT_THAT(err, Not(HasSubstr("backend cpu")));
  EXPECT_TRUE(SocketExists());
  EXPECT_THAT(InfoOverNewConnection(address_), IsOk());
  Stop(first);
}

// A socket file left by a server that died (nobody accepts on it) is
// replaced, so a restart after a crash needs no manual clean-up.
TEST_F(UnixSocketTest, AStaleSocketFileIsReplaced) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path_.data(), path_.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
  close(fd);  // the file stays, with no listener behind it
  ASSERT_TRUE(SocketExists());

  Child c = StartServer();
  ASSERT_GT(c.pid, 0);
  EXPECT_EQ(ReadListening(c.out), address_);
  EXPECT_THAT(InfoOverNewConnection(address_), IsOk());
  Stop(c);
}

// Two servers that start on one path at the same moment both find no
// listener there; the lock file is what stops the later one. A process
// holding the lock stands for a server between that check and its bind.
TEST_F(UnixSocketTest, AServerThatFindsTheLockHeldExitsBeforeTouchingADevice) {
  const int held = open(LockPath().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(held, 0) << std::strerror(errno);
  ASSERT_EQ(flock(held, LOCK_EX | LOCK_NB), 0) << std::strerror(errno);

  const Exit second = RunToExitWithin(ServerArgs(), absl::Seconds(20));
  EXPECT_EQ(second.code, 1);
  EXPECT_THAT(second.err, HasSubstr(absl::StrCat("cannot listen on ", address_,
                                                 " (--listen_address): another process holds ",
                                                 LockPath())));
  EXPECT_THAT(second.err, Not(HasSubstr("backend cpu")));
  EXPECT_FALSE(SocketExists());  // it never bound
  close(held);

  Child c = StartServer();  // the lock free again: served
  ASSERT_GT(c.pid, 0);
  EXPECT_EQ(ReadListening(c.out), address_);
  EXPECT_THAT(InfoOverNewConnection(address_), IsOk());
  Stop(c);
}

// A server holds the lock while it serves and removes it with its socket
// when it stops.
TEST_F(UnixSocketTest, AStoppedServerLeavesNeitherSocketNorLockFile) {
  Child c = StartServer();
  ASSERT_GT(c.pid, 0);
  ASSERT_EQ(ReadListening(c.out), address_);
  EXPECT_TRUE(LockFileExists());
  Stop(c);
  EXPECT_FALSE(SocketExists());
  EXPECT_FALSE(LockFileExists());
}

// A server killed outright leaves its socket file and its (unlocked) lock
// file; the next one starts on the same path with no clean-up.
TEST_F(UnixSocketTest, ARestartAfterAKillNeedsNoCleanUp) {
  Child first = StartServer();
  ASSERT_GT(first.pid, 0);
  ASSERT_EQ(ReadListening(first.out), address_);
  ASSERT_EQ(kill(first.pid, SIGKILL), 0);
  EXPECT_EQ(WaitExit(first.pid), 128 + SIGKILL);
  close(first.out);
  close(first.err);
  EXPECT_TRUE(SocketExists());
  EXPECT_TRUE(LockFileExists());

  Child second = StartServer();
  ASSERT_GT(second.pid, 0);
  EXPECT_EQ(ReadListening(second.out), address_);
  EXPECT_THAT(InfoOverNewConnection(address_), IsOk());
  Stop(second);
}

}  // namespace
}  // namespace specverify::server
