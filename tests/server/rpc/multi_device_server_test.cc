// One server driving several executors (issue #16), end to end: a real server
// on loopback and real clients. Two CPU executors (--device=cpu:0,1) stand in
// for two GPUs here; the same paths on one GPU with two CUDA executors are in
// tests/server/cuda/cuda_server_test.cc.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/greedy_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/workload/greedy_workload.h"
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

constexpr int64_t kRowBytes = 128;

class MultiDeviceServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GreedyWorkloadOptions w;
    w.num_sequences = 256;
    w.gamma_min = 1;
    w.gamma_max = 8;
    w.alpha = 0.7;
    w.row_bytes = kRowBytes;
    w.vocab_size = 5000;
    w.seed = 11;
    workload_ = *GenerateGreedyWorkload(w);
    options_.listen_address = "127.0.0.1:0";
    options_.metrics_address = "";
    options_.device = "cpu:0,1";
    options_.cpu_threads = 2;
    options_.kv_arena_bytes = 8 << 20;
  }
  void TearDown() override {
    for (ControllableBackend* b : controllable_) b->Resume();
    if (server_ != nullptr) (void)server_->Shutdown(absl::Seconds(5));
  }

  // Starts on options_.device, or on two controllable CPU executors.
  void Start(bool controllable = false) {
    absl::StatusOr<std::unique_ptr<VerifierServer>> server;
    if (controllable) {
      std::vector<DeviceBackend> devices;
      for (int i = 0; i < 2; ++i) {
        auto backend = std::make_unique<ControllableBackend>();
        controllable_.push_back(backend.get());
        devices.push_back(DeviceBackend{std::move(backend), absl::StrCat("cpu:", i), -1});
      }
      server = VerifierServer::Start(options_, &metrics_, std::move(devices));
    } else {
      server = VerifierServer::Start(options_, &metrics_);
    }
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
    GreedyRequestOptions o;
    o.first_sequence = first;
    o.num_sequences = n;
    o.kv_return = kv_return;
    return *BuildGreedyRequest(workload_, o);
  }
  // The oracle's check of an answer: a handle's metadata, and its rows
  // fetched from whichever device holds them; inline rows as they came.
  absl::Status Check(VerifierClient& client, int first, int n, const v1::VerifyResponse& response) {
    GreedyCheckOptions check;
    check.first_sequence = first;
    check.num_sequences = n;
    if (!response.has_kv()) {
      check.kv_return = v1::KV_RETURN_INLINE;
      return CheckGreedyResponse(workload_, check, response);
    }
    absl::StatusOr<std::string> rows = client.FetchKv(response.kv().id());
    if (!rows.ok()) return rows.status();
    check.kv_return = v1::KV_RETURN_HANDLE;
    return CheckGreedyResponse(workload_, check, response, client::AsBytes(*rows));
  }

  // A health check's answer; false when the call itself failed.
  static bool Health(const absl::StatusOr<bool>& serving) {
    EXPECT_THAT(serving, IsOk());
    return serving.ok() && *serving;
  }

  GreedyWorkload workload_;
  ServerOptions options_;
  NoopServerMetrics metrics_;
  std::vector<ControllableBackend*> controllable_;
  std::unique_ptr<VerifierServer> server_;
  std::unique_ptr<VerifierClient> client_;
};

TEST_F(MultiDeviceServerTest, ServerInfoListsEveryDevice) {
  Start();
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_THAT(info, IsOk());
  ASSERT_EQ(info->devices_size(), 2);
  for (int i = 0; i < 2; ++i) {
    const v1::DeviceInfo& d = info->devices(i);
    EXPECT_EQ(d.index(), i);
    EXPECT_EQ(d.name(), absl::StrCat("cpu:", i));
    EXPECT_EQ(d.backend(), "cpu");
    EXPECT_EQ(d.cuda_ordinal(), -1);
    EXPECT_TRUE(d.in_service());
    EXPECT_EQ(d.kv_arena_bytes(), 8 << 20);
    EXPECT_GE(d.max_batches_in_flight(), 1);
  }
  EXPECT_EQ(info->backend(), "cpu");
  // Every device has its own health entry beside the overall one.
  EXPECT_EQ(Health(client_->CheckHealth("specverify.v1.Verifier/cpu:1")), true);
}

