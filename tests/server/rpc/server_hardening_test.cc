// Issue #15 (fuzz/soak findings): the real server in-process on a loopback
// port, driven over gRPC by the client library, the generated stub and raw
// GenericStub calls carrying bytes that are not valid messages.
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <span>
#include <memory>
#include <set>
#include <string>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/greedy_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/app/verifier_server.h"
#include "server/rpc/protobuf_log.h"
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

// Counts the requests a server answered on VerifyStream.
class StreamCountingMetrics final : public NoopServerMetrics {
 public:
  void OnRequestFinished(RpcMethod method, absl::StatusCode, absl::Duration) override {
    if (method == RpcMethod::kVerifyStream) stream_answered_.fetch_add(1);
  }
  int stream_answered() const { return stream_answered_.load(); }

 private:
  std::atomic<int> stream_answered_{0};
};

class HardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    UseWorkload(kRowBytes, 0.8);
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

  // Sequences with gamma in [2, 8], per-position acceptance `alpha`.
  void UseWorkload(int64_t row_bytes, double alpha) {
    GreedyWorkloadOptions w;
    w.num_sequences = 256;
    w.gamma_min = 2;
    w.gamma_max = 8;
    w.alpha = alpha;
    w.row_bytes = row_bytes;
    w.vocab_size = 32000;
    w.seed = 15;
    workload_ = *GenerateGreedyWorkload(w);
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
  StreamCountingMetrics metrics_;
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

// Defect 2: an 8,000-character handle was echoed into the status message,
// whose trailer then exceeded gRPC's metadata limit and broke other calls on
// the same connection. Malformed handles are now INVALID_ARGUMENT naming the
// field and the format with a bounded echo, and a Verify in flight on the
// same channel at that moment completes correctly.
TEST_F(HardeningTest, OversizedHandleGetsAShortErrorAndTheConnectionKeepsServing) {
  Start();
  backend_->Pause();
  absl::Notification verified;
  absl::StatusOr<v1::VerifyResponse> in_flight;
  client_->VerifyAsync(Request(0, 3, v1::KV_RETURN_INLINE),
                       [&](absl::StatusOr<v1::VerifyResponse> r) {
                         in_flight = std::move(r);
                         verified.Notify();
                       });
  ASSERT_TRUE(Eventually([&] { return backend_->held_batches() == 1; }));

  const std::string huge(8000, 'a');  // hex digits, but not a handle's length
  absl::StatusOr<std::string> fetched = client_->FetchKv(huge);
  EXPECT_THAT(fetched, StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("handle is 8000 bytes; a KV handle is 32 lowercase hex "
                                          "digits")));
  EXPECT_LT(fetched.status().message().size(), 200u) << fetched.status().message();
  absl::StatusOr<int64_t> released = client_->ReleaseKv(huge);
  EXPECT_THAT(released, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("handle is 8000 bytes")));
  EXPECT_LT(released.status().message().size(), 200u) << released.status().message();

  backend_->Resume();
  verified.WaitForNotification();
  ASSERT_THAT(in_flight, IsOk());
  EXPECT_THAT(Check(0, 3, v1::KV_RETURN_INLINE, *in_flight), IsOk());
}

// Handles of the right length with other characters are INVALID_ARGUMENT
// too; a well-formed unknown handle is NOT_FOUND and named.
TEST_F(HardeningTest, MalformedHandlesAreInvalidArgumentAndUnknownOnesNotFound) {
  Start();
  for (const std::string& bad : {std::string(32, 'A'), std::string(31, 'a') + "-",
                                 std::string(31, 'a') + "\x01", std::string("deadbeef")}) {
    EXPECT_THAT(client_->FetchKv(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("32 lowercase hex digits")))
        << bad;
    EXPECT_THAT(client_->ReleaseKv(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("32 lowercase hex digits")))
        << bad;
  }
  const std::string unknown(32, '0');
  EXPECT_THAT(client_->FetchKv(unknown),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr(absl::StrCat("\"", unknown, "\" is unknown, released or expired"))));
  EXPECT_THAT(client_->ReleaseKv(unknown), StatusIs(absl::StatusCode::kNotFound, HasSubstr(unknown)));
}

