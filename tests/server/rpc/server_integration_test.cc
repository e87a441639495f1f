// End-to-end tests: the real server (in-process, loopback, a free port) and
// the real client library over gRPC. Every answer is checked against the
// workload generator's oracle, KV bytes included.
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/greedy_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kernels/workload/random.h"
#include "server/app/verifier_server.h"
#include "tests/server/testing/controllable_backend.h"
#include "tests/testing/eventually.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::client::AsBytes;
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

// Counts how the server finished each Verify call, by code.
class CountingMetrics final : public NoopServerMetrics {
 public:
  void OnRequestFinished(RpcMethod method, absl::StatusCode code, absl::Duration) override {
    if (method != RpcMethod::kVerify) return;
    absl::MutexLock lock(&mu_);
    ++finished_[code];
  }
  void OnPayloadHostCopy(HostCopyDirection direction, int64_t bytes) override {
    (direction == HostCopyDirection::kIn ? copied_in_ : copied_out_) += bytes;
  }
  void SetServing(bool serving) override { serving_.store(serving ? 1 : 0); }
  int64_t copied_in() const { return copied_in_.load(); }
  int64_t copied_out() const { return copied_out_.load(); }
  std::map<absl::StatusCode, int> finished() {
    absl::MutexLock lock(&mu_);
    return finished_;
  }
  // -1 until the server reports, then 1 (SERVING) or 0.
  int serving() const { return serving_.load(); }

 private:
  absl::Mutex mu_;
  std::map<absl::StatusCode, int> finished_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> serving_{-1};
  std::atomic<int64_t> copied_in_{0};
  std::atomic<int64_t> copied_out_{0};
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GreedyWorkloadOptions w;
    w.num_sequences = 512;
    w.gamma_min = 1;
    w.gamma_max = 12;
    w.alpha = 0.7;
    w.row_bytes = kRowBytes;
    w.vocab_size = 32000;
    w.seed = 2024;
    workload_ = *GenerateGreedyWorkload(w);
    options_.listen_address = "127.0.0.1:0";
    options_.metrics_address = "";
    options_.max_queue_delay_us = 300;
    options_.max_batch_sequences = 64;
    options_.max_sequences_per_request = 16;
    options_.kv_arena_bytes = 16 << 20;  // small: the arena is zeroed at start-up
  }
  void TearDown() override {
    if (server_ != nullptr) {
      backend_->Resume();
      (void)server_->Shutdown(absl::Seconds(5));
    }
  }

  void Start(bool noop = false) {
    auto backend = std::make_unique<ControllableBackend>(noop);
    backend_ = backend.get();
    absl::StatusOr<std::unique_ptr<VerifierServer>> server =
        VerifierServer::Start(options_, &metrics_, std::move(backend));
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    client_ = NewClient();
  }
  std::unique_ptr<VerifierClient> NewClient() {
    client::VerifierClientOptions c;
    c.address = server_->local_address();
    c.default_deadline = absl::Seconds(20);
    return *VerifierClient::Create(c);
  }
  v1::VerifyRequest Request(int first, int n, v1::KvReturn kv_return = v1::KV_RETURN_UNSPECIFIED,
                            const std::string& id = "") {
    GreedyRequestOptions r;
    r.first_sequence = first;
    r.num_sequences = n;
    r.kv_return = kv_return;
    r.request_id = id;
    return *BuildGreedyRequest(workload_, r);
  }
  absl::Status Check(int first, int n, v1::KvReturn kv_return, const v1::VerifyResponse& response,
                     const std::string* fetched = nullptr) {
    GreedyCheckOptions c;
    c.first_sequence = first;
    c.num_sequences = n;
    c.kv_return = kv_return;
    c.expect_verified = !noop_;
    return CheckGreedyResponse(workload_, c, response,
                               fetched ? std::optional(AsBytes(*fetched)) : std::nullopt);
  }

  GreedyWorkload workload_;
  ServerOptions options_;
  CountingMetrics metrics_;
  ControllableBackend* backend_ = nullptr;
  std::unique_ptr<VerifierServer> server_;
  std::unique_ptr<VerifierClient> client_;
  bool noop_ = false;
};

// 1 SERVING, 0 NOT_SERVING, -1 the check itself failed.
int Serving(VerifierClient& client, const std::string& service = "") {
  absl::StatusOr<bool> serving = client.CheckHealth(service);
  return serving.ok() ? (*serving ? 1 : 0) : -1;
}