// Concurrent clients keep both executors busy: every answer (handle rows
// fetched from the device that holds them) matches the oracle, and both
// devices ran batches.
TEST_F(MultiDeviceServerTest, ConcurrentRequestsSpreadOverBothDevicesAndAllAreRight) {
  Start();
  constexpr int kThreads = 6;
  constexpr int kPerThread = 40;
  std::atomic<int> wrong{0};
  std::atomic<int> on_device[2] = {0, 0};
  absl::Mutex mu;
  std::string first_wrong;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<VerifierClient> client = NewClient();
      for (int i = 0; i < kPerThread; ++i) {
        const int first = (t * 41 + i * 3) % 250;
        const int n = 1 + (i % 4);
        const v1::KvReturn kv_return = i % 2 == 0 ? v1::KV_RETURN_HANDLE : v1::KV_RETURN_INLINE;
        absl::StatusOr<v1::VerifyResponse> r = client->Verify(Request(first, n, kv_return));
        absl::Status s = r.ok() ? Check(*client, first, n, *r) : r.status();
        if (s.ok()) {
          const int device = r->timing().device();
          if (device == 0 || device == 1) on_device[device].fetch_add(1);
          if (r->has_kv() && r->kv().id().substr(0, 2) != absl::StrCat("0", device)) {
            s = absl::InternalError(absl::StrCat("handle ", r->kv().id(), " from device ", device));
          }
        }
        if (!s.ok()) {
          wrong.fetch_add(1);
          absl::MutexLock lock(&mu);
          if (first_wrong.empty()) first_wrong = s.ToString();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0) << first_wrong;
  EXPECT_EQ(on_device[0].load() + on_device[1].load(), kThreads * kPerThread);
  EXPECT_GT(on_device[0].load(), 0);
  EXPECT_GT(on_device[1].load(), 0);
}

TEST_F(MultiDeviceServerTest, AFaultTakesOneDeviceOutAndTheOtherServesOn) {
  Start(/*controllable=*/true);
  // A handle on device 1: device 0 holds a batch, so the next goes there.
  controllable_[0]->Pause();
  absl::StatusOr<v1::VerifyResponse> held;
  absl::Notification held_done;
  std::thread holder([&] {
    std::unique_ptr<VerifierClient> client = NewClient();
    held = client->Verify(Request(0, 4, v1::KV_RETURN_INLINE));
    held_done.Notify();
  });
  while (controllable_[0]->held_batches() == 0) absl::SleepFor(absl::Milliseconds(1));
  absl::StatusOr<v1::VerifyResponse> kept = client_->Verify(Request(10, 2, v1::KV_RETURN_HANDLE));
  ASSERT_THAT(kept, IsOk());
  ASSERT_EQ(kept->timing().device(), 1);
  ASSERT_EQ(kept->kv().id().substr(0, 2), "01");

  controllable_[1]->Fail(absl::InternalError("CUDA error: an illegal memory access (injected)"));
  EXPECT_THAT(client_->Verify(Request(20, 1, v1::KV_RETURN_INLINE)),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("device cpu:1: the backend failed the batch")));

  // The server serves on; health says which device is out.
  EXPECT_THAT(server_->backend_health(), IsOk());
  EXPECT_EQ(Health(client_->CheckHealth()), true);
  EXPECT_EQ(Health(client_->CheckHealth("specverify.v1.Verifier/cpu:1")), false);
  EXPECT_EQ(Health(client_->CheckHealth("specverify.v1.Verifier/cpu:0")), true);
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_THAT(info, IsOk());
  EXPECT_TRUE(info->devices(0).in_service());
  EXPECT_FALSE(info->devices(1).in_service());
  EXPECT_THAT(info->devices(1).out_of_service_reason(), HasSubstr("illegal memory access"));
  // Its handles answer a clear status instead of lost rows.
  EXPECT_THAT(client_->FetchKv(kept->kv().id()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("lives on device cpu:1, which a fault took out of service")));
  EXPECT_THAT(client_->ReleaseKv(kept->kv().id()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("cpu:1")));

  controllable_[0]->Resume();
  held_done.WaitForNotification();
  holder.join();
  ASSERT_THAT(held, IsOk());
  EXPECT_THAT(Check(*client_, 0, 4, *held), IsOk());
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<v1::VerifyResponse> r = client_->Verify(Request(30 + i, 2, v1::KV_RETURN_HANDLE));
    ASSERT_THAT(r, IsOk());
    EXPECT_EQ(r->timing().device(), 0);
    EXPECT_THAT(Check(*client_, 30 + i, 2, *r), IsOk());
  }
}

TEST_F(MultiDeviceServerTest, StopOnDeviceFailureStopsServingAtTheFirstFault) {
  options_.stop_on_device_failure = true;
  Start(/*controllable=*/true);
  controllable_[0]->Fail(absl::InternalError("CUDA error: uncorrectable ECC error (injected)"));
  controllable_[1]->Fail(absl::InternalError("CUDA error: uncorrectable ECC error (injected)"));
  EXPECT_THAT(client_->Verify(Request(0, 1, v1::KV_RETURN_INLINE)),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("ECC")));
  EXPECT_THAT(server_->WaitForStopRequest(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("out of service")));
  EXPECT_EQ(Health(client_->CheckHealth()), false);
  EXPECT_FALSE(server_->backend_health().ok());
}

}  // namespace
}  // namespace specverify::server
