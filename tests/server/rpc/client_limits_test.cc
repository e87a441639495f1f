// Per-client limits over real gRPC (issue #15, item 12): the in-process
// server on loopback, two clients on connections of their own (without
// mutual TLS a connection is a client), or on a unix socket, where the
// client's specverify-client-id header names it. The backend is held paused where a
// test needs requests to stay queued, so every count is exact; latency is
// measured by scripts/fairness.sh, not asserted here.
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/greedy_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
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
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kRowBytes = 64;
constexpr int kGamma = 8;
constexpr int kSequencesPerRequest = 4;
// Every draft token accepted: a handle keeps its request's whole upper bound,
// so quota arithmetic in the tests is exact.
constexpr int64_t kRequestArenaBytes = kSequencesPerRequest * kGamma * kRowBytes;

class RejectionCounter final : public NoopServerMetrics {
 public:
  void OnRequestRejected(RejectReason reason) override {
    absl::MutexLock lock(&mu_);
    ++counts_[static_cast<int>(reason)];
  }
  int count(RejectReason reason) {
    absl::MutexLock lock(&mu_);
    return counts_[static_cast<int>(reason)];
  }

 private:
  absl::Mutex mu_;
  int counts_[16] ABSL_GUARDED_BY(mu_) = {};
};

class ClientLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GreedyWorkloadOptions w;
    w.num_sequences = 256;
    w.gamma_min = kGamma;
    w.gamma_max = kGamma;
    w.alpha = 1.0;
    w.row_bytes = kRowBytes;
    w.vocab_size = 32000;
    w.seed = 15;
    workload_ = *GenerateGreedyWorkload(w);
    options_.listen_address = "127.0.0.1:0";
    options_.metrics_address = "";
    options_.max_batch_sequences = 64;
    options_.max_sequences_per_request = 16;
    options_.kv_arena_bytes = 1 << 20;
  }
  void TearDown() override {
    if (server_ != nullptr) {
      backend_->Resume();
      (void)server_->Shutdown(absl::Seconds(5));
    }
    server_.reset();
    if (!socket_directory_.empty()) EXPECT_EQ(rmdir(socket_directory_.c_str()), 0) << socket_directory_;
  }
  void Start() {
    auto backend = std::make_unique<ControllableBackend>();
    backend_ = backend.get();
    absl::StatusOr<std::unique_ptr<VerifierServer>> server =
        VerifierServer::Start(options_, &metrics_, std::move(backend));
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
  }
  std::unique_ptr<VerifierClient> NewClient(const std::string& client_id = "") {
    client::VerifierClientOptions c;
    c.address = server_->local_address();
    c.default_deadline = absl::Seconds(20);
    c.own_connection = true;
    c.client_id = client_id;
    return *VerifierClient::Create(c);
  }
  // A fresh directory for a unix socket, removed with the test (the server
  // removes its socket and lock file when it stops).
  std::string UnixSocketDirectory() {
    char pattern[] = "/tmp/specverify-limits-XXXXXX";
    EXPECT_NE(mkdtemp(pattern), nullptr);
    socket_directory_ = pattern;
    return socket_directory_;
  }
  // Request i: sequences [4i, 4i + 4), rows returned as a handle.
  v1::VerifyRequest Request(int i) {
    GreedyRequestOptions r;
    r.first_sequence = kSequencesPerRequest * i;
    r.num_sequences = kSequencesPerRequest;
    r.kv_return = v1::KV_RETURN_HANDLE;
    return *BuildGreedyRequest(workload_, r);
  }
  absl::Status Check(int i, const v1::VerifyResponse& response) {
    GreedyCheckOptions c;
    c.first_sequence = kSequencesPerRequest * i;
    c.num_sequences = kSequencesPerRequest;
    c.kv_return = v1::KV_RETURN_HANDLE;
    return CheckGreedyResponse(workload_, c, response, std::nullopt);
  }

  GreedyWorkload workload_;
  ServerOptions options_;
  RejectionCounter metrics_;
  ControllableBackend* backend_ = nullptr;
  std::unique_ptr<VerifierServer> server_;
  std::string socket_directory_;
};

// Answers of asynchronous calls, collected.
struct Answers {
  absl::Mutex mu;
  std::vector<absl::StatusOr<v1::VerifyResponse>> answers ABSL_GUARDED_BY(mu);
  size_t size() {
    absl::MutexLock lock(&mu);
    return answers.size();
  }
};

