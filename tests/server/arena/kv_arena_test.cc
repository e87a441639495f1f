#include "server/arena/kv_arena.h"

#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

class KvArenaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KvArenaOptions options;
    options.handle_ttl = absl::Milliseconds(kTtlMs);
    options.reap_interval = absl::ZeroDuration();  // the test reaps
    options.clock = &clock_;
    options.metrics = &metrics_;
    arena_ = *KvArena::Create(*HostArenaMemory::Create(kCapacity), options);
  }
  // Writes `bytes` copies of `value` where a backend would pack.
  void Fill(int64_t offset, int64_t bytes, int value) {
    std::memset(arena_->memory().base() + offset, value, bytes);
  }

  static constexpr int64_t kCapacity = 4096;
  static constexpr int64_t kTtlMs = 1000;
  FakeClock clock_;
  NoopServerMetrics metrics_;
  std::unique_ptr<KvArena> arena_;
};

TEST_F(KvArenaTest, HandleIdsAreTheDeviceThen120RandomBits) {
  absl::StatusOr<std::string> a = NewHandleId();
  absl::StatusOr<std::string> b = NewHandleId();
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(a->size(), 32u);  // 16 bytes as hex
  EXPECT_NE(*a, *b);
  EXPECT_EQ(a->substr(0, 2), "00");
  absl::StatusOr<std::string> on_device = NewHandleId(171);
  ASSERT_THAT(on_device, IsOk());
  EXPECT_EQ(on_device->substr(0, 2), "ab");
  EXPECT_TRUE(IsWellFormedHandleId(*on_device));
  EXPECT_EQ(HandleDeviceIndex(*on_device), 171);
}

