// The real server with --device=cuda:0 on loopback: many concurrent clients
// checked against the workload generator's oracle (KV bytes fetched back from
// the device arena included), both kernel paths, the full device arena, and a
// CUDA fault that must stop the server; two executors on one GPU (issue #16)
// sharing the load, one taken out by a fault. Skips visibly without a GPU.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/greedy_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/cuda_status.h"
#include "kernels/greedy/greedy_dispatch.h"
#include "server/app/verifier_server.h"
#include "server/backend/cuda/cuda_executor.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::client::AsBytes;
using ::specverify::client::BuildGreedyRequest;
using ::specverify::client::CheckGreedyResponse;
using ::specverify::client::GreedyCheckOptions;
using ::specverify::client::GreedyRequestOptions;
using ::specverify::client::VerifierClient;
using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

#define SKIP_WITHOUT_GPU()                                              \
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible: " \
                                              "the CUDA server tests need a GPU"

class CudaServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GreedyWorkloadOptions w;
    w.num_sequences = 2048;
    w.gamma_min = 1;
    w.gamma_max = 16;
    w.alpha = 0.7;
    w.row_bytes = 512;
    w.seed = 5150;
    workload_ = *GenerateGreedyWorkload(w);
    options_.listen_address = "127.0.0.1:0";
    options_.metrics_address = "";
    options_.device = "cuda:0";
    options_.max_queue_delay_us = 300;
    options_.max_batch_sequences = 256;
    options_.max_sequences_per_request = 16;
    options_.max_draft_tokens = 64;
    options_.max_message_bytes = 8 << 20;
    options_.max_batch_bytes = 4 << 20;
    options_.kv_arena_bytes = 64 << 20;
  }
  void TearDown() override {
    if (server_ != nullptr) (void)server_->Shutdown(absl::Seconds(5));
  }
  void Start(std::unique_ptr<Backend> backend = nullptr) {
    std::vector<DeviceBackend> devices;
    if (backend != nullptr) devices.push_back(DeviceBackend{std::move(backend), "cuda:0", 0});
    Start(std::move(devices));
  }
  void Start(std::vector<DeviceBackend> devices) {
    absl::StatusOr<std::unique_ptr<VerifierServer>> server =
        VerifierServer::Start(options_, &metrics_, std::move(devices));
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    client_ = NewClient();
  }
  std::unique_ptr<VerifierClient> NewClient() {
    client::VerifierClientOptions c;
    c.address = server_->local_address();
    c.default_deadline = absl::Seconds(30);
    return *VerifierClient::Create(c);
  }
  v1::VerifyRequest Request(int first, int n, v1::KvReturn kv_return) {
    GreedyRequestOptions r;
    r.first_sequence = first;
    r.num_sequences = n;
    r.kv_return = kv_return;
    return *BuildGreedyRequest(workload_, r);
  }
  absl::Status Check(int first, int n, v1::KvReturn kv_return, const v1::VerifyResponse& response,
                     const std::string* fetched = nullptr) {
    GreedyCheckOptions c;
    c.first_sequence = first;
    c.num_sequences = n;
    c.kv_return = kv_return;
    return CheckGreedyResponse(workload_, c, response,
                               fetched ? std::optional(AsBytes(*fetched)) : std::nullopt);
  }

  // `threads` clients, each sending `per_thread` requests of 1..16 sequences
  // in all three KV modes; handles are fetched, checked and released.
  // Answers by the execution path they report.
  struct PathCounts {
    std::atomic<int> fused{0}, two_step{0}, host_decided{0};
  };

  void HammerAndCheck(int threads, int per_thread, PathCounts* paths) {
    std::atomic<int> wrong{0};
    absl::Mutex mu;
    std::string first_wrong;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        std::unique_ptr<VerifierClient> client = NewClient();
        for (int i = 0; i < per_thread; ++i) {
          const int n = 1 + (t * 7 + i * 3) % 16;
          const int first = (t * 131 + i * 17) % (workload_.num_sequences() - n);
          const v1::KvReturn mode = i % 3 == 0   ? v1::KV_RETURN_INLINE
                                    : i % 3 == 1 ? v1::KV_RETURN_HANDLE
                                                 : v1::KV_RETURN_NONE;
          absl::StatusOr<v1::VerifyResponse> r = client->Verify(Request(first, n, mode));
          absl::Status verdict = r.status();
          std::string fetched;
          if (verdict.ok() && mode == v1::KV_RETURN_HANDLE && r->has_kv()) {
            absl::StatusOr<std::string> f = client->FetchKv(r->kv().id());
            verdict = f.status();
            if (f.ok()) fetched = *std::move(f);
            if (verdict.ok()) verdict = client->ReleaseKv(r->kv().id()).status();
          }
          if (verdict.ok()) {
            verdict = Check(first, n, mode, *r,
                            mode == v1::KV_RETURN_HANDLE && r->has_kv() ? &fetched : nullptr);
          }
          if (verdict.ok()) {
            const v1::ExecutionPath path = r->timing().path();
            if (path == v1::EXECUTION_PATH_FUSED) ++paths->fused;
            else if (path == v1::EXECUTION_PATH_TWO_STEP) ++paths->two_step;
            else if (path == v1::EXECUTION_PATH_HOST_DECIDED) ++paths->host_decided;
            else verdict = absl::InternalError(absl::StrCat("path ", path));
            // A host-decided batch with no accepted row launches nothing.
            if (r->timing().device_ns() < 0 ||
                (r->timing().device_ns() == 0 && path != v1::EXECUTION_PATH_HOST_DECIDED)) {
              verdict = absl::InternalError("no device time");
            }
          }
          if (!verdict.ok()) {
            ++wrong;
            absl::MutexLock lock(&mu);
            if (first_wrong.empty()) first_wrong = verdict.ToString();
          }
        }
      });
    }
    for (auto& t : pool) t.join();
    EXPECT_EQ(wrong.load(), 0) << first_wrong;
  }

  GreedyWorkload workload_;
  ServerOptions options_;
  NoopServerMetrics metrics_;
  std::unique_ptr<VerifierServer> server_;
  std::unique_ptr<VerifierClient> client_;
};

