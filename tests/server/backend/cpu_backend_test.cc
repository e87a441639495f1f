// The CPU and no-op backends on their own: Submit is asynchronous, completion
// runs on the backend's thread, and results (packed rows included) equal the
// workload oracle on the single-threaded and the thread-pool paths.
#include "server/backend/cpu_backend.h"

#include <cstring>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/backend/backend_factory.h"
#include "kernels/workload/greedy_workload.h"
#include "server/backend/noop_backend.h"
#include "tests/server/testing/staged_batch.h"
#include "tests/testing/byte_compare.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::testing::BytesEqual;
using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::unique_ptr<Batch> BatchOf(Backend& backend, const GreedyWorkload& w, ArenaMemory& arena) {
  absl::StatusOr<std::unique_ptr<Batch>> batch =
      testing::StageGreedyWorkload(backend, w, arena.base());
  EXPECT_THAT(batch, IsOk());
  return *std::move(batch);
}

// Runs one batch and returns it with its status, checking the completion
// thread is not the caller's.
std::pair<std::unique_ptr<Batch>, absl::Status> RunBatch(Backend& backend, std::unique_ptr<Batch> batch) {
  absl::Notification done;
  std::unique_ptr<Batch> result;
  absl::Status status;
  std::thread::id completion_thread;
  backend.Submit(std::move(batch), [&](std::unique_ptr<Batch> b, absl::Status s) {
    completion_thread = std::this_thread::get_id();
    result = std::move(b);
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_NE(completion_thread, std::this_thread::get_id());
  return {std::move(result), std::move(status)};
}

struct Shape {
  int32_t sequences;
  int64_t row_bytes;
};

class CpuBackendTest : public ::testing::TestWithParam<Shape> {};

TEST_P(CpuBackendTest, MatchesTheOracleOnEveryPath) {
  GreedyWorkloadOptions o;
  o.num_sequences = GetParam().sequences;
  o.gamma_min = 1;
  o.gamma_max = 16;
  o.alpha = 0.8;
  o.row_bytes = GetParam().row_bytes;
  o.seed = 99;
  const GreedyWorkload w = *GenerateGreedyWorkload(o);
  CpuBackendOptions options;
  options.threads = 4;
  std::unique_ptr<CpuBackend> backend = *CpuBackend::Create(options);
  std::unique_ptr<ArenaMemory> arena =
      *backend->AllocateArenaMemory(std::max<int64_t>(1, w.total_draft_rows() * w.row_bytes()));
  auto [batch, status] = RunBatch(*backend, BatchOf(*backend, w, *arena));
  ASSERT_THAT(status, IsOk());
  EXPECT_THAT(batch->results.accepted_lengths, ElementsAreArray(w.expected.accepted_lengths));
  EXPECT_THAT(batch->results.next_tokens, ElementsAreArray(w.expected.next_tokens));
  EXPECT_THAT(batch->results.mismatch, ElementsAreArray(w.expected.mismatch));
  EXPECT_THAT(batch->results.packed_row_offsets, ElementsAreArray(w.expected.packed_row_offsets));
  EXPECT_TRUE(BytesEqual({arena->base(), w.expected.packed_kv.size()}, w.expected.packed_kv));
  EXPECT_EQ(batch->path, ExecutionPathLabel::kCpu);
  EXPECT_TRUE(batch->verified);
  EXPECT_GT(batch->device_time, absl::ZeroDuration());
}

// 333 sequences x 4 KiB rows is far above min_parallel_work: the pool splits
// verify and pack into ranges, with ragged tails.
INSTANTIATE_TEST_SUITE_P(Shapes, CpuBackendTest,
                         ::testing::Values(Shape{1, 0}, Shape{7, 4096}, Shape{333, 0},
                                           Shape{333, 4096}, Shape{1000, 100}),
                         [](const auto& info) {
                           return absl::StrCat("b", info.param.sequences, "_row", info.param.row_bytes);
                         });

// Requests 0 and 2 of four return into regions, with the KV rows staged or in
// (host) regions laid out last sequence first, the copies split into the
// pool's parallel ranges. Each output holds exactly its request's accepted
// rows and nothing past them; the other requests' rows are packed in the
// arena; the region requests' arena range is never written (one copy).
TEST(CpuBackendRegionTest, RegionReturnsAreCopiedOnceAndTheRestPacked) {
  for (const bool kv_from_regions : {false, true}) {
    SCOPED_TRACE(kv_from_regions ? "KV rows in regions" : "KV rows staged");
    GreedyWorkloadOptions o;
    o.num_sequences = 332;
    o.gamma_min = 1;
    o.gamma_max = 12;
    o.alpha = 0.7;
    o.row_bytes = 100;
    o.seed = 7;
    const GreedyWorkload w = *GenerateGreedyWorkload(o);
    const GreedyExpected& e = w.expected;
    const int64_t rb = w.row_bytes();
    const int64_t rows = w.total_draft_rows();
    constexpr int32_t kRequests = 4;
    const int32_t per_request = w.num_sequences() / kRequests;
    CpuBackendOptions options;
    options.threads = 4;
    options.min_parallel_work = 0;
    std::unique_ptr<CpuBackend> backend = *CpuBackend::Create(options);
    std::unique_ptr<ArenaMemory> arena = *backend->AllocateArenaMemory(rows * rb);
    std::memset(arena->base(), 0xA5, static_cast<size_t>(rows * rb));

    testing::StagedRegions regions;
    std::vector<std::byte> region;
    if (kv_from_regions) {
      std::vector<int64_t> at;
      region = testing::RowsLastSequenceFirst(w, &at);
      for (int32_t i = 0; i < w.num_sequences(); ++i) regions.kv_sources.push_back(region.data() + at[i]);
    }
    std::vector<std::vector<std::byte>> outputs(kRequests);
    for (int32_t r = 0; r < kRequests; r += 2) {
      PackedDelivery d = testing::DeliveryFor(w, r * per_request, per_request, nullptr);
      outputs[r].assign(static_cast<size_t>(d.max_rows * rb), std::byte{0xA5});
      d.destination = outputs[r].data();
      regions.deliveries.push_back(d);
    }
    absl::StatusOr<std::unique_ptr<Batch>> batch =
        testing::StageGreedyWorkload(*backend, w, arena->base(), 0, regions);
    ASSERT_THAT(batch, IsOk());

    auto [done, status] = RunBatch(*backend, *std::move(batch));
    ASSERT_THAT(status, IsOk());
    EXPECT_THAT(done->results.accepted_lengths, ElementsAreArray(e.accepted_lengths));
    ASSERT_THAT(done->results.packed_row_offsets, ElementsAreArray(e.packed_row_offsets));
    const std::span<const std::byte> packed(arena->base(), static_cast<size_t>(rows * rb));
    for (int32_t r = 0; r < kRequests; ++r) {
      SCOPED_TRACE(absl::StrCat("request ", r));
      const int32_t first = r * per_request;
      const int64_t begin = int64_t{e.packed_row_offsets[first]} * rb;
      const int64_t size = int64_t{e.packed_row_offsets[first + per_request]} * rb - begin;
      const std::span<const std::byte> want = std::span<const std::byte>(e.packed_kv).subspan(begin, size);
      if (r % 2 == 1) {
        EXPECT_TRUE(BytesEqual(packed.subspan(begin, size), want));
        continue;
      }
      const std::span<const std::byte> got(outputs[r]);
      EXPECT_TRUE(BytesEqual(got.first(size), want));
      EXPECT_TRUE(::specverify::testing::AllBytesAre(got.subspan(size), std::byte{0xA5}));
      EXPECT_TRUE(::specverify::testing::AllBytesAre(packed.subspan(begin, size), std::byte{0xA5}))
          << "region-returned rows went through the arena";
    }
  }
}

// Inline answers come from the staging: a chain batch whose requests all
// take their rows inline packs nothing (the arena stays as it was), and the
// staged rows hold each sequence's accepted rows first; with a handle in the
// batch every row is packed as before.
TEST(CpuBackendInlineTest, InlineRowsStayStagedAndArePackedOnlyForHandles) {
  GreedyWorkloadOptions o;
  o.num_sequences = 40;
  o.gamma_min = 1;
  o.gamma_max = 12;
  o.alpha = 0.7;
  o.row_bytes = 64;
  o.seed = 11;
  const GreedyWorkload w = *GenerateGreedyWorkload(o);
  const int64_t capacity = w.total_draft_rows() * w.row_bytes();
  CpuBackendOptions options;
  options.threads = 2;
  std::unique_ptr<CpuBackend> backend = *CpuBackend::Create(options);
  std::unique_ptr<ArenaMemory> arena = *backend->AllocateArenaMemory(capacity);
  for (const bool with_handle : {false, true}) {
    SCOPED_TRACE(with_handle ? "inline and handle" : "inline only");
    std::memset(arena->base(), 0xA5, static_cast<size_t>(capacity));
    std::unique_ptr<Batch> batch = BatchOf(*backend, w, *arena);
    batch->wants_host_rows = true;
    batch->wants_handle_rows = with_handle;
    auto [done, status] = RunBatch(*backend, std::move(batch));
    ASSERT_THAT(status, IsOk());
    EXPECT_TRUE(done->inline_rows_from_staging);
    std::vector<std::byte> staged;
    const GreedyHostInputs& in = done->inputs;
    for (int32_t i = 0; i < in.num_sequences(); ++i) {
      const std::byte* at = in.draft_kv.data() + int64_t{in.draft_offsets[i]} * in.row_bytes;
      staged.insert(staged.end(), at, at + int64_t{done->results.accepted_lengths[i]} * in.row_bytes);
    }
    EXPECT_TRUE(BytesEqual(staged, w.expected.packed_kv));
    const std::span<const std::byte> packed(arena->base(), static_cast<size_t>(capacity));
    if (with_handle) {
      EXPECT_TRUE(BytesEqual(packed.first(w.expected.packed_kv.size()), w.expected.packed_kv));
    } else {
      EXPECT_TRUE(::specverify::testing::AllBytesAre(packed, std::byte{0xA5}));
    }
  }
}

TEST(NoopBackendTest, CountsRowsVerifiesNothing) {
  GreedyWorkloadOptions o;
  o.num_sequences = 9;
  o.gamma_min = 2;
  o.gamma_max = 7;
  o.row_bytes = 16;
  const GreedyWorkload w = *GenerateGreedyWorkload(o);
  NoopBackend backend;
  std::unique_ptr<ArenaMemory> arena = *backend.AllocateArenaMemory(4096);
  EXPECT_FALSE(backend.Describe().verifies);
  auto [batch, status] = RunBatch(backend, BatchOf(backend, w, *arena));
  ASSERT_THAT(status, IsOk());
  int32_t rows = 0;
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(batch->results.accepted_lengths[i], w.gamma(i));
    EXPECT_EQ(batch->results.next_tokens[i], w.target_tokens_of(i)[w.gamma(i)]);
    EXPECT_EQ(batch->results.mismatch[i], 0);
    EXPECT_EQ(batch->results.packed_row_offsets[i], rows);
    rows += w.gamma(i);
  }
  EXPECT_EQ(batch->results.packed_row_offsets[9], rows);
  EXPECT_FALSE(batch->verified);
  EXPECT_EQ(batch->path, ExecutionPathLabel::kNoop);
  // Every draft row is "packed" as it lies (k = gamma), host-readable.
  EXPECT_TRUE(backend.Describe().packs);
  EXPECT_TRUE(BytesEqual({arena->base(), w.draft_kv.size()}, w.draft_kv));
  EXPECT_EQ(batch->packed_kv_host, arena->base());
}

TEST(CpuBackendCreateTest, RejectsBadThreadCount) {
  CpuBackendOptions options;
  options.threads = 0;
  EXPECT_THAT(CpuBackend::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cpu threads is 0")));
}

TEST(CpuBackendShutdownTest, SubmitAfterShutdownIsUnavailable) {
  std::unique_ptr<CpuBackend> backend = *CpuBackend::Create(CpuBackendOptions{});
  backend->Shutdown();
  GreedyWorkloadOptions o;
  o.num_sequences = 1;
  const GreedyWorkload w = *GenerateGreedyWorkload(o);
  std::unique_ptr<ArenaMemory> arena = *backend->AllocateArenaMemory(64);
  absl::Status status;
  backend->Submit(BatchOf(*backend, w, *arena), [&](std::unique_ptr<Batch>, absl::Status s) { status = s; });
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shut down")));
}

TEST(DeviceSpecTest, ParsesEveryForm) {
  EXPECT_EQ(ParseDeviceSpec("auto")->kind, DeviceSpec::Kind::kAuto);
  EXPECT_EQ(ParseDeviceSpec("cpu")->kind, DeviceSpec::Kind::kCpu);
  EXPECT_EQ(ParseDeviceSpec("noop")->kind, DeviceSpec::Kind::kNoop);
  EXPECT_THAT(ParseDeviceSpec("cuda:3")->ordinals, ElementsAre(3));
  EXPECT_THAT(ParseDeviceSpec("cuda:-1"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cuda:N")));
  EXPECT_THAT(ParseDeviceSpec("gpu"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("auto, cpu")));
}

TEST(DeviceSpecTest, ParsesSeveralExecutors) {
  EXPECT_THAT(ParseDeviceSpec("cuda:0,1")->ordinals, ElementsAre(0, 1));
  EXPECT_THAT(ParseDeviceSpec("cuda:0,0")->ordinals, ElementsAre(0, 0));
  EXPECT_TRUE(ParseDeviceSpec("cuda:all")->all_cuda);
  const absl::StatusOr<DeviceSpec> cpus = ParseDeviceSpec("cpu:0,1");
  ASSERT_THAT(cpus, IsOk());
  EXPECT_EQ(cpus->kind, DeviceSpec::Kind::kCpu);
  EXPECT_THAT(cpus->ordinals, ElementsAre(0, 1));
  for (const char* bad : {"cuda:", "cuda:0,", "cuda:,1", "cuda:0,x", "cpu:", "cuda:all,1", "cuda:cpu:0"}) {
    EXPECT_THAT(ParseDeviceSpec(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("cuda:N[,M...]")))
        << bad;
  }
  EXPECT_THAT(ParseDeviceSpec("cuda:0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 16")));
}

TEST(DeviceSpecTest, ExecutorsOnOneDeviceGetDistinctNames) {
  EXPECT_THAT(ExecutorNames("cuda", {0, 1}), ElementsAre("cuda:0", "cuda:1"));
  EXPECT_THAT(ExecutorNames("cuda", {0, 0, 1, 0}),
              ElementsAre("cuda:0", "cuda:0#1", "cuda:1", "cuda:0#2"));
}

TEST(DeviceSpecTest, CpuExecutorsAreCreatedOnePerEntry) {
  CpuBackendOptions cpu;
  cpu.threads = 1;
  absl::StatusOr<DeviceBackends> created = CreateBackends(*ParseDeviceSpec("cpu:0,1"), cpu);
  ASSERT_THAT(created, IsOk());
  ASSERT_EQ(created->devices.size(), 2u);
  EXPECT_EQ(created->devices[0].name, "cpu:0");
  EXPECT_EQ(created->devices[1].name, "cpu:1");
  EXPECT_EQ(created->devices[1].cuda_ordinal, -1);
  EXPECT_NE(created->devices[0].backend.get(), created->devices[1].backend.get());
  EXPECT_THAT(created->reason, HasSubstr("2 executors"));
  absl::StatusOr<DeviceBackends> one = CreateBackends(*ParseDeviceSpec("cpu"), cpu);
  ASSERT_THAT(one, IsOk());
  ASSERT_EQ(one->devices.size(), 1u);
  EXPECT_EQ(one->devices[0].name, "cpu");
}

}  // namespace
}  // namespace specverify::server