TEST(KvArenaDeviceTest, AnArenaNamesItsDeviceInEveryHandle) {
  NoopServerMetrics metrics;
  KvArenaOptions o;
  o.metrics = &metrics;
  o.reap_interval = absl::ZeroDuration();
  o.device_index = 3;
  auto arena = *KvArena::Create(*HostArenaMemory::Create(4096), o);
  const int64_t offset = *arena->Reserve(256);
  absl::StatusOr<PublishedHandle> handle = arena->Publish(offset, 256, 64, 4, 0);
  ASSERT_THAT(handle, IsOk());
  EXPECT_EQ(HandleDeviceIndex(handle->id), 3);
  o.device_index = 256;
  EXPECT_THAT(KvArena::Create(*HostArenaMemory::Create(4096), o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device_index is 256")));
}

TEST_F(KvArenaTest, PublishedRegionReadsBackItsBytes) {
  const int64_t base = *arena_->Reserve(1024);
  Fill(base, 512, 7);
  Fill(base + 512, 512, 9);
  arena_->Free(base + 512, 512);
  absl::StatusOr<PublishedHandle> h = arena_->Publish(base, 512, 128, 4, 4);
  ASSERT_THAT(h, IsOk());
  EXPECT_EQ(h->expires_at, clock_.Now() + absl::Milliseconds(kTtlMs));
  absl::StatusOr<std::shared_ptr<const KvRegion>> region = arena_->Lookup(h->id);
  ASSERT_THAT(region, IsOk());
  EXPECT_EQ((*region)->num_rows(), 4);
  std::vector<std::byte> out(100);
  ASSERT_THAT((*region)->CopyToHost(400, 100, out.data()), IsOk());
  EXPECT_EQ(out[0], std::byte{7});
  EXPECT_EQ(out[99], std::byte{7});
  EXPECT_THAT((*region)->CopyToHost(500, 100, out.data()),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("outside the handle's 512")));
  EXPECT_EQ(arena_->used_bytes(), 512);
  EXPECT_EQ(arena_->live_handles(), 1);
}

TEST_F(KvArenaTest, ReleaseFreesAndLaterLookupsAreNotFound) {
  const int64_t base = *arena_->Reserve(256);
  const std::string id = arena_->Publish(base, 256, 64, 4, 4)->id;
  EXPECT_EQ(*arena_->Release(id), 256);
  EXPECT_EQ(arena_->used_bytes(), 0);
  EXPECT_THAT(arena_->Lookup(id), StatusIs(absl::StatusCode::kNotFound,
                                           HasSubstr("unknown, released or expired")));
  EXPECT_THAT(arena_->Release(id), StatusIs(absl::StatusCode::kNotFound, HasSubstr(id)));
  EXPECT_THAT(arena_->Lookup("00000000000000000000000000000000"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown")));
}

TEST_F(KvArenaTest, ReaderKeepsBytesAliveAfterRelease) {
  const int64_t base = *arena_->Reserve(256);
  Fill(base, 256, 3);
  const std::string id = arena_->Publish(base, 256, 64, 4, 4)->id;
  std::shared_ptr<const KvRegion> reader = *arena_->Lookup(id);
  ASSERT_THAT(arena_->Release(id), IsOk());
  // Still allocated: a new reservation cannot land on the reader's bytes.
  EXPECT_EQ(arena_->used_bytes(), 256);
  const int64_t other = *arena_->Reserve(256);
  EXPECT_GE(other, base + 256);
  std::vector<std::byte> out(256);
  ASSERT_THAT(reader->CopyToHost(0, 256, out.data()), IsOk());
  EXPECT_EQ(out[255], std::byte{3});
  reader.reset();
  EXPECT_EQ(arena_->used_bytes(), 256);  // only `other` remains
}

TEST_F(KvArenaTest, TtlExpiryReapsWithInjectedClock) {
  const int64_t base = *arena_->Reserve(512);
  const std::string first = arena_->Publish(base, 256, 64, 4, 4)->id;
  clock_.Advance(absl::Milliseconds(kTtlMs / 2));
  const std::string second = arena_->Publish(base + 256, 256, 64, 4, 4)->id;
  clock_.Advance(absl::Milliseconds(kTtlMs / 2));
  // `first` is exactly at its expiry: gone even before the reaper runs.
  EXPECT_THAT(arena_->Lookup(first), StatusIs(absl::StatusCode::kNotFound, HasSubstr(first)));
  EXPECT_EQ(arena_->ReapExpired(), 1);
  EXPECT_EQ(arena_->used_bytes(), 256);
  EXPECT_THAT(arena_->Lookup(second), IsOk());
  clock_.Advance(absl::Milliseconds(kTtlMs));
  EXPECT_EQ(arena_->ReapExpired(), 1);
  EXPECT_EQ(arena_->used_bytes(), 0);
  EXPECT_EQ(arena_->live_handles(), 0);
}

TEST_F(KvArenaTest, FullArenaNeverOverwritesLiveHandles) {
  const int64_t base = *arena_->Reserve(kCapacity);
  arena_->Free(base + 1024, kCapacity - 1024);
  const std::string id = arena_->Publish(base, 1024, 256, 4, 4)->id;
  EXPECT_THAT(arena_->Reserve(kCapacity - 512),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("KV arena full")));
  EXPECT_THAT(arena_->Lookup(id), IsOk());
  EXPECT_THAT(arena_->Reserve(kCapacity - 1024), IsOk());
}

TEST_F(KvArenaTest, AnOwnedHandleIsNotFoundForAnotherIdentity) {
  const int64_t base = *arena_->Reserve(256);
  absl::StatusOr<PublishedHandle> h = arena_->Publish(base, 256, 64, 4, 4, "worker-a");
  ASSERT_THAT(h, IsOk());
  for (const std::string caller : {"worker-b", ""}) {
    EXPECT_THAT(arena_->Lookup(h->id, caller),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown, released or expired")));
    EXPECT_THAT(arena_->Release(h->id, caller), StatusIs(absl::StatusCode::kNotFound, HasSubstr("")));
  }
  EXPECT_THAT(arena_->Lookup(h->id, "worker-a"), IsOk());
  EXPECT_THAT(arena_->Release(h->id, "worker-a"), IsOk());
  EXPECT_EQ(arena_->live_handles(), 0);
}

TEST_F(KvArenaTest, ZeroRowHandleIsValid) {
  const std::string id = arena_->Publish(0, 0, 64, 0, 4)->id;
  EXPECT_EQ((*arena_->Lookup(id))->bytes(), 0);
  EXPECT_EQ(*arena_->Release(id), 0);
}

TEST(KvArenaFragmentationTest, LargestFreeExtentIsReportedOnReapAndOnAFailedReservation) {
  struct Recording final : public NoopServerMetrics {
    void SetArenaLargestFreeExtent(int, int64_t bytes) override { largest = bytes; }
    int64_t largest = -1;
  } metrics;
  FakeClock clock;
  KvArenaOptions options;
  options.reap_interval = absl::ZeroDuration();
  options.clock = &clock;
  options.metrics = &metrics;
  options.alignment_bytes = 256;
  auto arena = *KvArena::Create(*HostArenaMemory::Create(4096), options);
  // Four 1 KiB extents, every other one freed: 2 KiB free, 1 KiB in one piece.
  std::vector<int64_t> offsets;
  for (int i = 0; i < 4; ++i) offsets.push_back(*arena->Reserve(1024));
  arena->Free(offsets[0], 1024);
  arena->Free(offsets[2], 1024);
  EXPECT_EQ(arena->largest_free_extent(), 1024);
  arena->ReapExpired();
  EXPECT_EQ(metrics.largest, 1024);
  metrics.largest = -1;
  EXPECT_THAT(arena->Reserve(2048),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("largest free extent")));
  EXPECT_EQ(metrics.largest, 1024);  // reported with the failure
  arena->Free(offsets[1], 1024);     // coalesces three extents
  arena->ReapExpired();
  EXPECT_EQ(metrics.largest, 3072);
}

TEST(KvArenaCreateTest, RejectsBadOptions) {
  NoopServerMetrics metrics;
  KvArenaOptions options;
  options.metrics = &metrics;
  options.handle_ttl = absl::ZeroDuration();
  EXPECT_THAT(KvArena::Create(*HostArenaMemory::Create(64), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("TTL")));
  options.handle_ttl = absl::Seconds(1);
  options.metrics = nullptr;
  EXPECT_THAT(KvArena::Create(*HostArenaMemory::Create(64), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("metrics")));
}

// ---- per-client quota (issue #15, item 12) --------------------------------

class KvArenaQuotaTest : public KvArenaTest {
 protected:
  void SetUp() override {
    KvArenaOptions options;
    options.handle_ttl = absl::Milliseconds(kTtlMs);
    options.reap_interval = absl::ZeroDuration();
    options.clock = &clock_;
    options.metrics = &metrics_;
    options.max_bytes_per_client = kQuota;
    arena_ = *KvArena::Create(*HostArenaMemory::Create(kCapacity), options);
  }
  static constexpr int64_t kQuota = 1000;
};

TEST_F(KvArenaQuotaTest, ChargesUpToTheQuotaPerClient) {
  ASSERT_THAT(arena_->quota().Charge("a", 600), IsOk());
  ASSERT_THAT(arena_->quota().Charge("a", 400), IsOk());  // exactly the quota
  EXPECT_THAT(arena_->quota().Charge("a", 1),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("client \"a\" holds 1000 KV arena bytes (live handles and the "
                                 "rows of its queued and running requests) + 1 for this request "
                                 "would exceed max_arena_bytes_per_client=1000")));
  EXPECT_EQ(arena_->quota().client_bytes("a"), 1000);  // the refused charge left nothing
  ASSERT_THAT(arena_->quota().Charge("b", 1000), IsOk());  // every client has its own
  arena_->quota().Uncharge("a", 600);
  EXPECT_EQ(arena_->quota().client_bytes("a"), 400);
  arena_->quota().Uncharge("a", 400);
  arena_->quota().Uncharge("b", 1000);
  // Clients at 0 leave the table: it does not grow with every client seen.
  EXPECT_EQ(arena_->quota().charged_clients(), 0);
  // One request larger than the quota is refused outright.
  EXPECT_THAT(arena_->quota().Charge("c", kQuota + 1),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("max_arena_bytes_per_client=1000")));
  // A huge charge cannot overflow the comparison.
  EXPECT_THAT(arena_->quota().Charge("c", INT64_MAX),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("would exceed")));
}