// The default: greedy chains decided on the host, the GPU copying the
// accepted rows (kernels/greedy/greedy_planned_pack.h).
TEST_F(CudaServerTest, ManyConcurrentClientsMatchTheOracleWithHostDecisions) {
  SKIP_WITHOUT_GPU();
  options_.cuda_slots = 3;
  Start();
  PathCounts paths;
  HammerAndCheck(/*threads=*/32, /*per_thread=*/30, &paths);
  EXPECT_EQ(paths.host_decided.load(), 32 * 30);
  EXPECT_THAT(server_->backend_health(), IsOk());
  EXPECT_EQ(server_->arena().used_bytes(), 0);  // every handle was released
}

TEST_F(CudaServerTest, ManyConcurrentClientsMatchTheOracleOnTheCalibratedDispatcher) {
  SKIP_WITHOUT_GPU();
  options_.cuda_host_decision_max_rows = 0;
  Start();
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->backend(), "cuda");
  EXPECT_EQ(info->dispatch_threshold_source(), "calibration");
  EXPECT_GT(info->dispatch_threshold_bytes(), 0);
  EXPECT_THAT(server_->backend_reason(), HasSubstr("slots; dispatch "));
  PathCounts paths;
  HammerAndCheck(/*threads=*/32, /*per_thread=*/30, &paths);
  EXPECT_EQ(paths.fused + paths.two_step, 32 * 30);
  EXPECT_THAT(server_->backend_health(), IsOk());
  EXPECT_EQ(server_->arena().used_bytes(), 0);  // every handle was released
}

TEST_F(CudaServerTest, TwoStepPathForcedByTheFlagMatchesTheOracle) {
  SKIP_WITHOUT_GPU();
  options_.cuda_host_decision_max_rows = 0;
  options_.dispatch_threshold_bytes = 0;
  Start();
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->dispatch_threshold_source(), "config");
  EXPECT_EQ(info->dispatch_threshold_bytes(), 0);
  PathCounts paths;
  HammerAndCheck(/*threads=*/16, /*per_thread=*/20, &paths);
  EXPECT_EQ(paths.fused.load(), 0);
  EXPECT_EQ(paths.two_step.load(), 16 * 20);
}

