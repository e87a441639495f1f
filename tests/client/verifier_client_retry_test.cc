// The client library's Verify retry policy (VerifierClientOptions::
// verify_max_attempts), against a scripted Verifier service on loopback: the
// service answers each attempt with the next status of its script, so which
// refusals are resent, how often, and which are not, is checked exactly;
// and wait_for_ready, against a server that comes up while a call waits.
// (tests/server/rpc/rolling_restart_test.cc drains a real replica under load.)
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "specverify/v1/verifier.grpc.pb.h"
#include "tests/testing/status_matchers.h"

namespace specverify::client {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

// Answers Verify attempt n with script[n] (OK once the script is spent) and
// records the size of each request it saw.
class ScriptedVerifier final : public v1::Verifier::Service {
 public:
  explicit ScriptedVerifier(std::vector<grpc::StatusCode> script) : script_(std::move(script)) {}

  grpc::Status Verify(grpc::ServerContext*, const v1::VerifyRequest* request,
                      v1::VerifyResponse* response) override {
    absl::MutexLock lock(&mu_);
    const size_t attempt = request_bytes_.size();
    request_bytes_.push_back(request->ByteSizeLong());
    if (attempt < script_.size() && script_[attempt] != grpc::StatusCode::OK) {
      return grpc::Status(script_[attempt], "scripted refusal");
    }
    response->set_request_id(request->request_id());
    return grpc::Status::OK;
  }
  std::vector<size_t> request_bytes() {
    absl::MutexLock lock(&mu_);
    return request_bytes_;
  }

 private:
  const std::vector<grpc::StatusCode> script_;
  absl::Mutex mu_;
  std::vector<size_t> request_bytes_ ABSL_GUARDED_BY(mu_);
};

class VerifierClientRetryTest : public ::testing::Test {
 protected:
  void Serve(std::vector<grpc::StatusCode> script) {
    service_ = std::make_unique<ScriptedVerifier>(std::move(script));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.SetMaxReceiveMessageSize(64 << 20);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }
  std::unique_ptr<VerifierClient> Client(int attempts) {
    VerifierClientOptions options;
    options.address = address_;
    options.verify_max_attempts = attempts;
    options.default_deadline = absl::Seconds(20);
    absl::StatusOr<std::unique_ptr<VerifierClient>> client = VerifierClient::Create(options);
    EXPECT_THAT(client, IsOk());
    return client.ok() ? *std::move(client) : nullptr;
  }
  static v1::VerifyRequest Request(int64_t payload_bytes = 0) {
    v1::VerifyRequest request;
    request.set_request_id("r1");
    // Size only: the scripted service reads nothing but the id.
    if (payload_bytes > 0) request.add_sequences()->mutable_draft_kv()->mutable_data()->resize(payload_bytes, 'x');
    return request;
  }

  std::unique_ptr<ScriptedVerifier> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(VerifierClientRetryTest, RefusalsBeforeExecutionAreResentUntilAnswered) {
  // UNAVAILABLE: a draining replica; CANCELLED: what gRPC's shutdown gives a
  // call that never reached a handler (grpc/grpc#41785).
  Serve({grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::CANCELLED, grpc::StatusCode::UNAVAILABLE});
  std::unique_ptr<VerifierClient> client = Client(/*attempts=*/4);
  absl::StatusOr<v1::VerifyResponse> r = client->Verify(Request());
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->request_id(), "r1");
  EXPECT_EQ(service_->request_bytes().size(), 4u);
}

TEST_F(VerifierClientRetryTest, AttemptsStopAtTheLimitWithTheLastRefusal) {
  Serve({grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::CANCELLED,
         grpc::StatusCode::OK});
  std::unique_ptr<VerifierClient> client = Client(/*attempts=*/3);
  EXPECT_THAT(client->Verify(Request()), StatusIs(absl::StatusCode::kCancelled, HasSubstr("scripted")));
  EXPECT_EQ(service_->request_bytes().size(), 3u);
}

TEST_F(VerifierClientRetryTest, OneAttemptTurnsRetriesOff) {
  Serve({grpc::StatusCode::UNAVAILABLE});
  std::unique_ptr<VerifierClient> client = Client(/*attempts=*/1);
  EXPECT_THAT(client->Verify(Request()), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("scripted")));
  EXPECT_EQ(service_->request_bytes().size(), 1u);
}

TEST_F(VerifierClientRetryTest, AnswersFromExecutionAreNeverResent) {
  for (grpc::StatusCode code : {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::RESOURCE_EXHAUSTED,
                                grpc::StatusCode::INTERNAL, grpc::StatusCode::NOT_FOUND}) {
    SCOPED_TRACE(code);
    Serve({code});
    std::unique_ptr<VerifierClient> client = Client(/*attempts=*/4);
    EXPECT_THAT(client->Verify(Request()), StatusIs(static_cast<absl::StatusCode>(code), HasSubstr("scripted")));
    EXPECT_EQ(service_->request_bytes().size(), 1u);
    server_->Shutdown();
    server_.reset();
  }
}