TEST_F(ClientLimitsTest, AFlooderMeetsItsQueueLimitWhileAnotherConnectionIsServed) {
  constexpr int kLimit = 16;  // sequences: 4 requests of 4
  options_.max_queued_sequences_per_client = kLimit;
  Start();
  backend_->Pause();
  std::unique_ptr<VerifierClient> flooder = NewClient();
  std::unique_ptr<VerifierClient> calm = NewClient();
  constexpr int kFlood = 12;
  Answers flood_answers;
  for (int i = 0; i < kFlood; ++i) {
    flooder->VerifyAsync(Request(i), [&flood_answers](absl::StatusOr<v1::VerifyResponse> r) {
      absl::MutexLock lock(&flood_answers.mu);
      flood_answers.answers.push_back(std::move(r));
    });
  }
  // The first two requests run (the backend's two slots, held), the next
  // four fill the flooder's 16 queued sequences, the other six are refused.
  ASSERT_TRUE(Eventually([&] { return flood_answers.size() == 6; }));
  ASSERT_TRUE(Eventually([&] { return server_->batcher().queued_sequences() == kLimit; }));
  {
    absl::MutexLock lock(&flood_answers.mu);
    for (const auto& r : flood_answers.answers) {
      // The client is named by its connection's address.
      EXPECT_THAT(r.status(), StatusIs(absl::StatusCode::kResourceExhausted,
                                       HasSubstr("client \"ipv4:127.0.0.1:")));
      EXPECT_THAT(r.status().message(),
                  HasSubstr("has 16 sequences queued + 4 would exceed "
                            "max_queued_sequences_per_client=16"));
    }
  }
  EXPECT_EQ(metrics_.count(RejectReason::kClientQueueLimit), 6);
  EXPECT_EQ(metrics_.count(RejectReason::kQueueFull), 0);

  // The other connection is its own client: queued, not refused.
  absl::StatusOr<v1::VerifyResponse> calm_answer;
  std::atomic<bool> calm_done{false};
  calm->VerifyAsync(Request(40), [&](absl::StatusOr<v1::VerifyResponse> r) {
    calm_answer = std::move(r);
    calm_done.store(true);
  });
  ASSERT_TRUE(Eventually(
      [&] { return server_->batcher().queued_sequences() == kLimit + kSequencesPerRequest; }));
  backend_->Resume();
  ASSERT_TRUE(Eventually([&] { return calm_done.load(); }));
  ASSERT_THAT(calm_answer, IsOk());
  EXPECT_THAT(Check(40, *calm_answer), IsOk());
  ASSERT_TRUE(Eventually([&] { return flood_answers.size() == kFlood; }));
  int ok = 0;
  {
    absl::MutexLock lock(&flood_answers.mu);
    for (const auto& r : flood_answers.answers) ok += r.ok();
  }
  EXPECT_EQ(ok, kFlood - 6);
  EXPECT_EQ(metrics_.count(RejectReason::kClientQueueLimit), 6);
  // Nothing queued any more: the flooder is served again.
  ASSERT_THAT(flooder->Verify(Request(50)), IsOk());
}

TEST_F(ClientLimitsTest, AFlooderMeetsItsArenaQuotaUntilItReleasesAHandle) {
  options_.max_arena_bytes_per_client = 2 * kRequestArenaBytes;
  Start();
  std::unique_ptr<VerifierClient> flooder = NewClient();
  std::unique_ptr<VerifierClient> calm = NewClient();
  absl::StatusOr<v1::VerifyResponse> first = flooder->Verify(Request(0));
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(Check(0, *first), IsOk());
  ASSERT_EQ(first->kv().num_rows() * kRowBytes, kRequestArenaBytes);
  ASSERT_THAT(flooder->Verify(Request(1)), IsOk());
  // Two live handles hold the whole quota.
  EXPECT_THAT(flooder->Verify(Request(2)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr(absl::StrCat("holds ", 2 * kRequestArenaBytes,
                                              " KV arena bytes"))));
  EXPECT_THAT(flooder->Verify(Request(2)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr(absl::StrCat("max_arena_bytes_per_client=",
                                              2 * kRequestArenaBytes))));
  EXPECT_EQ(metrics_.count(RejectReason::kClientArenaQuota), 2);
  // Another connection has its own quota.
  absl::StatusOr<v1::VerifyResponse> other = calm->Verify(Request(3));
  ASSERT_THAT(other, IsOk());
  EXPECT_THAT(Check(3, *other), IsOk());
  // Releasing one handle (from any connection: a handle is a bearer token
  // without mutual TLS) gives its bytes back to the client that made it.
  ASSERT_THAT(calm->ReleaseKv(first->kv().id()), IsOk());
  absl::StatusOr<v1::VerifyResponse> again = flooder->Verify(Request(2));
  ASSERT_THAT(again, IsOk());
  EXPECT_THAT(Check(2, *again), IsOk());
  EXPECT_EQ(metrics_.count(RejectReason::kClientArenaQuota), 2);
}