TEST_F(CudaServerTest, FusedPathForcedByTheFlagMatchesTheOracle) {
  SKIP_WITHOUT_GPU();
  options_.cuda_host_decision_max_rows = 0;
  options_.dispatch_threshold_bytes = kFusedAlwaysThreshold;
  options_.cuda_slots = 3;
  Start();
  PathCounts paths;
  HammerAndCheck(/*threads=*/16, /*per_thread=*/20, &paths);
  EXPECT_EQ(paths.fused.load(), 16 * 20);
  EXPECT_EQ(paths.two_step.load(), 0);
}

TEST_F(CudaServerTest, FullDeviceArenaIsResourceExhaustedAndLiveHandlesSurvive) {
  SKIP_WITHOUT_GPU();
  options_.kv_arena_bytes = 64 * 1024;  // 128 rows of 512 B
  options_.dispatch_threshold_bytes = kFusedAlwaysThreshold;
  Start();
  // Keep handles until the arena refuses one; every kept handle must still
  // read back its own rows afterwards (nothing overwritten on the device).
  struct Kept {
    int first;
    v1::VerifyResponse response;
  };
  std::vector<Kept> kept;
  absl::Status refused;
  for (int first = 0; first + 4 <= workload_.num_sequences(); first += 4) {
    absl::StatusOr<v1::VerifyResponse> r = client_->Verify(Request(first, 4, v1::KV_RETURN_HANDLE));
    if (!r.ok()) {
      refused = r.status();
      break;
    }
    kept.push_back({first, *std::move(r)});
  }
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("KV arena full")));
  ASSERT_FALSE(kept.empty());
  for (const Kept& k : kept) {
    absl::StatusOr<std::string> fetched = client_->FetchKv(k.response.kv().id());
    ASSERT_THAT(fetched, IsOk());
    EXPECT_THAT(Check(k.first, 4, v1::KV_RETURN_HANDLE, k.response, &*fetched), IsOk());
  }
  EXPECT_THAT(server_->backend_health(), IsOk());
  // Released space is reused for new batches.
  for (const Kept& k : kept) ASSERT_THAT(client_->ReleaseKv(k.response.kv().id()), IsOk());
  absl::StatusOr<v1::VerifyResponse> again = client_->Verify(Request(0, 4, v1::KV_RETURN_HANDLE));
  ASSERT_THAT(again, IsOk());
  absl::StatusOr<std::string> fetched = client_->FetchKv(again->kv().id());
  ASSERT_THAT(fetched, IsOk());
  EXPECT_THAT(Check(0, 4, v1::KV_RETURN_HANDLE, *again, &*fetched), IsOk());
}

TEST_F(CudaServerTest, CudaFaultFailsRequestsInternalAndStopsTheServer) {
  SKIP_WITHOUT_GPU();
  CudaExecutorOptions o;
  o.max_batch_sequences = options_.max_batch_sequences;
  o.max_draft_tokens = options_.max_draft_tokens;
  o.max_batch_kv_bytes = options_.max_message_bytes;
  o.dispatch_threshold_bytes = kFusedAlwaysThreshold;
  o.fail_batch_number_for_testing = 3;
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::Create(o);
  ASSERT_THAT(executor, IsOk());
  Start(*std::move(executor));
  // Requests one at a time: batches 1 and 2 answer, batch 3 meets the fault.
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<v1::VerifyResponse> r = client_->Verify(Request(i, 1, v1::KV_RETURN_INLINE));
    ASSERT_THAT(r, IsOk());
    EXPECT_THAT(Check(i, 1, v1::KV_RETURN_INLINE, *r), IsOk());
  }
  EXPECT_THAT(client_->Verify(Request(2, 1, v1::KV_RETURN_INLINE)),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("cudaErrorInvalidMemcpyDirection")));
  EXPECT_THAT(server_->WaitForStopRequest(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("out of service")));
  absl::StatusOr<bool> serving = client_->CheckHealth();
  ASSERT_THAT(serving, IsOk());
  EXPECT_FALSE(*serving);
  // Never an answer from a failed device.
  EXPECT_THAT(client_->Verify(Request(3, 1, v1::KV_RETURN_INLINE)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("backend failed")));
  EXPECT_FALSE(server_->backend_health().ok());
}