TEST_F(ServerTest, UnaryVerifyMatchesOracleInEveryKvMode) {
  Start();
  absl::StatusOr<v1::VerifyResponse> handle = client_->Verify(Request(0, 5, v1::KV_RETURN_HANDLE, "h"));
  ASSERT_THAT(handle, IsOk());
  absl::StatusOr<std::string> fetched = client_->FetchKv(handle->kv().id());
  ASSERT_THAT(fetched, IsOk());
  EXPECT_THAT(Check(0, 5, v1::KV_RETURN_HANDLE, *handle, &*fetched), IsOk());
  EXPECT_EQ(handle->request_id(), "h");
  EXPECT_EQ(handle->kv().ttl_ms(), options_.kv_handle_ttl_ms);
  EXPECT_EQ(handle->kv().dtype(), v1::DATA_TYPE_UINT8);
  EXPECT_TRUE(handle->verified());
  EXPECT_EQ(handle->timing().path(), v1::EXECUTION_PATH_CPU);
  EXPECT_GT(handle->timing().server_ns(), 0);

  absl::StatusOr<v1::VerifyResponse> inline_kv = client_->Verify(Request(5, 7, v1::KV_RETURN_INLINE));
  ASSERT_THAT(inline_kv, IsOk());
  EXPECT_THAT(Check(5, 7, v1::KV_RETURN_INLINE, *inline_kv), IsOk());

  absl::StatusOr<v1::VerifyResponse> none = client_->Verify(Request(12, 3, v1::KV_RETURN_NONE));
  ASSERT_THAT(none, IsOk());
  EXPECT_THAT(Check(12, 3, v1::KV_RETURN_NONE, *none), IsOk());

  // UNSPECIFIED with rows means HANDLE.
  absl::StatusOr<v1::VerifyResponse> unspecified = client_->Verify(Request(15, 2));
  ASSERT_THAT(unspecified, IsOk());
  EXPECT_THAT(Check(15, 2, v1::KV_RETURN_UNSPECIFIED, *unspecified), IsOk());
  EXPECT_FALSE(unspecified->kv().id().empty());
}

