// The batcher over several devices (issue #16): least-loaded dispatch,
// batches pinned to the GPU their CUDA regions live on, and a fault that
// takes one device out while the others serve on. Two controllable CPU
// backends stand in for two GPUs (their DeviceSet entries claim ordinals 0
// and 1); the batcher dispatches on enqueue, as the server runs it.
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "client/greedy_requests.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/batcher/batcher.h"
#include "server/rpc/validation.h"
#include "tests/server/testing/controllable_backend.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::server::testing::ControllableBackend;
using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::_;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kRowBytes = 64;

struct Call {
  v1::VerifyRequest request;
  v1::VerifyResponse response;
  absl::Notification answered;
  absl::Status status;
  bool Wait() { return answered.WaitForNotificationWithTimeout(absl::Seconds(10)); }
};

class MultiDeviceBatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GreedyWorkloadOptions w;
    w.num_sequences = 32;
    w.gamma_min = 4;
    w.gamma_max = 4;
    w.row_bytes = kRowBytes;
    w.vocab_size = 1000;
    w.seed = 7;
    workload_ = *GenerateGreedyWorkload(w);
  }
  void TearDown() override {
    for (auto& b : backends_) b->Resume();
    if (batcher_ != nullptr) batcher_->Stop();
  }

  void Make(bool stop_on_device_failure = false, int64_t quota_bytes = 0) {
    quota_ = std::make_unique<ClientQuota>(quota_bytes);
    std::vector<Device> devices;
    for (int i = 0; i < 2; ++i) {
      backends_.push_back(std::make_unique<ControllableBackend>());
      KvArenaOptions a;
      a.metrics = &metrics_;
      a.reap_interval = absl::ZeroDuration();
      a.quota = quota_.get();
      a.device_index = i;
      arenas_.push_back(*KvArena::Create(*backends_[i]->AllocateArenaMemory(1 << 20), a));
      devices.push_back(Device{absl::StrCat("cuda:", i), i, backends_[i].get(), arenas_[i].get()});
    }
    devices_ = std::make_unique<DeviceSet>(std::move(devices));
    BatcherOptions o;
    o.devices = devices_.get();
    o.metrics = &metrics_;
    o.start_thread = false;
    o.stop_on_device_failure = stop_on_device_failure;
    o.on_backend_failure = [this](const absl::Status& s) { stopped_ = s; };
    o.on_device_failure = [this](int device, const absl::Status& s) {
      out_devices_.push_back(device);
      out_status_ = s;
    };
    batcher_ = *Batcher::Create(o);
  }

  // Sequences [first, first + n) as one request; `pinned_to` >= 0 pins it
  // to that GPU as CUDA regions there would.
  absl::Status Enqueue(Call& call, int first, int n, int32_t pinned_to = -1) {
    client::GreedyRequestOptions r;
    r.first_sequence = first;
    r.num_sequences = n;
    r.kv_return = v1::KV_RETURN_HANDLE;
    call.request = *client::BuildGreedyRequest(workload_, r);
    auto pending = std::make_unique<PendingRequest>();
    pending->request = &call.request;
    pending->response = &call.response;
    pending->shape = *ValidateVerifyRequest(call.request, RequestLimits{});
    pending->shape.key.cuda_ordinal = pinned_to;
    pending->arrival = absl::Now();
    pending->done = [&call](absl::Status s) {
      call.status = std::move(s);
      call.answered.Notify();
    };
    return batcher_->Enqueue(std::move(pending));
  }

  int Batches(int device) { return static_cast<int>(backends_[device]->batch_sequences().size()); }

  GreedyWorkload workload_;
  NoopServerMetrics metrics_;
  std::unique_ptr<ClientQuota> quota_;
  std::vector<std::unique_ptr<ControllableBackend>> backends_;
  std::vector<std::unique_ptr<KvArena>> arenas_;
  std::unique_ptr<DeviceSet> devices_;
  std::unique_ptr<Batcher> batcher_;
  absl::Status stopped_;
  std::vector<int> out_devices_;
  absl::Status out_status_;
};