// Two executors on one GPU (--device=cuda:0,0 builds the same): each batch
// goes to the less loaded, every answer is right on both, and a fault on one
// executor takes only it out: its handles answer FAILED_PRECONDITION, the
// other executor serves on and health stays SERVING.
TEST_F(CudaServerTest, TwoExecutorsShareTheGpuAndAFaultTakesOnlyOneOut) {
  SKIP_WITHOUT_GPU();
  std::vector<DeviceBackend> devices;
  CudaExecutor* second = nullptr;
  for (int i = 0; i < 2; ++i) {
    CudaExecutorOptions o;
    o.max_batch_sequences = options_.max_batch_sequences;
    o.max_draft_tokens = options_.max_draft_tokens;
    o.max_batch_kv_bytes = options_.max_message_bytes;
    o.dispatch_threshold_bytes = kFusedAlwaysThreshold;
    absl::StatusOr<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::Create(o);
    ASSERT_THAT(executor, IsOk());
    if (i == 1) second = executor->get();
    devices.push_back(DeviceBackend{*std::move(executor), i == 0 ? "cuda:0" : "cuda:0#1", 0});
  }
  Start(std::move(devices));
  PathCounts paths;
  HammerAndCheck(/*threads=*/6, /*per_thread=*/30, &paths);
  EXPECT_EQ(paths.host_decided.load(), 6 * 30);

  // Sequential requests alternate between the idle executors: find one
  // whose handle lives on the second, then arm its fault.
  std::string kept;
  for (int i = 0; i < 4 && kept.empty(); ++i) {
    absl::StatusOr<v1::VerifyResponse> r = client_->Verify(Request(i, 2, v1::KV_RETURN_HANDLE));
    ASSERT_THAT(r, IsOk());
    if (r->timing().device() == 1) kept = r->kv().id();
  }
  ASSERT_FALSE(kept.empty()) << "no request ran on the second executor";
  second->InjectFaultForTesting();
  int failed = 0;
  for (int i = 0; i < 16; ++i) {
    absl::StatusOr<v1::VerifyResponse> r = client_->Verify(Request(100 + i, 2, v1::KV_RETURN_INLINE));
    if (!r.ok()) {
      EXPECT_THAT(r.status(), StatusIs(absl::StatusCode::kInternal, HasSubstr("cuda:0#1")));
      ++failed;
      continue;
    }
    EXPECT_THAT(Check(100 + i, 2, v1::KV_RETURN_INLINE, *r), IsOk());
    if (failed > 0) {
      EXPECT_EQ(r->timing().device(), 0);
    }
  }
  EXPECT_EQ(failed, 1) << "exactly the batch that met the fault fails";
  EXPECT_THAT(server_->backend_health(), IsOk());
  absl::StatusOr<bool> serving = client_->CheckHealth();
  ASSERT_THAT(serving, IsOk());
  EXPECT_TRUE(*serving);
  absl::StatusOr<bool> second_serving = client_->CheckHealth("specverify.v1.Verifier/cuda:0#1");
  ASSERT_THAT(second_serving, IsOk());
  EXPECT_FALSE(*second_serving);
  EXPECT_THAT(client_->FetchKv(kept), StatusIs(absl::StatusCode::kFailedPrecondition,
                                               HasSubstr("lives on device cuda:0#1")));
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_THAT(info, IsOk());
  ASSERT_EQ(info->devices_size(), 2);
  EXPECT_TRUE(info->devices(0).in_service());
  EXPECT_FALSE(info->devices(1).in_service());
}

}  // namespace
}  // namespace specverify::server
