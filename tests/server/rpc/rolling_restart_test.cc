// A rolling restart of two replicas under load loses no Verify call: the
// client library's default channel (round_robin over both, health-checked,
// Verify resent on UNAVAILABLE and CANCELLED) against real servers on
// loopback, each drained (Shutdown) while eight threads keep calling, the
// first replaced on its own port before the second goes. Every answer is
// checked against the workload's oracle.
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/greedy_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/app/verifier_server.h"
#include "tests/server/testing/controllable_backend.h"
#include "tests/testing/eventually.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::client::BuildGreedyRequest;
using ::specverify::client::CheckGreedyResponse;
using ::specverify::client::GreedyCheckOptions;
using ::specverify::client::GreedyRequestOptions;
using ::specverify::client::VerifierClient;
using ::specverify::server::testing::ControllableBackend;
using ::specverify::testing::Eventually;
using ::specverify::testing::IsOk;

// Reconnections and the replicas' starts on a loaded 2-core CI machine.
constexpr absl::Duration kPatience = absl::Seconds(20);

// How one replica finished its Verify calls, by code.
class FinishedCodes final : public NoopServerMetrics {
 public:
  void OnRequestFinished(RpcMethod method, absl::StatusCode code, absl::Duration) override {
    if (method != RpcMethod::kVerify) return;
    absl::MutexLock lock(&mu_);
    ++finished_[code];
  }
  int count(absl::StatusCode code) {
    absl::MutexLock lock(&mu_);
    return finished_[code];
  }
  std::map<absl::StatusCode, int> all() {
    absl::MutexLock lock(&mu_);
    return finished_;
  }

 private:
  absl::Mutex mu_;
  std::map<absl::StatusCode, int> finished_ ABSL_GUARDED_BY(mu_);
};

struct Replica {
  FinishedCodes metrics;
  std::unique_ptr<VerifierServer> server;
};

class RollingRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GreedyWorkloadOptions w;
    w.num_sequences = 256;
    w.gamma_min = 1;
    w.gamma_max = 8;
    w.alpha = 0.7;
    w.row_bytes = 64;
    w.vocab_size = 32000;
    w.seed = 77;
    workload_ = *GenerateGreedyWorkload(w);
  }
  void TearDown() override {
    stop_.store(true);
    for (std::thread& t : callers_) t.join();
    for (Replica* r : {&a_, &a2_, &b_}) {
      if (r->server != nullptr) (void)r->server->Shutdown(absl::Seconds(5));
    }
  }

  // `port` 0: a free one.
  void StartReplica(Replica& replica, int port) {
    StartReplicaAt(replica, absl::StrCat("127.0.0.1:", port));
  }
  void StartReplicaAt(Replica& replica, const std::string& address) {
    ServerOptions options;
    options.listen_address = address;
    options.metrics_address = "";
    options.max_queue_delay_us = 200;
    options.kv_arena_bytes = 4 << 20;
    absl::StatusOr<std::unique_ptr<VerifierServer>> server =
        VerifierServer::Start(options, &replica.metrics, std::make_unique<ControllableBackend>());
    ASSERT_THAT(server, IsOk());
    replica.server = *std::move(server);
  }

  void StartCallers(const std::string& address, int threads) {
    for (int t = 0; t < threads; ++t) {
      callers_.emplace_back([this, address, t] {
        client::VerifierClientOptions options;
        options.address = address;
        options.load_balancing_policy = "round_robin";
        options.default_deadline = absl::Seconds(20);
        std::unique_ptr<VerifierClient> client = *VerifierClient::Create(options);
        for (int i = 0; !stop_.load(); ++i) {
          const int first = (t * 31 + i) % 250;
          GreedyRequestOptions r;
          r.first_sequence = first;
          r.num_sequences = 2;
          r.kv_return = v1::KV_RETURN_INLINE;
          absl::StatusOr<v1::VerifyResponse> response = client->Verify(*BuildGreedyRequest(workload_, r));
          absl::Status s = response.status();
          if (s.ok()) {
            GreedyCheckOptions c;
            c.first_sequence = first;
            c.num_sequences = 2;
            c.kv_return = v1::KV_RETURN_INLINE;
            s = CheckGreedyResponse(workload_, c, *response, std::nullopt);
          }
          if (s.ok()) {
            answered_.fetch_add(1);
          } else {
            absl::MutexLock lock(&mu_);
            failures_.push_back(s.ToString());
          }
        }
      });
    }
  }

  // Waits until `more` further calls have been answered correctly.
  bool AnsweredAnother(int more) {
    const int target = answered_.load() + more;
    return Eventually([&] { return answered_.load() >= target; }, kPatience);
  }

  GreedyWorkload workload_;
  Replica a_, a2_, b_;
  std::vector<std::thread> callers_;
  std::atomic<bool> stop_{false};
  std::atomic<int> answered_{0};
  absl::Mutex mu_;
  std::vector<std::string> failures_ ABSL_GUARDED_BY(mu_);
};

