// gRPC 1.51 tears down its process-wide callback queue when the last channel
// or server that used it is destroyed, racing the queue's own threads (an
// abort seen in CI). The server and the client library pin the queue
// (proto/runtime/callback_queue_pin.h), so destroying them never tears it
// down. gRPC names the queue's polling threads "nexting_thread"; they exist
// exactly while the queue does, which is what these tests observe. Each test
// runs in a process of its own (CTest), starting with no queue.
#include <dirent.h>

#include <fstream>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/verifier_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/runtime/callback_queue_pin.h"
#include "server/app/verifier_server.h"
#include "tests/testing/status_matchers.h"

namespace specverify {
namespace {

using ::specverify::testing::IsOk;

constexpr char kNeedsAFreshProcess[] =
    "the callback queue already runs in this process: run this test in a process of "
    "its own (as CTest does)";

int NextingThreads() {
  int count = 0;
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return -1;
  while (const dirent* task = readdir(tasks)) {
    if (task->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + task->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("nexting", 0) == 0) ++count;
  }
  closedir(tasks);
  return count;
}

// The queue's threads name themselves once running, each in its own time:
// wait until some run and their number has held for 200 ms.
int NextingThreadsOnceStarted() {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  int count = NextingThreads();
  absl::Time stable_since = absl::Now();
  while (absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
    const int now = NextingThreads();
    if (now != count) {
      count = now;
      stable_since = absl::Now();
    } else if (count > 0 && absl::Now() - stable_since >= absl::Milliseconds(200)) {
      break;
    }
  }
  return count;
}

// A channel that cannot connect, one callback call on it, then destroyed.
void OneCallbackCallOnAThrowawayChannel() {
  grpc_runtime::JoinCallbackQueue(
      grpc::CreateChannel("unix:/nonexistent/specverify-test", grpc::InsecureChannelCredentials()));
}

TEST(CallbackQueuePinTest, APinnedQueueOutlivesEveryChannelAndPinningTwiceIsHarmless) {
  grpc_runtime::PinCallbackQueue();
  const int threads = NextingThreadsOnceStarted();
  ASSERT_GT(threads, 0) << "the pin's callback call should have started the queue";
  grpc_runtime::PinCallbackQueue();
  OneCallbackCallOnAThrowawayChannel();
  OneCallbackCallOnAThrowawayChannel();
  EXPECT_EQ(NextingThreadsOnceStarted(), threads) << "one queue, still running";
}

// What CI tripped over: a real server and the client library, an
// asynchronous Verify, then both destroyed. Neither tears the queue down
// (with PinCallbackQueue made a no-op this fails: the last one destroyed
// joins the queue's threads).
TEST(CallbackQueuePinTest, ServerAndClientLibraryDestroyedAfterAsyncCallsLeaveTheQueueRunning) {
  if (NextingThreads() != 0) GTEST_SKIP() << kNeedsAFreshProcess;
  {
    server::ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.metrics_address = "";
    options.device = "cpu";
    options.cpu_threads = 1;
    options.kv_arena_bytes = 1 << 20;
    server::NoopServerMetrics metrics;
    absl::StatusOr<std::unique_ptr<server::VerifierServer>> server =
        server::VerifierServer::Start(options, &metrics);
    ASSERT_THAT(server, IsOk());
    client::VerifierClientOptions client_options;
    client_options.address = (*server)->local_address();
    client_options.default_deadline = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<client::VerifierClient>> client =
        client::VerifierClient::Create(client_options);
    ASSERT_THAT(client, IsOk());
    absl::Notification answered;
    absl::Status answer;
    (*client)->VerifyAsync(v1::VerifyRequest(),  // no sequences: answered INVALID_ARGUMENT
                           [&](absl::StatusOr<v1::VerifyResponse> a) {
                             answer = a.status();
                             answered.Notify();
                           });
    answered.WaitForNotification();
    EXPECT_EQ(answer.code(), absl::StatusCode::kInvalidArgument) << answer;
    EXPECT_GT(NextingThreadsOnceStarted(), 0);
    EXPECT_THAT((*server)->Shutdown(absl::Seconds(5)), IsOk());
  }
  EXPECT_GT(NextingThreads(), 0) << "destroying the server and client tore the queue down";
}

}  // namespace
}  // namespace specverify