TEST_F(KvArenaQuotaTest, AHandleHoldsItsShareUntilItsBytesReturn) {
  // The batcher's sequence: charge the upper bound, reserve, publish the
  // kept rows as a handle, give back the rest of the charge.
  ASSERT_THAT(arena_->quota().Charge("a", 800), IsOk());
  const int64_t base = *arena_->Reserve(800);
  absl::StatusOr<PublishedHandle> h =
      arena_->Publish(base, 512, 128, 4, 4, /*owner=*/"", /*charged_to=*/"a");
  ASSERT_THAT(h, IsOk());
  arena_->Free(base + 512, 288);
  arena_->quota().Uncharge("a", 800 - 512);
  EXPECT_EQ(arena_->quota().client_bytes("a"), 512);
  // A FetchKv reader keeps the bytes, and so the charge, past the release.
  absl::StatusOr<std::shared_ptr<const KvRegion>> reader = arena_->Lookup(h->id);
  ASSERT_THAT(reader, IsOk());
  ASSERT_THAT(arena_->Release(h->id), IsOk());
  EXPECT_EQ(arena_->quota().client_bytes("a"), 512);
  reader->reset();
  EXPECT_EQ(arena_->quota().client_bytes("a"), 0);
  EXPECT_EQ(arena_->used_bytes(), 0);
}

TEST_F(KvArenaQuotaTest, ExpiryGivesTheChargeBack) {
  ASSERT_THAT(arena_->quota().Charge("a", 256), IsOk());
  const int64_t base = *arena_->Reserve(256);
  ASSERT_THAT(arena_->Publish(base, 256, 64, 4, 4, "", "a"), IsOk());
  EXPECT_THAT(arena_->quota().Charge("a", kQuota - 255),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("holds 256")));
  clock_.Advance(absl::Milliseconds(kTtlMs));
  EXPECT_EQ(arena_->ReapExpired(), 1);
  EXPECT_EQ(arena_->quota().client_bytes("a"), 0);
  EXPECT_THAT(arena_->quota().Charge("a", kQuota), IsOk());
  arena_->quota().Uncharge("a", kQuota);
}

TEST_F(KvArenaTest, WithoutAQuotaNothingIsCharged) {
  ASSERT_THAT(arena_->quota().Charge("a", int64_t{1} << 40), IsOk());
  EXPECT_EQ(arena_->quota().client_bytes("a"), 0);
  EXPECT_EQ(arena_->quota().charged_clients(), 0);
}

TEST(KvArenaCreateTest, RejectsANegativeQuota) {
  NoopServerMetrics metrics;
  KvArenaOptions options;
  options.metrics = &metrics;
  options.max_bytes_per_client = -1;
  EXPECT_THAT(KvArena::Create(*HostArenaMemory::Create(64), options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_bytes_per_client is -1")));
}

}  // namespace
}  // namespace specverify::server