// On VerifyStream a request_id is checked for length before anything echoes
// it: an 8,000-byte id gets its own short INVALID_ARGUMENT naming the limit,
// and long (but valid) ids are echoed in messages only up to a bound.
TEST_F(HardeningTest, StreamRequestIdsAreBoundedBeforeTheyAreEchoed) {
  // A batch below the preferred size waits: keeps the first in flight while
  // the duplicate arrives (the latency-first default would dispatch it at
  // once and it could be answered before the duplicate is read).
  options_.preferred_batch_sequences = options_.max_batch_sequences;
  options_.max_queue_delay_us = 200'000;
  Start();
  absl::Mutex mu;
  std::vector<v1::VerifyStreamResponse> answers;
  auto session = *client_->OpenStream([&](const v1::VerifyStreamResponse& r) {
    absl::MutexLock lock(&mu);
    answers.push_back(r);
  });
  const std::string huge(8000, 'x');
  const std::string long_id(128, 'y');  // at the limit: accepted
  ASSERT_THAT(session->Send(Request(0, 1, v1::KV_RETURN_INLINE, huge)), IsOk());
  ASSERT_THAT(session->Send(Request(1, 1, v1::KV_RETURN_INLINE, long_id)), IsOk());
  ASSERT_THAT(session->Send(Request(2, 1, v1::KV_RETURN_INLINE, long_id)), IsOk());
  ASSERT_THAT(session->Finish(), IsOk());
  absl::MutexLock lock(&mu);
  ASSERT_EQ(answers.size(), 3u);
  int errors = 0;
  for (const v1::VerifyStreamResponse& a : answers) {
    if (a.has_response()) {
      EXPECT_EQ(a.request_id(), long_id);
      EXPECT_THAT(Check(1, 1, v1::KV_RETURN_INLINE, a.response()), IsOk());
      continue;
    }
    ++errors;
    EXPECT_EQ(a.error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_LT(a.error().message().size(), 250u) << a.error().message();
    if (a.request_id() == huge) {
      EXPECT_THAT(a.error().message(), HasSubstr("request_id is 8000 bytes; limit 128"));
    } else {
      EXPECT_EQ(a.request_id(), long_id);
      EXPECT_THAT(a.error().message(), HasSubstr("is already in flight on this stream"));
      EXPECT_THAT(a.error().message(), HasSubstr("...\" (128 bytes)"));
    }
  }
  EXPECT_EQ(errors, 2);
}

// Serialized answers reuse one buffer per FetchKv stream: a fetch of several
// chunks too large for gRPC's single-slice serialization must stream them
// all (the raw FetchKv of 38de56f aborted on the second such chunk:
// "assertion failed: !byte_buffer->Valid()" in proto_buffer_writer.h).
TEST_F(HardeningTest, FetchKvStreamsSeveralLargeChunks) {
  UseWorkload(/*row_bytes=*/16384, /*alpha=*/0.9);
  Start();
  absl::StatusOr<v1::VerifyResponse> r = client_->Verify(Request(0, 8, v1::KV_RETURN_HANDLE));
  ASSERT_THAT(r, IsOk());
  const std::span<const std::byte> expected = client::ExpectedPackedKv(workload_, 0, 8);
  VerifierClient::FetchOptions chunks;
  chunks.chunk_bytes = 64 << 10;
  ASSERT_GT(expected.size(), static_cast<size_t>(4 * chunks.chunk_bytes));
  absl::StatusOr<std::string> fetched = client_->FetchKv(r->kv().id(), chunks);
  ASSERT_THAT(fetched, IsOk());
  ASSERT_EQ(fetched->size(), expected.size());
  EXPECT_EQ(0, std::memcmp(fetched->data(), expected.data(), expected.size()));
}

// Defect 9: FetchKv accepted chunk_bytes=1, one gRPC message per byte. A
// request asking for less than 4 KiB gets 4 KiB chunks; the bytes are the
// handle's rows.
TEST_F(HardeningTest, FetchKvChunksAreAtLeastTheMinimum) {
  UseWorkload(/*row_bytes=*/1024, /*alpha=*/0.9);
  Start();
  absl::StatusOr<v1::VerifyResponse> r = client_->Verify(Request(0, 8, v1::KV_RETURN_HANDLE));
  ASSERT_THAT(r, IsOk());
  const std::span<const std::byte> expected = client::ExpectedPackedKv(workload_, 0, 8);
  ASSERT_GT(expected.size(), size_t{2 * kMinFetchChunkBytes});  // several chunks

  auto stub = v1::Verifier::NewStub(channel_);
  for (int64_t asked : {int64_t{1}, int64_t{7}, kMinFetchChunkBytes - 1}) {
    grpc::ClientContext context;
    v1::FetchKvRequest request;
    request.set_handle(r->kv().id());
    request.set_chunk_bytes(asked);
    auto reader = stub->FetchKv(&context, request);
    v1::FetchKvChunk chunk;
    std::string bytes;
    std::vector<size_t> sizes;
    while (reader->Read(&chunk)) {
      sizes.push_back(chunk.data().size());
      bytes += chunk.data();
    }
    ASSERT_TRUE(reader->Finish().ok()) << asked;
    ASSERT_EQ(bytes.size(), expected.size()) << asked;
    EXPECT_EQ(0, std::memcmp(bytes.data(), expected.data(), bytes.size())) << asked;
    const size_t chunks = (expected.size() + kMinFetchChunkBytes - 1) / kMinFetchChunkBytes;
    ASSERT_EQ(sizes.size(), chunks) << "chunk_bytes " << asked;
    for (size_t i = 0; i + 1 < sizes.size(); ++i) EXPECT_EQ(sizes[i], size_t{kMinFetchChunkBytes});
  }
}

// Defect 9: one libprotobuf ERROR line per request whose request_id is not
// valid UTF-8 flooded the log. Such requests are answered INVALID_ARGUMENT
// (the message does not parse) and the server's protobuf log handler prints
// at most one line per call site per 10 s.
TEST_F(HardeningTest, InvalidUtf8RequestIdsAreAnsweredAndDoNotFloodTheLog) {
  Start();
  // Serialized by hand (a placeholder patched to bytes that are not UTF-8),
  // so that the client side logs nothing.
  const std::string placeholder = "@@@@";
  std::string bytes = Serialized(Request(0, 1, v1::KV_RETURN_INLINE, placeholder));
  const size_t at = bytes.find(placeholder);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, placeholder.size(), std::string("\xff\xfe\xc0\x80", 4));

  constexpr int kRequests = 200;
  ::testing::internal::CaptureStderr();
  int invalid = 0;
  std::string first_message;
  for (int i = 0; i < kRequests; ++i) {
    RawResult r = RawCall(channel_, "/specverify.v1.Verifier/Verify", {bytes});
    if (r.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) ++invalid;
    if (i == 0) first_message = r.status.error_message();
  }
  // The stream path: the stream ends INVALID_ARGUMENT at that message.
  RawResult stream = RawCall(channel_, "/specverify.v1.Verifier/VerifyStream", {bytes});
  const std::string log = ::testing::internal::GetCapturedStderr();

  EXPECT_EQ(invalid, kRequests);
  EXPECT_THAT(first_message, HasSubstr("could not be parsed as specverify.v1.VerifyRequest"));
  EXPECT_THAT(first_message, HasSubstr("not valid UTF-8"));
  EXPECT_EQ(stream.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  int lines = 0;
  for (size_t p = log.find("invalid UTF-8"); p != std::string::npos;
       p = log.find("invalid UTF-8", p + 1)) {
    ++lines;
  }
  EXPECT_GE(lines, 1) << log;  // the first one is reported
  EXPECT_LE(lines, 2) << log;  // (2: the test crossed one 10 s boundary)
  // The server still serves.
  absl::StatusOr<v1::VerifyResponse> ok = client_->Verify(Request(0, 2, v1::KV_RETURN_INLINE, "ok"));
  ASSERT_THAT(ok, IsOk());
  EXPECT_THAT(Check(0, 2, v1::KV_RETURN_INLINE, *ok), IsOk());
}

TEST(LogRateLimiterTest, OneLinePerSitePerIntervalWithTheSuppressedCount) {
  LogRateLimiter limiter(absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  int64_t suppressed = -1;
  EXPECT_TRUE(limiter.Admit("a.cc:1", t0, &suppressed));
  EXPECT_EQ(suppressed, 0);
  for (int i = 1; i <= 5; ++i) EXPECT_FALSE(limiter.Admit("a.cc:1", t0 + absl::Seconds(i), &suppressed));
  EXPECT_TRUE(limiter.Admit("b.cc:2", t0 + absl::Seconds(1), &suppressed));  // its own budget
  EXPECT_EQ(suppressed, 0);
  EXPECT_FALSE(limiter.Admit("a.cc:1", t0 + absl::Seconds(10) - absl::Nanoseconds(1), &suppressed));
  EXPECT_TRUE(limiter.Admit("a.cc:1", t0 + absl::Seconds(10), &suppressed));
  EXPECT_EQ(suppressed, 6);
  EXPECT_FALSE(limiter.Admit("a.cc:1", t0 + absl::Seconds(11), &suppressed));
}

// Defect 8: a VerifyStream whose client never read made the server buffer
// every answer (RSS 279 -> 612 MB for 400 answers of 768 KiB). With
// --max_stream_buffered_answers=4 the server admits 4 requests, then stops
// reading the stream while their answers wait for the client; the client's
// writes stall in flow control. Once the client reads, every answer arrives,
// in order, correct.
TEST_F(HardeningTest, StreamWhoseClientDoesNotReadStopsBeingReadUntilItDoes) {
  constexpr int kBound = 4;
  constexpr int kRequests = 40;
  // Every row accepted: inline answers of 2-8 rows of 64 KiB (128-512 KiB),
  // more than the client's flow-control window, so none is delivered unread.
  UseWorkload(/*row_bytes=*/64 << 10, /*alpha=*/1.0);
  options_.max_stream_buffered_answers = kBound;
  options_.kv_arena_bytes = 64 << 20;
  Start();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);  // the client's window stays at 64 KiB
  args.SetMaxReceiveMessageSize(16 << 20);
  auto stub = v1::Verifier::NewStub(
      grpc::CreateCustomChannel(server_->local_address(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto stream = stub->VerifyStream(&context);
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; i < kRequests; ++i) {
      if (!stream->Write(Request(i, 1, v1::KV_RETURN_INLINE, absl::StrCat("r", i)))) return;
      written.fetch_add(1);
    }
    stream->WritesDone();
  });
  // Whatever fails below, the writer (blocked in flow control) is released.
  absl::Cleanup release_writer = [&] {
    context.TryCancel();
    writer.join();
  };

  ASSERT_TRUE(Eventually([&] { return metrics_.stream_answered() >= kBound; }))
      << metrics_.stream_answered() << " answered";
  // Asserting that something does not happen needs a window: for 1 s the
  // server answers no more (it does not read) and the client cannot finish
  // writing (flow control). Without the bound it reads and answers all 40
  // within milliseconds.
  EXPECT_FALSE(Eventually(
      [&] { return metrics_.stream_answered() > kBound || written.load() == kRequests; },
      absl::Seconds(1)))
      << metrics_.stream_answered() << " answered, " << written.load() << " written";

  // Answers come in completion order (verifier.proto), which need not be
  // request order when two batches are in flight: match them by id.
  std::set<int> answered;
  for (int n = 0; n < kRequests; ++n) {
    v1::VerifyStreamResponse answer;
    ASSERT_TRUE(stream->Read(&answer)) << "answer " << n;
    ASSERT_TRUE(answer.has_response()) << answer.error().message();
    int i = -1;
    ASSERT_TRUE(absl::SimpleAtoi(answer.request_id().substr(1), &i)) << answer.request_id();
    ASSERT_TRUE(i >= 0 && i < kRequests && answered.insert(i).second) << answer.request_id();
    EXPECT_THAT(Check(i, 1, v1::KV_RETURN_INLINE, answer.response()), IsOk()) << i;
  }
  EXPECT_EQ(answered.size(), static_cast<size_t>(kRequests));
  v1::VerifyStreamResponse extra;
  EXPECT_FALSE(stream->Read(&extra));
  grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(written.load(), kRequests);
  EXPECT_EQ(metrics_.stream_answered(), kRequests);
}

// A client that cancels a stream paused at the bound ends it (the server
// resumes reading to see the cancellation) and the server goes on serving.
TEST_F(HardeningTest, CancellingAStreamPausedAtTheBoundEndsIt) {
  UseWorkload(/*row_bytes=*/64 << 10, /*alpha=*/1.0);
  options_.max_stream_buffered_answers = 2;
  options_.kv_arena_bytes = 64 << 20;
  Start();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto stub = v1::Verifier::NewStub(
      grpc::CreateCustomChannel(server_->local_address(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext context;
  auto stream = stub->VerifyStream(&context);
  std::thread writer([&] {
    for (int i = 0; i < 20; ++i) {
      if (!stream->Write(Request(i, 1, v1::KV_RETURN_INLINE, absl::StrCat("c", i)))) return;
    }
  });
  ASSERT_TRUE(Eventually([&] { return metrics_.stream_answered() >= 2; }));
  context.TryCancel();
  writer.join();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  absl::StatusOr<v1::VerifyResponse> ok = client_->Verify(Request(0, 1, v1::KV_RETURN_INLINE));
  ASSERT_THAT(ok, IsOk());
  EXPECT_THAT(Check(0, 1, v1::KV_RETURN_INLINE, *ok), IsOk());
  // The paused stream finished: shutdown does not wait for it (a reactor
  // that never calls Finish would hold gRPC's shutdown forever).
  const absl::Time before = absl::Now();
  EXPECT_THAT(server_->Shutdown(absl::Seconds(5)), IsOk());
  EXPECT_LT(absl::Now() - before, absl::Seconds(4));
}

}  // namespace
}  // namespace specverify::server
