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

}  // namespace
}  // namespace specverify::server