TEST_F(MultiDeviceBatcherTest, EachBatchGoesToTheDeviceWithTheLeastWorkInFlight) {
  Make();
  backends_[0]->Pause();
  backends_[1]->Pause();
  Call big, small1, small2;
  ASSERT_THAT(Enqueue(big, 0, 8), IsOk());     // both idle: the first device
  ASSERT_THAT(Enqueue(small1, 8, 1), IsOk());  // device 0 has 8 sequences' work
  ASSERT_THAT(Enqueue(small2, 9, 1), IsOk());  // device 1 has 1 sequence's: still less
  EXPECT_THAT(backends_[0]->batch_sequences(), ElementsAre(8));
  EXPECT_THAT(backends_[1]->batch_sequences(), ElementsAre(1, 1));
  EXPECT_EQ(batcher_->in_flight_batches(0), 1);
  EXPECT_EQ(batcher_->in_flight_batches(1), 2);
  backends_[0]->Resume();
  backends_[1]->Resume();
  for (Call* c : {&big, &small1, &small2}) {
    ASSERT_TRUE(c->Wait());
    ASSERT_THAT(c->status, IsOk());
  }
  // The answer names the device, and so does the handle: its first byte.
  EXPECT_EQ(big.response.timing().device(), 0);
  EXPECT_EQ(small1.response.timing().device(), 1);
  EXPECT_EQ(big.response.kv().id().substr(0, 2), "00");
  EXPECT_EQ(small2.response.kv().id().substr(0, 2), "01");
  EXPECT_THAT(*devices_->ArenaForHandle(small2.response.kv().id()), arenas_[1].get());
  EXPECT_THAT(arenas_[1]->Lookup(small2.response.kv().id()), IsOk());
  EXPECT_THAT(arenas_[0]->Lookup(small2.response.kv().id()),
              StatusIs(absl::StatusCode::kNotFound, _));
}

TEST_F(MultiDeviceBatcherTest, AFullDeviceLeavesItsBatchesToTheOther) {
  Make();
  backends_[0]->Pause();
  backends_[1]->Pause();
  Call calls[5];
  // Two slots each (the CPU backend's max_batches_in_flight): four batches
  // fill both devices, the fifth request waits for a slot.
  for (int i = 0; i < 5; ++i) ASSERT_THAT(Enqueue(calls[i], i, 1), IsOk());
  EXPECT_EQ(Batches(0) + Batches(1), 4);
  EXPECT_EQ(Batches(0), 2);
  EXPECT_EQ(batcher_->queued_sequences(), 1);
  // Ties alternate: requests 0 and 2 went to device 0, 1 and 3 to device 1.
  EXPECT_EQ(batcher_->in_flight_batches(1), 2);
  backends_[1]->ReleaseNewest();
  ASSERT_TRUE(calls[3].Wait());
  absl::Time limit = absl::Now() + absl::Seconds(10);
  while (Batches(1) < 3 && absl::Now() < limit) {
    batcher_->RunOnce();
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(Batches(1), 3) << "the freed slot on device 1 took the waiting request";
  backends_[0]->Resume();
  backends_[1]->Resume();
  for (Call& c : calls) {
    ASSERT_TRUE(c.Wait());
    EXPECT_THAT(c.status, IsOk());
  }
}

TEST_F(MultiDeviceBatcherTest, BatchesPinnedToAGpuRunThereEvenWhenItIsBusier) {
  Make();
  backends_[0]->Pause();
  backends_[1]->Pause();
  Call busy, pinned, free;
  ASSERT_THAT(Enqueue(busy, 0, 8, /*pinned_to=*/1), IsOk());
  ASSERT_THAT(Enqueue(pinned, 8, 1, /*pinned_to=*/1), IsOk());
  ASSERT_THAT(Enqueue(free, 9, 1), IsOk());
  EXPECT_THAT(backends_[1]->batch_sequences(), ElementsAre(8, 1));
  EXPECT_THAT(backends_[0]->batch_sequences(), ElementsAre(1));
  backends_[0]->Resume();
  backends_[1]->Resume();
  for (Call* c : {&busy, &pinned, &free}) {
    ASSERT_TRUE(c->Wait());
    EXPECT_THAT(c->status, IsOk());
  }
  EXPECT_EQ(pinned.response.timing().device(), 1);
}

TEST_F(MultiDeviceBatcherTest, AFaultTakesOnlyItsDeviceOutOfService) {
  Make();
  backends_[0]->Pause();
  backends_[1]->Fail(absl::InternalError("CUDA error: an illegal memory access (injected)"));
  Call held, doomed, after;
  ASSERT_THAT(Enqueue(held, 0, 4), IsOk());    // device 0, held
  ASSERT_THAT(Enqueue(doomed, 4, 1), IsOk());  // device 1, which fails it
  ASSERT_TRUE(doomed.Wait());
  EXPECT_THAT(doomed.status, StatusIs(absl::StatusCode::kInternal,
                                      HasSubstr("device cuda:1: the backend failed the batch")));
  EXPECT_THAT(out_devices_, ElementsAre(1));
  EXPECT_THAT(out_status_, StatusIs(absl::StatusCode::kInternal,
                                    HasSubstr("device cuda:1 is out of service")));
  EXPECT_THAT(stopped_, IsOk()) << "device 0 still serves";
  EXPECT_FALSE(devices_->in_service(1));
  EXPECT_EQ(devices_->in_service_count(), 1);

  // Later batches go to device 0 only, even with device 1's slots free.
  ASSERT_THAT(Enqueue(after, 5, 1), IsOk());
  EXPECT_EQ(Batches(0), 2);
  EXPECT_EQ(Batches(1), 1);
  backends_[0]->Resume();
  ASSERT_TRUE(held.Wait());
  ASSERT_TRUE(after.Wait());
  EXPECT_THAT(held.status, IsOk());
  EXPECT_THAT(after.status, IsOk());
  EXPECT_EQ(after.response.timing().device(), 0);

  // What only device 1 could run is refused at once, naming why.
  Call pinned;
  EXPECT_THAT(Enqueue(pinned, 6, 1, /*pinned_to=*/1),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("every executor there is out of service")));
  // Its handles name the device that lost them.
  EXPECT_THAT(devices_->ArenaForHandle("01" + std::string(30, 'a')),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("lives on device cuda:1, which a fault took out")));

  // The last device failing stops the server.
  backends_[0]->Fail(absl::InternalError("CUDA error: device lost (injected)"));
  Call last;
  ASSERT_THAT(Enqueue(last, 7, 1), IsOk());
  ASSERT_TRUE(last.Wait());
  EXPECT_THAT(last.status, StatusIs(absl::StatusCode::kInternal, _));
  EXPECT_THAT(stopped_, StatusIs(absl::StatusCode::kInternal, HasSubstr("device lost")));
  Call refused;
  EXPECT_THAT(Enqueue(refused, 8, 1), StatusIs(absl::StatusCode::kUnavailable, _));
}