TEST_F(RollingRestartTest, ReplacingBothReplicasUnderLoadLosesNoCall) {
  StartReplica(a_, 0);
  StartReplica(b_, 0);
  ASSERT_TRUE(a_.server && b_.server);
  const int a_port = a_.server->port();
  StartCallers(absl::StrCat("ipv4:127.0.0.1:", a_port, ",127.0.0.1:", b_.server->port()), 8);
  // Both replicas take calls before the first one goes.
  ASSERT_TRUE(Eventually(
      [&] {
        return a_.metrics.count(absl::StatusCode::kOk) >= 50 && b_.metrics.count(absl::StatusCode::kOk) >= 50;
      },
      kPatience));

  // Replica A: drained under load, then replaced on its own port; the
  // rollout waits until the new one takes calls, as a readiness gate does.
  ASSERT_THAT(a_.server->Shutdown(absl::Seconds(5)), IsOk());
  ASSERT_TRUE(AnsweredAnother(200));
  StartReplica(a2_, a_port);
  ASSERT_TRUE(a2_.server);
  // gRPC reconnects to the replaced port on its own backoff (1 s, then 1.6x).
  ASSERT_TRUE(Eventually([&] { return a2_.metrics.count(absl::StatusCode::kOk) >= 50; }, kPatience));

  // Replica B: drained under load; A's replacement takes everything.
  ASSERT_THAT(b_.server->Shutdown(absl::Seconds(5)), IsOk());
  const int a2_before = a2_.metrics.count(absl::StatusCode::kOk);
  ASSERT_TRUE(AnsweredAnother(300));
  // (B answered the calls it held when its drain began.)
  EXPECT_GE(a2_.metrics.count(absl::StatusCode::kOk), a2_before + 300 - 8);

  stop_.store(true);
  for (std::thread& t : callers_) t.join();
  callers_.clear();
  {
    absl::MutexLock lock(&mu_);
    EXPECT_TRUE(failures_.empty()) << failures_.size() << " calls failed; the first: " << failures_.front();
  }
  // What the drains refused (resent by the clients) and nothing else: a
  // replica answers a call OK or, while draining, UNAVAILABLE.
  for (Replica* r : {&a_, &b_}) {
    std::map<absl::StatusCode, int> finished = r->metrics.all();
    std::cout << "replica refused " << finished[absl::StatusCode::kUnavailable] << " calls while draining, answered "
              << finished[absl::StatusCode::kOk] << "\n";
    finished.erase(absl::StatusCode::kOk);
    finished.erase(absl::StatusCode::kUnavailable);
    EXPECT_TRUE(finished.empty()) << "unexpected server-side codes";
  }
}

