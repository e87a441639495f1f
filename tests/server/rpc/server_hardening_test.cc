// Issue #15 (fuzz/soak findings): the real server in-process on a loopback
// port, driven over gRPC by the client library, the generated stub and raw
// GenericStub calls carrying bytes that are not valid messages.
#include <cstdint>
#include <limits>
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
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/app/verifier_server.h"
#include "tests/server/testing/controllable_backend.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::client::BuildGreedyRequest;
using ::specverify::client::CheckGreedyResponse;
using ::specverify::client::GreedyCheckOptions;
using ::specverify::client::GreedyRequestOptions;
using ::specverify::client::VerifierClient;
using ::specverify::server::testing::ControllableBackend;
using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kRowBytes = 64;

// Bytes that are no protobuf message: field 1 with wire type 7 (invalid).
const std::string kUndecodable("\x0f\x01\x02", 3);

std::string Serialized(const google::protobuf::Message& m) { return m.SerializeAsString(); }

// What a raw call saw: the server's messages (as bytes) and its status.
struct RawResult {
  std::vector<std::string> replies;
  grpc::Status status;
  int writes_accepted = 0;
};

// One call of `method` on `channel` through grpc::GenericStub: writes every
// message of `messages` as raw bytes (stopping if the server ends the call),
// half-closes, reads every reply, and returns them with the final status.
RawResult RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                  const std::vector<std::string>& messages) {
  RawResult result;
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &cq);
  intptr_t next_tag = 1;
  const auto step = [&](auto start) {
    const intptr_t tag = next_tag++;
    start(reinterpret_cast<void*>(tag));
    void* got = nullptr;
    bool ok = false;
    const bool next = cq.Next(&got, &ok);
    EXPECT_TRUE(next && reinterpret_cast<intptr_t>(got) == tag) << "unexpected completion";
    return next && ok;
  };
  if (step([&](void* t) { call->StartCall(t); })) {
    for (const std::string& m : messages) {
      grpc::Slice slice(m);
      grpc::ByteBuffer buffer(&slice, 1);
      if (!step([&](void* t) { call->Write(buffer, t); })) break;
      ++result.writes_accepted;
    }
    step([&](void* t) { call->WritesDone(t); });
    for (;;) {
      grpc::ByteBuffer reply;
      if (!step([&](void* t) { call->Read(&reply, t); })) break;
      std::vector<grpc::Slice> slices;
      std::string bytes;
      if (reply.Dump(&slices).ok()) {
        for (const grpc::Slice& slice : slices) {
          bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
        }
      }
      result.replies.push_back(std::move(bytes));
    }
  }
  step([&](void* t) { call->Finish(&result.status, t); });
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  return result;
}

class HardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GreedyWorkloadOptions w;
    w.num_sequences = 256;
    w.gamma_min = 2;
    w.gamma_max = 8;
    w.alpha = 0.8;
    w.row_bytes = kRowBytes;
    w.vocab_size = 32000;
    w.seed = 15;
    workload_ = *GenerateGreedyWorkload(w);
    options_.listen_address = "127.0.0.1:0";
    options_.metrics_address = "";
    options_.max_queue_delay_us = 300;
    options_.max_batch_sequences = 64;
    options_.max_sequences_per_request = 16;
    options_.kv_arena_bytes = 16 << 20;
  }
  void TearDown() override {
    if (server_ != nullptr) (void)server_->Shutdown(absl::Seconds(5));
  }

  void Start() {
    auto backend = std::make_unique<ControllableBackend>();
    backend_ = backend.get();
    absl::StatusOr<std::unique_ptr<VerifierServer>> server =
        VerifierServer::Start(options_, &metrics_, std::move(backend));
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    client::VerifierClientOptions c;
    c.address = server_->local_address();
    c.default_deadline = absl::Seconds(20);
    client_ = *VerifierClient::Create(c);
    channel_ = grpc::CreateChannel(server_->local_address(), grpc::InsecureChannelCredentials());
  }

  v1::VerifyRequest Request(int first, int n, v1::KvReturn kv_return,
                            const std::string& id = "") {
    GreedyRequestOptions r;
    r.first_sequence = first;
    r.num_sequences = n;
    r.kv_return = kv_return;
    r.request_id = id;
    return *BuildGreedyRequest(workload_, r);
  }
  absl::Status Check(int first, int n, v1::KvReturn kv_return,
                     const v1::VerifyResponse& response) {
    GreedyCheckOptions c;
    c.first_sequence = first;
    c.num_sequences = n;
    c.kv_return = kv_return;
    return CheckGreedyResponse(workload_, c, response);
  }
  // A handle holding at least `min_rows` rows.
  std::string HandleWithRows(int64_t min_rows, int64_t* rows) {
    int first = 0;
    while (workload_.expected.packed_row_offsets[first + 4] -
               workload_.expected.packed_row_offsets[first] < min_rows) {
      ++first;
    }
    absl::StatusOr<v1::VerifyResponse> r = client_->Verify(Request(first, 4, v1::KV_RETURN_HANDLE));
    if (!r.ok()) {
      ADD_FAILURE() << r.status();
      return "";
    }
    *rows = r->kv().num_rows();
    return r->kv().id();
  }

  GreedyWorkload workload_;
  ServerOptions options_;
  NoopServerMetrics metrics_;
  ControllableBackend* backend_ = nullptr;
  std::unique_ptr<VerifierServer> server_;
  std::unique_ptr<VerifierClient> client_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Defect 1: first_row + num_rows overflowed int64 (UBSan abort; the release
// build answered OK with no chunks). Every past-the-end range is OUT_OF_RANGE.
TEST_F(HardeningTest, FetchKvRangeThatOverflowsInt64IsOutOfRange) {
  Start();
  int64_t rows = 0;
  const std::string id = HandleWithRows(3, &rows);
  ASSERT_FALSE(id.empty());
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  VerifierClient::FetchOptions range;
  range.first_row = 1;
  range.num_rows = kMax;
  EXPECT_THAT(client_->FetchKv(id, range),
              StatusIs(absl::StatusCode::kOutOfRange,
                       HasSubstr(absl::StrCat("num_rows is ", kMax, " from first_row 1"))));
  range.first_row = rows;
  range.num_rows = kMax;
  EXPECT_THAT(client_->FetchKv(id, range),
              StatusIs(absl::StatusCode::kOutOfRange,
                       HasSubstr(absl::StrCat("past the handle's ", rows, " rows"))));
  range.first_row = kMax;
  range.num_rows = kMax;
  EXPECT_THAT(client_->FetchKv(id, range),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("first_row is")));
  // The last row alone is still served, and the handle is intact.
  range.first_row = rows - 1;
  range.num_rows = 1;
  absl::StatusOr<std::string> last = client_->FetchKv(id, range);
  ASSERT_THAT(last, IsOk());
  EXPECT_EQ(last->size(), size_t{kRowBytes});
}