// A healthy device's refusal of one batch (FAILED_PRECONDITION: a sampled
// token tree on a GPU without clusters) reaches the client with its code and
// the device named, and takes nothing out of service.
TEST_F(MultiDeviceBatcherTest, ABatchRefusedByAHealthyDeviceKeepsItsCodeAndTheDevice) {
  Make();
  backends_[1]->RefuseNext(absl::FailedPreconditionError("sampled token trees need thread-block clusters"));
  Call refused, after;
  ASSERT_THAT(Enqueue(refused, 0, 1, /*pinned_to=*/1), IsOk());
  ASSERT_TRUE(refused.Wait());
  EXPECT_THAT(refused.status, StatusIs(absl::StatusCode::kFailedPrecondition,
                                       HasSubstr("device cuda:1: sampled token trees need thread-block clusters")));
  EXPECT_THAT(out_devices_, IsEmpty());
  EXPECT_TRUE(devices_->in_service(1));
  ASSERT_THAT(Enqueue(after, 1, 1, /*pinned_to=*/1), IsOk());
  ASSERT_TRUE(after.Wait());
  EXPECT_THAT(after.status, IsOk());
  EXPECT_EQ(after.response.timing().device(), 1);
  EXPECT_THAT(stopped_, IsOk());
}

TEST_F(MultiDeviceBatcherTest, StopOnDeviceFailureStopsAtTheFirstFault) {
  Make(/*stop_on_device_failure=*/true);
  backends_[0]->Fail(absl::InternalError("CUDA error: ECC (injected)"));
  Call doomed;
  ASSERT_THAT(Enqueue(doomed, 0, 1), IsOk());
  ASSERT_TRUE(doomed.Wait());
  EXPECT_THAT(doomed.status, StatusIs(absl::StatusCode::kInternal, _));
  EXPECT_THAT(stopped_, StatusIs(absl::StatusCode::kInternal, HasSubstr("ECC")));
  EXPECT_THAT(out_devices_, IsEmpty());
  EXPECT_TRUE(devices_->in_service(1));
  Call refused;
  EXPECT_THAT(Enqueue(refused, 1, 1), StatusIs(absl::StatusCode::kUnavailable, _));
}

TEST_F(MultiDeviceBatcherTest, OneQuotaChargesAClientAcrossDevices) {
  Make(/*stop_on_device_failure=*/false, /*quota_bytes=*/int64_t{6} * 4 * kRowBytes);
  backends_[0]->Pause();
  backends_[1]->Pause();
  Call a, b, c;
  ASSERT_THAT(Enqueue(a, 0, 3), IsOk());  // device 0: 3 x 4 rows charged
  ASSERT_THAT(Enqueue(b, 3, 3), IsOk());  // device 1: the quota is now full
  EXPECT_EQ(Batches(0), 1);
  EXPECT_EQ(Batches(1), 1);
  EXPECT_THAT(Enqueue(c, 6, 1), StatusIs(absl::StatusCode::kResourceExhausted,
                                         HasSubstr("max_arena_bytes_per_client")));
  backends_[0]->Resume();
  backends_[1]->Resume();
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  // The handles hold the accepted rows' bytes, on two devices, in one account.
  const int64_t held =
      (a.response.kv().num_rows() + b.response.kv().num_rows()) * kRowBytes;
  EXPECT_EQ(quota_->client_bytes(""), held);
  ASSERT_THAT(arenas_[1]->Release(b.response.kv().id()), IsOk());
  EXPECT_EQ(quota_->client_bytes(""), a.response.kv().num_rows() * kRowBytes);
}

}  // namespace
}  // namespace specverify::server