TEST_F(ServerTest, ManyConcurrentClientsAllMatchTheOracle) {
  Start();
  constexpr int kThreads = 16;
  constexpr int kRequestsPerThread = 50;
  std::atomic<int> failures{0};
  absl::Mutex mu;
  std::string first_failure;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<VerifierClient> client = NewClient();
      SplitMix64 rng(DeriveSeed(7, t));
      for (int i = 0; i < kRequestsPerThread; ++i) {
        const int n = 1 + static_cast<int>(rng.NextBelow(4));
        const int first = static_cast<int>(rng.NextBelow(workload_.num_sequences() - n));
        const auto mode = static_cast<v1::KvReturn>(1 + rng.NextBelow(3));
        absl::Status s;
        absl::StatusOr<v1::VerifyResponse> r =
            client->Verify(Request(first, n, mode, absl::StrCat(t, "/", i)));
        if (!r.ok()) {
          s = r.status();
        } else if (mode == v1::KV_RETURN_HANDLE) {
          absl::StatusOr<std::string> kv = client->FetchKv(r->kv().id());
          s = kv.ok() ? Check(first, n, mode, *r, &*kv) : kv.status();
          if (s.ok() && i % 2 == 0) s = client->ReleaseKv(r->kv().id()).status();
        } else {
          s = Check(first, n, mode, *r);
        }
        if (!s.ok()) {
          failures.fetch_add(1);
          absl::MutexLock lock(&mu);
          if (first_failure.empty()) first_failure = absl::StrCat("thread ", t, " request ", i, ": ", s.ToString());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  // Requests were merged: fewer batches than requests.
  EXPECT_LT(backend_->batch_sequences().size(), size_t{kThreads * kRequestsPerThread});
}

TEST_F(ServerTest, AsyncVerifyCallsBackWithCheckedResults) {
  Start();
  constexpr int kCalls = 24;
  absl::BlockingCounter pending(kCalls);
  std::vector<absl::Status> results(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    client_->VerifyAsync(Request(2 * i, 2, v1::KV_RETURN_INLINE),
                         [&, i](absl::StatusOr<v1::VerifyResponse> r) {
                           results[i] = r.ok() ? Check(2 * i, 2, v1::KV_RETURN_INLINE, *r) : r.status();
                           pending.DecrementCount();
                         });
  }
  pending.Wait();
  for (int i = 0; i < kCalls; ++i) EXPECT_THAT(results[i], IsOk()) << "call " << i;
}

TEST_F(ServerTest, InvalidRequestsAreRejectedAndTheServerKeepsServing) {
  Start();
  v1::VerifyRequest bad = Request(0, 3);
  bad.mutable_sequences(2)->set_draft_tokens(0, 32000);
  EXPECT_THAT(client_->Verify(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequences[2].draft_tokens[0] is 32000; token ids must lie in "
                                 "[0, vocab_size=32000)")));
  EXPECT_THAT(client_->Verify(v1::VerifyRequest()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequences is empty")));
  EXPECT_THAT(client_->Verify(Request(0, 17)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequences has 17 entries; limit max_sequences_per_request=16")));
  v1::VerifyRequest sampled = Request(0, 1);
  sampled.mutable_sequences(0)->mutable_sampled();
  EXPECT_THAT(client_->Verify(sampled),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequences[0].sampled.target is not set")));
  EXPECT_TRUE(backend_->batch_sequences().empty());  // nothing invalid was queued
  absl::StatusOr<v1::VerifyResponse> ok = client_->Verify(Request(0, 3, v1::KV_RETURN_INLINE));
  ASSERT_THAT(ok, IsOk());
  EXPECT_THAT(Check(0, 3, v1::KV_RETURN_INLINE, *ok), IsOk());
}

TEST_F(ServerTest, DeadlineExpiringInTheQueueIsAnsweredAndNeverExecuted) {
  // A batch below the preferred size waits its delay: nothing flushes on time.
  options_.preferred_batch_sequences = options_.max_batch_sequences;
  options_.max_queue_delay_us = 10'000'000;
  Start();
  EXPECT_THAT(client_->Verify(Request(0, 2), absl::Milliseconds(50)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, ::testing::_));
  EXPECT_TRUE(Eventually([&] { return server_->batcher().queued_sequences() == 0; }));
  EXPECT_TRUE(backend_->batch_sequences().empty());
}

TEST_F(ServerTest, CancelledRequestIsAnsweredAndNeverExecuted) {
  options_.preferred_batch_sequences = options_.max_batch_sequences;
  options_.max_queue_delay_us = 10'000'000;
  Start();
  auto channel = grpc::CreateChannel(server_->local_address(), grpc::InsecureChannelCredentials());
  auto stub = v1::Verifier::NewStub(channel);
  grpc::ClientContext context;
  v1::VerifyRequest request = Request(0, 3);
  v1::VerifyResponse response;
  absl::Notification finished;
  grpc::Status status;
  stub->async()->Verify(&context, &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    finished.Notify();
  });
  ASSERT_TRUE(Eventually([&] { return server_->batcher().queued_sequences() == 3; }));
  context.TryCancel();
  finished.WaitForNotification();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  // OnCancel wakes the batcher: the request leaves the queue long before its delay.
  EXPECT_TRUE(Eventually([&] { return server_->batcher().queued_sequences() == 0; }));
  EXPECT_TRUE(backend_->batch_sequences().empty());
}

TEST_F(ServerTest, FullQueueIsResourceExhaustedImmediately) {
  options_.max_queue_delay_us = 10'000'000;
  options_.max_batch_sequences = 4;
  options_.preferred_batch_sequences = 4;
  options_.max_sequences_per_request = 4;
  options_.max_queue_sequences = 4;
  Start();
  absl::Notification first_done;
  absl::Status first_status;
  client_->VerifyAsync(Request(0, 3), [&](absl::StatusOr<v1::VerifyResponse> r) {
    first_status = r.status();
    first_done.Notify();
  }, absl::Milliseconds(300));
  ASSERT_TRUE(Eventually([&] { return server_->batcher().queued_sequences() == 3; }));
  EXPECT_THAT(client_->Verify(Request(3, 2)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("queue full: 3 sequences queued + 2 would exceed "
                                 "max_queue_sequences=4")));
  first_done.WaitForNotification();
  EXPECT_THAT(first_status, StatusIs(absl::StatusCode::kDeadlineExceeded, ::testing::_));
}

TEST_F(ServerTest, FullArenaIsResourceExhaustedAndLiveHandlesSurvive) {
  options_.kv_arena_bytes = 8 * kRowBytes;
  Start();
  // Find a one-sequence request that fits (gamma <= 8) and a 4-sequence one that cannot.
  int small = 0;
  while (workload_.gamma(small) > 4) ++small;
  absl::StatusOr<v1::VerifyResponse> kept = client_->Verify(Request(small, 1, v1::KV_RETURN_HANDLE));
  ASSERT_THAT(kept, IsOk());
  int big = 0;
  while (workload_.draft_offsets[big + 4] - workload_.draft_offsets[big] <= 8) ++big;
  EXPECT_THAT(client_->Verify(Request(big, 4, v1::KV_RETURN_HANDLE)),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("KV arena full")));
  absl::StatusOr<std::string> fetched = client_->FetchKv(kept->kv().id());
  ASSERT_THAT(fetched, IsOk());
  EXPECT_THAT(Check(small, 1, v1::KV_RETURN_HANDLE, *kept, &*fetched), IsOk());
}

TEST_F(ServerTest, HandlesExpireAfterTheirTtl) {
  options_.kv_handle_ttl_ms = 40;
  Start();
  absl::StatusOr<v1::VerifyResponse> r = client_->Verify(Request(0, 4, v1::KV_RETURN_HANDLE));
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->kv().ttl_ms(), 40);
  absl::SleepFor(absl::Milliseconds(80));  // two TTLs: the reaper runs every 10 ms
  EXPECT_THAT(client_->FetchKv(r->kv().id()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown, released or expired")));
  EXPECT_TRUE(Eventually([&] { return server_->arena().used_bytes() == 0; }));
}

TEST_F(ServerTest, FetchRangesChunksReleaseAndUnknownHandles) {
  Start();
  // A request whose handle holds at least 3 rows.
  int first = 0;
  while (workload_.expected.packed_row_offsets[first + 4] -
             workload_.expected.packed_row_offsets[first] < 3) {
    ++first;
  }
  absl::StatusOr<v1::VerifyResponse> r = client_->Verify(Request(first, 4, v1::KV_RETURN_HANDLE));
  ASSERT_THAT(r, IsOk());
  const std::string id = r->kv().id();
  const int64_t rows = r->kv().num_rows();
  const auto expected = client::ExpectedPackedKv(workload_, first, 4);

  VerifierClient::FetchOptions range;
  range.first_row = 1;
  range.num_rows = 2;
  range.chunk_bytes = 7;  // raised to the 4096-byte minimum (server_hardening_test)
  absl::StatusOr<std::string> part = client_->FetchKv(id, range);
  ASSERT_THAT(part, IsOk());
  ASSERT_EQ(part->size(), size_t{2 * kRowBytes});
  EXPECT_EQ(0, std::memcmp(part->data(), expected.data() + kRowBytes, 2 * kRowBytes));

  range.first_row = rows;
  range.num_rows = 1;
  EXPECT_THAT(client_->FetchKv(id, range),
              StatusIs(absl::StatusCode::kOutOfRange,
                       HasSubstr(absl::StrCat("past the handle's ", rows, " rows"))));
  range.first_row = rows + 1;
  range.num_rows = 0;
  EXPECT_THAT(client_->FetchKv(id, range), StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("first_row")));
  range.first_row = -1;
  EXPECT_THAT(client_->FetchKv(id, range), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("first_row is -1")));

  EXPECT_EQ(*client_->ReleaseKv(id), rows * kRowBytes);
  EXPECT_THAT(client_->ReleaseKv(id), StatusIs(absl::StatusCode::kNotFound, HasSubstr(id)));
  EXPECT_THAT(client_->FetchKv(id), StatusIs(absl::StatusCode::kNotFound, HasSubstr(id)));
  // Well-formed (32 lowercase hex digits) but unknown; malformed handles are
  // INVALID_ARGUMENT (server_hardening_test).
  const std::string unknown = "deadbeefdeadbeefdeadbeefdeadbeef";
  EXPECT_THAT(client_->FetchKv(unknown), StatusIs(absl::StatusCode::kNotFound, HasSubstr(unknown)));
  EXPECT_THAT(client_->ReleaseKv(""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("handle is empty")));

  // release_after: the whole range comes back, then the handle is gone.
  absl::StatusOr<v1::VerifyResponse> r2 = client_->Verify(Request(first, 4, v1::KV_RETURN_HANDLE));
  ASSERT_THAT(r2, IsOk());
  VerifierClient::FetchOptions once;
  once.release_after = true;
  absl::StatusOr<std::string> all = client_->FetchKv(r2->kv().id(), once);
  ASSERT_THAT(all, IsOk());
  EXPECT_THAT(Check(first, 4, v1::KV_RETURN_HANDLE, *r2, &*all), IsOk());
  EXPECT_THAT(client_->FetchKv(r2->kv().id()), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
  EXPECT_EQ(server_->arena().used_bytes(), 0);
}

TEST_F(ServerTest, VerifyStreamAnswersGoodAndBadRequestsByIdAndGoesOn) {
  Start();
  absl::Mutex mu;
  std::map<std::string, v1::VerifyStreamResponse> answers;
  absl::StatusOr<std::unique_ptr<client::VerifyStreamSession>> session =
      client_->OpenStream([&](const v1::VerifyStreamResponse& r) {
        absl::MutexLock lock(&mu);
        answers[r.request_id().empty() ? "<empty>" : r.request_id()] = r;
      });
  ASSERT_THAT(session, IsOk());
  constexpr int kRequests = 30;
  for (int i = 0; i < kRequests; ++i) {
    v1::VerifyRequest r = Request(3 * i, 3, v1::KV_RETURN_INLINE, absl::StrCat("s", i));
    if (i % 3 == 1) r.mutable_sequences(1)->clear_draft_tokens();  // invalid
    ASSERT_THAT((*session)->Send(std::move(r)), IsOk());
  }
  ASSERT_THAT((*session)->Send(Request(0, 1, v1::KV_RETURN_NONE, "")), IsOk());
  ASSERT_THAT((*session)->Finish(), IsOk());
  absl::MutexLock lock(&mu);
  ASSERT_EQ(answers.size(), size_t{kRequests + 1});
  for (int i = 0; i < kRequests; ++i) {
    const v1::VerifyStreamResponse& a = answers[absl::StrCat("s", i)];
    if (i % 3 == 1) {
      ASSERT_TRUE(a.has_error()) << i;
      EXPECT_EQ(a.error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
      EXPECT_THAT(a.error().message(), HasSubstr("sequences[1].draft_tokens has 0 tokens"));
    } else {
      ASSERT_TRUE(a.has_response()) << i << ": " << a.error().message();
      EXPECT_THAT(Check(3 * i, 3, v1::KV_RETURN_INLINE, a.response()), IsOk()) << i;
    }
  }
  EXPECT_THAT(answers["<empty>"].error().message(), HasSubstr("request_id is empty"));
}

TEST_F(ServerTest, VerifyStreamRejectsDuplicateInFlightIds) {
  // Keeps the first in flight while the second arrives.
  options_.preferred_batch_sequences = options_.max_batch_sequences;
  options_.max_queue_delay_us = 200'000;
  Start();
  absl::Mutex mu;
  std::vector<v1::VerifyStreamResponse> answers;
  auto session = *client_->OpenStream([&](const v1::VerifyStreamResponse& r) {
    absl::MutexLock lock(&mu);
    answers.push_back(r);
  });
  ASSERT_THAT(session->Send(Request(0, 2, v1::KV_RETURN_INLINE, "dup")), IsOk());
  ASSERT_THAT(session->Send(Request(2, 2, v1::KV_RETURN_INLINE, "dup")), IsOk());
  ASSERT_THAT(session->Finish(), IsOk());
  absl::MutexLock lock(&mu);
  ASSERT_EQ(answers.size(), 2u);
  // The duplicate's error is written first: the original waits in the queue.
  ASSERT_TRUE(answers[0].has_error());
  EXPECT_THAT(answers[0].error().message(), HasSubstr("request_id \"dup\" is already in flight"));
  ASSERT_TRUE(answers[1].has_response());
  EXPECT_THAT(Check(0, 2, v1::KV_RETURN_INLINE, answers[1].response()), IsOk());
}

TEST_F(ServerTest, GetServerInfoReportsBackendLimitsAndVersion) {
  options_.max_draft_tokens = 64;
  Start();
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->backend(), "cpu");
  EXPECT_FALSE(info->device_name().empty());
  EXPECT_THAT(info->version(), ::testing::StartsWith("0.1.0+"));
  EXPECT_EQ(info->limits().max_draft_tokens(), 64);
  EXPECT_EQ(info->limits().max_batch_sequences(), 64);
  EXPECT_EQ(info->limits().max_sequences_per_request(), 16);
  EXPECT_EQ(info->limits().kv_arena_bytes(), options_.kv_arena_bytes);
  EXPECT_EQ(info->dispatch_threshold_source(), "not applicable");
  EXPECT_THAT(info->modes(), ::testing::ElementsAre("greedy", "sampled"));
}

TEST_F(ServerTest, ReflectionListsTheVerifierService) {
  Start();
  // A raw ServerReflectionInfo call (the packaged gRPC installs no reflection
  // client): request list_services (field 7, empty string), read one reply.
  auto channel = grpc::CreateChannel(server_->local_address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  auto call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  const auto step = [&cq](intptr_t expected) {
    void* tag = nullptr;
    bool ok = false;
    return cq.Next(&tag, &ok) && ok && reinterpret_cast<intptr_t>(tag) == expected;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(step(1));
  grpc::Slice list_services(std::string("\x3a\x00", 2));
  grpc::ByteBuffer request(&list_services, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  ASSERT_TRUE(step(2));
  grpc::ByteBuffer reply;
  call->Read(&reply, reinterpret_cast<void*>(3));
  ASSERT_TRUE(step(3));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(reply.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  EXPECT_THAT(bytes, HasSubstr("specverify.v1.Verifier"));
  EXPECT_THAT(bytes, HasSubstr("grpc.health.v1.Health"));
  call->WritesDone(reinterpret_cast<void*>(4));
  ASSERT_TRUE(step(4));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  ASSERT_TRUE(step(5));
  EXPECT_TRUE(status.ok()) << status.error_message();
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_F(ServerTest, HealthGoesNotServingWhileDrainingAndWorkInFlightFinishes) {
  Start();
  EXPECT_EQ(Serving(*client_), 1);
  EXPECT_EQ(Serving(*client_, kVerifierServiceName), 1);
  EXPECT_EQ(metrics_.serving(), 1);  // the serving gauge follows health
  backend_->Pause();
  absl::Notification done;
  absl::StatusOr<v1::VerifyResponse> in_flight;
  client_->VerifyAsync(Request(0, 4, v1::KV_RETURN_INLINE), [&](absl::StatusOr<v1::VerifyResponse> r) {
    in_flight = std::move(r);
    done.Notify();
  });
  ASSERT_TRUE(Eventually([&] { return backend_->held_batches() == 1; }));
  absl::Status shutdown;
  std::thread stopper([&] { shutdown = server_->Shutdown(absl::Seconds(10)); });
  ASSERT_TRUE(Eventually([&] { return Serving(*client_) == 0; }));
  EXPECT_EQ(Serving(*client_, kVerifierServiceName), 0);
  EXPECT_EQ(metrics_.serving(), 0);
  EXPECT_THAT(client_->Verify(Request(4, 1)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("draining")));
  backend_->Resume();
  done.WaitForNotification();
  stopper.join();
  ASSERT_THAT(in_flight, IsOk());
  EXPECT_THAT(Check(0, 4, v1::KV_RETURN_INLINE, *in_flight), IsOk());
  EXPECT_THAT(shutdown, IsOk());
}

// A client holding a VerifyStream open must not keep a draining server up
// to its drain timeout: the stream answers what it read, then ends
// UNAVAILABLE (reopen elsewhere). Before, such a server took the whole
// drain timeout to exit and the stream ended CANCELLED.
TEST_F(ServerTest, DrainAnswersWhatAnOpenStreamReadThenEndsItAtOnce) {
  Start();
  backend_->Pause();
  absl::Mutex mu;
  std::vector<v1::VerifyStreamResponse> answers;
  absl::StatusOr<std::unique_ptr<client::VerifyStreamSession>> session =
      client_->OpenStream([&](const v1::VerifyStreamResponse& r) {
        absl::MutexLock lock(&mu);
        answers.push_back(r);
      });
  ASSERT_THAT(session, IsOk());
  ASSERT_THAT((*session)->Send(Request(0, 3, v1::KV_RETURN_INLINE, "held")), IsOk());
  ASSERT_TRUE(Eventually([&] { return backend_->held_batches() == 1; }));

  const absl::Time start = absl::Now();
  absl::Status shutdown;
  std::thread stopper([&] { shutdown = server_->Shutdown(absl::Seconds(60)); });
  ASSERT_TRUE(Eventually([&] { return Serving(*client_) == 0; }));
  backend_->Resume();
  // The server finishes while the client still holds the stream open (no
  // half-close yet), nowhere near the 60 s drain timeout.
  stopper.join();
  EXPECT_THAT(shutdown, IsOk());
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  // Sending on the ended stream says so with a code a worker reopens on.
  absl::Status late;
  int n = 0;
  ASSERT_TRUE(Eventually([&] {
    late = (*session)->Send(Request(3, 1, v1::KV_RETURN_NONE, absl::StrCat("late", n++)));
    return !late.ok();
  }));
  EXPECT_THAT(late, StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
  EXPECT_THAT((*session)->Finish(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("this stream ends, every request it read was answered")));
  absl::MutexLock lock(&mu);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].request_id(), "held");
  ASSERT_TRUE(answers[0].has_response()) << answers[0].error().message();
  EXPECT_THAT(Check(0, 3, v1::KV_RETURN_INLINE, answers[0].response()), IsOk());
}

TEST_F(ServerTest, AStreamOpenedWhileDrainingEndsAtOnce) {
  Start();
  backend_->Pause();
  absl::Notification held_done;
  client_->VerifyAsync(Request(0, 2, v1::KV_RETURN_INLINE),
                       [&](absl::StatusOr<v1::VerifyResponse>) { held_done.Notify(); });
  ASSERT_TRUE(Eventually([&] { return backend_->held_batches() == 1; }));
  absl::Status shutdown;
  std::thread stopper([&] { shutdown = server_->Shutdown(absl::Seconds(60)); });
  ASSERT_TRUE(Eventually([&] { return Serving(*client_) == 0; }));
  // The server waits for the held batch; a stream opened now reads nothing.
  absl::StatusOr<std::unique_ptr<client::VerifyStreamSession>> session =
      client_->OpenStream([](const v1::VerifyStreamResponse&) {});
  ASSERT_THAT(session, IsOk());
  EXPECT_THAT((*session)->Finish(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("draining")));
  backend_->Resume();
  held_done.WaitForNotification();
  stopper.join();
  EXPECT_THAT(shutdown, IsOk());
}

TEST_F(ServerTest, ShutdownUnderLoadLosesNoRequest) {
  Start();
  constexpr int kThreads = 8;
  std::atomic<int> ok{0}, refused{0}, wrong{0};
  absl::Mutex mu;
  std::string first_wrong;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<VerifierClient> client = NewClient();
      // Until the server refuses (UNAVAILABLE while draining or once gone;
      // CANCELLED when a call races gRPC's own listener shutdown and never
      // reaches a handler): every answer before that must be a correct one.
      for (int i = 0;; ++i) {
        const int first = (t * 37 + i) % 400;
        absl::StatusOr<v1::VerifyResponse> r = client->Verify(Request(first, 2, v1::KV_RETURN_INLINE));
        absl::Status s = r.ok() ? Check(first, 2, v1::KV_RETURN_INLINE, *r) : r.status();
        if (s.ok()) {
          ok.fetch_add(1);
        } else if (s.code() == absl::StatusCode::kUnavailable ||
                   s.code() == absl::StatusCode::kCancelled) {
          refused.fetch_add(1);
          return;
        } else {
          wrong.fetch_add(1);
          absl::MutexLock lock(&mu);
          if (first_wrong.empty()) first_wrong = s.ToString();
          return;
        }
      }
    });
  }
  ASSERT_TRUE(Eventually([&] { return ok.load() >= 100; }));
  EXPECT_THAT(server_->Shutdown(absl::Seconds(5)), IsOk());
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0) << first_wrong;
  EXPECT_EQ(refused.load(), kThreads);
  // Server side: every call a handler saw was answered OK or UNAVAILABLE;
  // none was cancelled or lost, and every OK reached its client.
  std::map<absl::StatusCode, int> finished = metrics_.finished();
  EXPECT_EQ(finished[absl::StatusCode::kOk], ok.load());
  EXPECT_LE(finished[absl::StatusCode::kUnavailable], kThreads);
  finished.erase(absl::StatusCode::kOk);
  finished.erase(absl::StatusCode::kUnavailable);
  EXPECT_TRUE(finished.empty()) << "unexpected server-side codes";
}

TEST_F(ServerTest, BackendFailureFailsRequestsInternalAndStopsServing) {
  Start();
  backend_->Fail(absl::InternalError("CUDA error: an illegal memory access (injected)"));
  EXPECT_THAT(client_->Verify(Request(0, 1)),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("an illegal memory access (injected)")));
  EXPECT_THAT(server_->WaitForStopRequest(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("illegal memory access")));
  EXPECT_EQ(Serving(*client_), 0);
  EXPECT_THAT(client_->Verify(Request(1, 1)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("backend failed")));
  EXPECT_FALSE(server_->backend_health().ok());
}

TEST_F(ServerTest, NoopBackendAnswersUnverifiedWithTheSameShape) {
  noop_ = true;
  Start(/*noop=*/true);
  absl::StatusOr<v1::VerifyResponse> r = client_->Verify(Request(0, 6, v1::KV_RETURN_HANDLE));
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(Check(0, 6, v1::KV_RETURN_HANDLE, *r), IsOk());
  EXPECT_FALSE(r->verified());
  EXPECT_EQ(r->timing().path(), v1::EXECUTION_PATH_NOOP);
  EXPECT_EQ(client_->GetServerInfo()->backend(), "noop");
  // Its handle names every draft row (k = gamma): FetchKv moves them all.
  std::string all_rows;
  const v1::VerifyRequest handle_request = Request(0, 6, v1::KV_RETURN_HANDLE);
  for (const v1::SequenceDraft& seq : handle_request.sequences()) {
    all_rows += seq.draft_kv().data();
  }
  absl::StatusOr<std::string> fetched = client_->FetchKv(r->kv().id());
  ASSERT_THAT(fetched, IsOk());
  EXPECT_EQ(*fetched, all_rows);
  // Inline: every draft row comes back too, as a ceiling must carry at least
  // a real answer's bytes.
  const v1::VerifyRequest request = Request(6, 5, v1::KV_RETURN_INLINE);
  absl::StatusOr<v1::VerifyResponse> inline_kv = client_->Verify(request);
  ASSERT_THAT(inline_kv, IsOk());
  std::string rows;
  for (const v1::SequenceDraft& seq : request.sequences()) rows += seq.draft_kv().data();
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(inline_kv->kv_inline(), rows);
  EXPECT_EQ(inline_kv->timing().host_copy_out_bytes(), static_cast<int64_t>(rows.size()));
}

// The data plane's copy count (issue #12): a request's payload crosses host
// memory once on the way in (message -> the backend's staging) and its inline
// rows once on the way out (host-readable packed rows -> response).
TEST_F(ServerTest, PayloadIsCopiedOnceInAndInlineRowsOnceOut) {
  Start();
  int64_t total_in = 0;
  int64_t total_out = 0;
  for (v1::KvReturn kv_return : {v1::KV_RETURN_INLINE, v1::KV_RETURN_HANDLE, v1::KV_RETURN_NONE}) {
    SCOPED_TRACE(v1::KvReturn_Name(kv_return));
    const v1::VerifyRequest request = Request(20, 6, kv_return);
    int64_t payload = 0;
    for (const v1::SequenceDraft& seq : request.sequences()) {
      payload += 4 * (seq.draft_tokens_size() + seq.greedy().target_tokens_size());
      // NONE stages no rows: they are neither verified against nor packed.
      if (kv_return != v1::KV_RETURN_NONE) payload += seq.draft_kv().data().size();
    }
    absl::StatusOr<v1::VerifyResponse> r = client_->Verify(request);
    ASSERT_THAT(r, IsOk());
    ASSERT_THAT(Check(20, 6, kv_return, *r), IsOk());
    EXPECT_EQ(r->timing().host_copy_in_bytes(), payload);
    const int64_t out = kv_return == v1::KV_RETURN_INLINE ? r->kv_inline().size() : 0;
    if (kv_return == v1::KV_RETURN_INLINE) {
      ASSERT_GT(out, 0);
    }
    EXPECT_EQ(r->timing().host_copy_out_bytes(), out);
    total_in += payload;
    total_out += out;
  }
  // Counted per batch in /metrics too, after the answers went out.
  EXPECT_EQ(metrics_.copied_in(), total_in);
  EXPECT_EQ(metrics_.copied_out(), total_out);
}

// Latency first (issue #12): with the defaults an idle server dispatches at
// once, so a lone request's queue time is the enqueue itself.
TEST_F(ServerTest, AnIdleServerDispatchesALoneRequestAtOnce) {
  options_.max_queue_delay_us = 0;
  options_.preferred_batch_sequences = 0;
  Start();
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<v1::VerifyResponse> r = client_->Verify(Request(i, 1, v1::KV_RETURN_INLINE));
    ASSERT_THAT(r, IsOk());
    // Far below any batching delay; generous for a loaded CI machine.
    EXPECT_LT(r->timing().queue_ns(), 5'000'000) << "request " << i;
    EXPECT_EQ(r->timing().batch_requests(), 1);
  }
  EXPECT_EQ(client_->GetServerInfo()->limits().preferred_batch_sequences(), 0);
}

TEST_F(ServerTest, CeilingAnswersWithVerifysShapeWithoutVerifying) {
  Start();
  const v1::VerifyRequest inline_request = Request(30, 5, v1::KV_RETURN_INLINE, "c1");
  absl::StatusOr<v1::VerifyResponse> ceiling = client_->VerifyCeiling(inline_request);
  ASSERT_THAT(ceiling, IsOk());
  absl::StatusOr<v1::VerifyResponse> real = client_->Verify(inline_request);
  ASSERT_THAT(real, IsOk());
  EXPECT_FALSE(ceiling->verified());
  EXPECT_EQ(ceiling->request_id(), "c1");
  EXPECT_EQ(ceiling->timing().path(), v1::EXECUTION_PATH_CEILING);
  ASSERT_EQ(ceiling->results_size(), 5);
  int64_t rows = 0;
  for (int i = 0; i < 5; ++i) {
    const v1::SequenceDraft& seq = inline_request.sequences(i);
    EXPECT_EQ(ceiling->results(i).accepted_length(), seq.draft_tokens_size());
    EXPECT_EQ(ceiling->results(i).kv_row_offset(), rows);
    rows += seq.draft_tokens_size();
  }
  // Every draft row comes back: at least as many bytes as the real answer.
  EXPECT_EQ(static_cast<int64_t>(ceiling->kv_inline().size()), rows * kRowBytes);
  EXPECT_GE(ceiling->kv_inline().size(), real->kv_inline().size());

  absl::StatusOr<v1::VerifyResponse> handle =
      client_->VerifyCeiling(Request(30, 5, v1::KV_RETURN_HANDLE));
  ASSERT_THAT(handle, IsOk());
  EXPECT_EQ(handle->kv().id().size(), 32u);  // a real handle's length
  EXPECT_EQ(handle->kv().num_rows(), rows);
  // The placeholder names no rows.
  EXPECT_THAT(client_->FetchKv(handle->kv().id()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("")));
  // Nothing went through the batcher.
  EXPECT_EQ(metrics_.finished()[absl::StatusCode::kOk], 1);  // the one real Verify
}

}  // namespace
}  // namespace specverify::server