// Defect 4: a unary (or server-streaming) request that does not parse was
// answered UNIMPLEMENTED with an empty message (gRPC's typed callback
// handlers drop the parse error). Every method now answers INVALID_ARGUMENT
// naming the message type, and the server goes on serving.
TEST_F(HardeningTest, UndecodableRequestIsInvalidArgumentOnEveryMethod) {
  Start();
  const std::vector<std::pair<std::string, std::string>> methods = {
      {"Verify", "VerifyRequest"},
      {"FetchKv", "FetchKvRequest"},
      {"ReleaseKv", "ReleaseKvRequest"},
      {"GetServerInfo", "GetServerInfoRequest"}};
  for (const auto& [method, type] : methods) {
    RawResult r = RawCall(channel_, "/specverify.v1.Verifier/" + method, {kUndecodable});
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(r.status.error_message(),
                HasSubstr("could not be parsed as specverify.v1." + type))
        << method;
    EXPECT_TRUE(r.replies.empty()) << method;
  }
  // A well-formed message over the same raw path is served.
  v1::GetServerInfoRequest info_request;
  RawResult info = RawCall(channel_, "/specverify.v1.Verifier/GetServerInfo",
                           {Serialized(info_request)});
  ASSERT_TRUE(info.status.ok()) << info.status.error_message();
  ASSERT_EQ(info.replies.size(), 1u);
  v1::ServerInfo parsed;
  ASSERT_TRUE(parsed.ParseFromString(info.replies[0]));
  EXPECT_EQ(parsed.backend(), "cpu");
  absl::StatusOr<v1::VerifyResponse> ok = client_->Verify(Request(0, 2, v1::KV_RETURN_INLINE));
  ASSERT_THAT(ok, IsOk());
  EXPECT_THAT(Check(0, 2, v1::KV_RETURN_INLINE, *ok), IsOk());
}

// Defect 3: a message on VerifyStream that does not parse ended the stream
// with OK, and the requests after it were dropped silently. Now the requests
// read before it are answered, then the stream ends INVALID_ARGUMENT saying
// which message could not be parsed and that nothing after it was read.
TEST_F(HardeningTest, UndecodableStreamMessageEndsTheStreamWithInvalidArgument) {
  Start();
  RawResult r = RawCall(channel_, "/specverify.v1.Verifier/VerifyStream",
                        {Serialized(Request(0, 2, v1::KV_RETURN_INLINE, "first")), kUndecodable,
                         Serialized(Request(2, 2, v1::KV_RETURN_INLINE, "after"))});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("VerifyStream message 2 could not be parsed as specverify.v1.VerifyRequest"));
  EXPECT_THAT(r.status.error_message(), HasSubstr("no request after it was read"));
  ASSERT_EQ(r.replies.size(), 1u);
  v1::VerifyStreamResponse answer;
  ASSERT_TRUE(answer.ParseFromString(r.replies[0]));
  EXPECT_EQ(answer.request_id(), "first");
  ASSERT_TRUE(answer.has_response()) << answer.error().message();
  EXPECT_THAT(Check(0, 2, v1::KV_RETURN_INLINE, answer.response()), IsOk());

  // A well-formed stream on the same channel is served to the end with OK.
  RawResult good = RawCall(channel_, "/specverify.v1.Verifier/VerifyStream",
                           {Serialized(Request(4, 1, v1::KV_RETURN_INLINE, "a")),
                            Serialized(Request(5, 1, v1::KV_RETURN_INLINE, "b"))});
  EXPECT_TRUE(good.status.ok()) << good.status.error_message();
  EXPECT_EQ(good.replies.size(), 2u);
}

}  // namespace
}  // namespace specverify::server