// A VerifyStream through a restart of its only server: drained while
// requests keep coming, then a new server on the same socket path after a
// gap. With resend_unanswered every request, sent before, during or after
// the gap, is answered once and right; without it, requests are lost (what
// the option is for).
class StreamRestartTest : public RollingRestartTest,
                          public ::testing::WithParamInterface<int> {};

TEST_P(StreamRestartTest, AResendingStreamRidesThroughARestartOfItsServer) {
  const int resend_unanswered = GetParam();
  char pattern[] = "/tmp/specverify-stream-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string directory = pattern;
  const std::string address = "unix:" + directory + "/verifier.sock";
  StartReplicaAt(a_, address);
  ASSERT_TRUE(a_.server);

  client::VerifierClientOptions options;
  options.address = address;
  std::unique_ptr<VerifierClient> client = *VerifierClient::Create(options);
  absl::Mutex answers_mu;
  std::map<std::string, std::vector<v1::VerifyStreamResponse>> answers;
  absl::StatusOr<std::unique_ptr<client::VerifyStreamSession>> session = client->OpenStream(
      [&](const v1::VerifyStreamResponse& r) {
        absl::MutexLock lock(&answers_mu);
        answers[r.request_id()].push_back(r);
      },
      absl::Seconds(60), resend_unanswered);
  ASSERT_THAT(session, IsOk());
  std::map<std::string, int> first_of;  // request_id -> its first sequence
  const auto send = [&](int count) {
    for (int i = 0; i < count; ++i) {
      const int n = static_cast<int>(first_of.size());
      GreedyRequestOptions r;
      r.first_sequence = (n * 7) % 250;
      r.num_sequences = 2;
      r.kv_return = v1::KV_RETURN_INLINE;
      v1::VerifyRequest request = *BuildGreedyRequest(workload_, r);
      request.set_request_id(absl::StrCat("r", n));
      first_of[request.request_id()] = r.first_sequence;
      const absl::Status sent = (*session)->Send(std::move(request));
      // A plain stream refuses sends once its end is known.
      if (resend_unanswered > 0) EXPECT_THAT(sent, IsOk());
      absl::SleepFor(absl::Milliseconds(2));
    }
  };
  send(50);
  std::thread drain([&] { EXPECT_THAT(a_.server->Shutdown(absl::Seconds(5)), IsOk()); });
  send(100);  // while it drains
  drain.join();
  send(20);  // no server at all
  StartReplicaAt(a2_, address);
  ASSERT_TRUE(a2_.server);
  send(50);
  const absl::Status finished = (*session)->Finish();
  session->reset();

  absl::MutexLock lock(&answers_mu);
  int answered_right = 0;
  for (const auto& [id, first] : first_of) {
    const auto it = answers.find(id);
    if (it == answers.end()) continue;
    EXPECT_EQ(it->second.size(), 1u) << id << " answered more than once";
    const v1::VerifyStreamResponse& answer = it->second.front();
    if (!answer.has_response()) continue;
    GreedyCheckOptions c;
    c.first_sequence = first;
    c.num_sequences = 2;
    c.kv_return = v1::KV_RETURN_INLINE;
    EXPECT_THAT(CheckGreedyResponse(workload_, c, answer.response(), std::nullopt), IsOk()) << id;
    ++answered_right;
  }
  if (resend_unanswered > 0) {
    EXPECT_THAT(finished, IsOk());
    EXPECT_EQ(answered_right, static_cast<int>(first_of.size()));
  } else {
    EXPECT_EQ(finished.code(), absl::StatusCode::kUnavailable) << finished;
    EXPECT_LT(answered_right, static_cast<int>(first_of.size()));
  }
  (void)a2_.server->Shutdown(absl::Seconds(5));
  rmdir(directory.c_str());
}

INSTANTIATE_TEST_SUITE_P(ResendOrNot, StreamRestartTest, ::testing::Values(4, 0),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param > 0 ? std::string("Resending") : std::string("Plain");
                         });

}  // namespace
}  // namespace specverify::server