TEST_F(VerifierClientRetryTest, RequestsLargerThanGrpcsDefaultRetryBufferAreResent) {
  // gRPC commits a call whose request exceeds 256 KiB to its first attempt
  // unless the channel raises the per-call retry buffer; sampled requests
  // with rows inline are megabytes.
  Serve({grpc::StatusCode::UNAVAILABLE});
  std::unique_ptr<VerifierClient> client = Client(/*attempts=*/2);
  const int64_t kPayload = 4 << 20;
  ASSERT_THAT(client->Verify(Request(kPayload)), IsOk());
  const std::vector<size_t> seen = service_->request_bytes();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[1], static_cast<size_t>(kPayload));
  EXPECT_EQ(seen[0], seen[1]);
}

// A unix: socket path nothing listens on yet, in a directory of its own
// (removed with it): a released TCP port could be taken by another test's
// server in the two seconds before the test binds it.
class UnusedSocketPath {
 public:
  UnusedSocketPath() {
    char pattern[] = "/tmp/specverify-retry-XXXXXX";
    if (mkdtemp(pattern) != nullptr) directory_ = pattern;
  }
  ~UnusedSocketPath() {
    if (directory_.empty()) return;
    unlink(path().c_str());
    rmdir(directory_.c_str());
  }
  bool ok() const { return !directory_.empty(); }
  std::string path() const { return directory_ + "/verifier.sock"; }

 private:
  std::string directory_;
};

// A worker beside a single server that restarts: with wait_for_ready the
// call waits for the server to come up (within its deadline) and gets its
// answer; without, it fails UNAVAILABLE at once.
TEST(VerifierClientWaitForReadyTest, ACallWaitsForTheServerToComeUpOnlyWhenAsked) {
  const UnusedSocketPath socket_path;
  ASSERT_TRUE(socket_path.ok()) << std::strerror(errno);
  VerifierClientOptions options;
  options.address = "unix:" + socket_path.path();
  options.default_deadline = absl::Seconds(20);
  options.own_connection = true;  // no connection state shared between the two clients
  v1::VerifyRequest request;
  request.set_request_id("r1");

  absl::StatusOr<std::unique_ptr<VerifierClient>> fail_fast = VerifierClient::Create(options);
  ASSERT_THAT(fail_fast, IsOk());
  const absl::Time start = absl::Now();
  EXPECT_THAT((*fail_fast)->Verify(request), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));

  options.wait_for_ready = true;
  absl::StatusOr<std::unique_ptr<VerifierClient>> waiting = VerifierClient::Create(options);
  ASSERT_THAT(waiting, IsOk());
  absl::StatusOr<v1::VerifyResponse> answer;
  std::thread call([&] { answer = (*waiting)->Verify(request); });
  // Longer than the retries' backoff (0.01-0.2 s, 4 attempts): a
  // fail-fast call would have failed by now.
  absl::SleepFor(absl::Seconds(2));
  ScriptedVerifier service({});
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  call.join();  // bounded by the call's deadline should the server not come up
  ASSERT_NE(server, nullptr);
  ASSERT_THAT(answer, IsOk());
  EXPECT_EQ(answer->request_id(), "r1");
  EXPECT_EQ(service.request_bytes().size(), 1u);
  server->Shutdown();
}

TEST(VerifierClientOptionsTest, AttemptsOutsideGrpcsRangeAreRefusedByName) {
  for (int attempts : {0, -1, 6}) {
    VerifierClientOptions options;
    options.address = "127.0.0.1:1";
    options.verify_max_attempts = attempts;
    EXPECT_THAT(VerifierClient::Create(options),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("verify_max_attempts")));
  }
}

TEST(VerifierClientOptionsTest, ServiceConfigHealthChecksOnlyUnderRoundRobin) {
  VerifierClientOptions options;
  EXPECT_THAT(DefaultServiceConfigJson(options), ::testing::Not(HasSubstr("healthCheckConfig")));
  EXPECT_THAT(DefaultServiceConfigJson(options), HasSubstr(R"("retryableStatusCodes":["UNAVAILABLE","CANCELLED"])"));
  options.load_balancing_policy = "round_robin";
  EXPECT_THAT(DefaultServiceConfigJson(options),
              HasSubstr(R"("healthCheckConfig":{"serviceName":"specverify.v1.Verifier"})"));
  options.verify_max_attempts = 1;
  EXPECT_THAT(DefaultServiceConfigJson(options), ::testing::Not(HasSubstr("retryPolicy")));
  EXPECT_THAT(DefaultServiceConfigJson(options), ::testing::Not(HasSubstr("waitForReady")));
  options.wait_for_ready = true;
  EXPECT_THAT(DefaultServiceConfigJson(options),
              HasSubstr(R"({"name":[{"service":"specverify.v1.Verifier"}],"waitForReady":true})"));
  EXPECT_THAT(DefaultServiceConfigJson(options),
              HasSubstr(R"({"name":[{"service":"specverify.v1.Verifier","method":"Verify"}],"waitForReady":true)"));
}

}  // namespace
}  // namespace specverify::client