// On a unix socket every client is the peer "unix:" to gRPC; the client
// library names each VerifierClient (the specverify-client-id header), and
// the server keeps an account per name: two clients with names of their own
// have a quota each, two that share a name share one.
TEST_F(ClientLimitsTest, UnixSocketClientsAreAccountedByTheirClientIds) {
  const std::string directory = UnixSocketDirectory();
  options_.listen_address = "unix:" + directory + "/verifier.sock";
  options_.max_arena_bytes_per_client = 2 * kRequestArenaBytes;
  Start();
  std::unique_ptr<VerifierClient> flooder = NewClient();
  std::unique_ptr<VerifierClient> calm = NewClient();
  ASSERT_NE(flooder->options().client_id, calm->options().client_id);
  ASSERT_THAT(flooder->Verify(Request(0)), IsOk());
  ASSERT_THAT(flooder->Verify(Request(1)), IsOk());
  EXPECT_THAT(flooder->Verify(Request(2)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr(absl::StrCat("client \"unix:client-id=", flooder->options().client_id,
                                              "\" holds ", 2 * kRequestArenaBytes, " KV arena bytes"))));
  absl::StatusOr<v1::VerifyResponse> other = calm->Verify(Request(3));
  ASSERT_THAT(other, IsOk());
  EXPECT_THAT(Check(3, *other), IsOk());

  std::unique_ptr<VerifierClient> worker_a = NewClient("worker-a");
  std::unique_ptr<VerifierClient> worker_a_again = NewClient("worker-a");
  ASSERT_THAT(worker_a->Verify(Request(4)), IsOk());
  ASSERT_THAT(worker_a_again->Verify(Request(5)), IsOk());
  EXPECT_THAT(worker_a->Verify(Request(6)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("client \"unix:client-id=worker-a\" holds")));
  EXPECT_EQ(metrics_.count(RejectReason::kClientArenaQuota), 2);
}

// A name outside the header's alphabet is refused, naming the header, on
// unary calls and on each request of a stream; the client library refuses
// it before any call. Over TCP the server does not read the header.
TEST_F(ClientLimitsTest, AMalformedClientIdIsRefusedNamingTheHeader) {
  const std::string directory = UnixSocketDirectory();
  options_.listen_address = "unix:" + directory + "/verifier.sock";
  Start();
  auto stub = v1::Verifier::NewStub(grpc::CreateChannel(server_->local_address(), grpc::InsecureChannelCredentials()));
  constexpr absl::string_view kWhy = "specverify-client-id has character code 32 at offset 3";
  {
    grpc::ClientContext context;
    context.AddMetadata("specverify-client-id", "bad id");
    v1::VerifyResponse response;
    const grpc::Status status = stub->Verify(&context, Request(0), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr(kWhy));
  }
  {
    grpc::ClientContext context;
    context.AddMetadata("specverify-client-id", "bad id");
    auto stream = stub->VerifyStream(&context);
    v1::VerifyRequest request = Request(1);
    request.set_request_id("r1");
    ASSERT_TRUE(stream->Write(request));
    ASSERT_TRUE(stream->WritesDone());
    v1::VerifyStreamResponse answer;
    ASSERT_TRUE(stream->Read(&answer));
    EXPECT_EQ(answer.request_id(), "r1");
    EXPECT_EQ(answer.error().code(), static_cast<int32_t>(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(answer.error().message(), HasSubstr(kWhy));
    EXPECT_TRUE(stream->Finish().ok());
  }
  client::VerifierClientOptions bad;
  bad.address = server_->local_address();
  bad.client_id = "bad id";
  EXPECT_THAT(VerifierClient::Create(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(absl::StrCat("client_id: metadata ", kWhy))));
}

TEST_F(ClientLimitsTest, TheClientIdHeaderIsNotReadOverTcp) {
  Start();
  auto stub = v1::Verifier::NewStub(grpc::CreateChannel(server_->local_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.AddMetadata("specverify-client-id", "bad id");
  v1::VerifyResponse response;
  const grpc::Status status = stub->Verify(&context, Request(0), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(Check(0, response), IsOk());
}

TEST_F(ClientLimitsTest, ServerInfoReportsThePerClientLimits) {
  options_.max_queued_sequences_per_client = 32;
  options_.max_arena_bytes_per_client = 12345;
  Start();
  absl::StatusOr<v1::ServerInfo> info = NewClient()->GetServerInfo();
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->limits().max_queued_sequences_per_client(), 32);
  EXPECT_EQ(info->limits().max_arena_bytes_per_client(), 12345);
}

}  // namespace
}  // namespace specverify::server
