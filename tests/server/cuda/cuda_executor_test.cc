// CudaExecutor against the CPU oracle (the workload generator's expected
// results): bit-exact results and packed bytes read back through
// ArenaMemory::CopyToHost, the host-decided path and each device path
// forced through the dispatch threshold,
// batches overlapping in the slots, the sticky-fault contract and the
// start-up errors. Skips visibly without a GPU.
#include "server/backend/cuda/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/greedy/greedy_dispatch.h"
#include "kernels/workload/greedy_workload.h"
#include "tests/server/testing/staged_batch.h"
#include "tests/testing/byte_compare.h"
#include "tests/testing/greedy_grid.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

constexpr std::byte kPoison{0xA5};

#define SKIP_WITHOUT_GPU()                                              \
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible: " \
                                              "the CUDA executor tests need a GPU"

CudaExecutorOptions SmallOptions(int64_t threshold) {
  CudaExecutorOptions o;
  o.max_batch_sequences = 4096;
  o.max_draft_tokens = 256;
  o.max_batch_kv_bytes = ::specverify::testing::kMaxGridDraftKvBytes;
  o.slots = 2;
  o.dispatch_threshold_bytes = threshold;
  return o;
}

// Staged into one of the executor's slots, as the batcher stages requests.
std::unique_ptr<Batch> MakeBatch(CudaExecutor& executor, const GreedyWorkload& w,
                                 ArenaMemory& arena, int64_t offset, uint64_t id) {
  absl::StatusOr<std::unique_ptr<Batch>> batch =
      testing::StageGreedyWorkload(executor, w, arena.base() + offset, id);
  EXPECT_THAT(batch, IsOk());
  return *std::move(batch);
}

// Runs one batch to completion.
struct Outcome {
  std::unique_ptr<Batch> batch;
  absl::Status status;
  std::thread::id completion_thread;
};
// Like the batcher, gives the slot back (the batch's staging) once the
// results are in, unless the test reads the slot's pinned rows.
Outcome RunBatch(CudaExecutor& executor, std::unique_ptr<Batch> batch,
                 bool keep_staging = false) {
  Outcome out;
  absl::Notification done;
  executor.Submit(std::move(batch), [&](std::unique_ptr<Batch> b, absl::Status s) {
    if (!keep_staging) b->staging.reset();
    out.batch = std::move(b);
    out.status = std::move(s);
    out.completion_thread = std::this_thread::get_id();
    done.Notify();
  });
  done.WaitForNotification();
  return out;
}

void PoisonArena(ArenaMemory& arena, int64_t offset, int64_t bytes) {
  if (bytes > 0) {
    ASSERT_EQ(cudaMemset(arena.base() + offset, static_cast<int>(kPoison), bytes), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
}

// Results and the packed bytes (read back through CopyToHost) against the
// oracle; the bytes past the accepted rows must still hold the poison.
::testing::AssertionResult MatchesOracle(const GreedyWorkload& w, const Batch& batch,
                                         ArenaMemory& arena, int64_t offset) {
  const GreedyExpected& e = w.expected;
  if (batch.results.accepted_lengths != e.accepted_lengths) {
    return ::testing::AssertionFailure() << "accepted_lengths differ";
  }
  if (batch.results.next_tokens != e.next_tokens) {
    return ::testing::AssertionFailure() << "next_tokens differ";
  }
  if (batch.results.mismatch != e.mismatch) return ::testing::AssertionFailure() << "mismatch differs";
  if (batch.results.packed_row_offsets != e.packed_row_offsets) {
    return ::testing::AssertionFailure() << "packed_row_offsets differ";
  }
  const int64_t capacity = w.total_draft_rows() * w.row_bytes();
  if (capacity == 0) return ::testing::AssertionSuccess();
  std::vector<std::byte> packed(capacity);
  if (absl::Status s = arena.CopyToHost(offset, capacity, packed.data()); !s.ok()) {
    return ::testing::AssertionFailure() << "CopyToHost: " << s;
  }
  const int64_t used = static_cast<int64_t>(e.packed_kv.size());
  ::testing::AssertionResult rows = ::specverify::testing::BytesEqual(
      std::span<const std::byte>(packed).first(used), e.packed_kv);
  if (!rows) return rows;
  return ::specverify::testing::AllBytesAre(std::span<const std::byte>(packed).subspan(used),
                                            kPoison);
}

std::vector<GreedyWorkloadOptions> Cases() {
  std::vector<GreedyWorkloadOptions> cases = ::specverify::testing::GreedyRaggedCases();
  for (const GreedyWorkloadOptions& o : ::specverify::testing::GreedyFoundationGrid()) {
    // Two acceptance rates of the grid keep the run short; the kernels' own
    // tests cover the whole grid. Points over 8 MiB of KV add host time, not
    // coverage.
    if ((o.alpha == 0.3 || o.alpha == 1.0) &&
        int64_t{o.num_sequences} * o.gamma_max * o.row_bytes <= (int64_t{8} << 20)) {
      cases.push_back(o);
    }
  }
  return cases;
}

// The path forced (host decision, or the device's fused or two-step path
// through the threshold), and the inputs copied or (mapped) read in place
// from pinned memory with results written straight back to it.
struct PathCase {
  ExecutionPathLabel path;
  bool mapped;
};

CudaExecutorOptions OptionsForPath(ExecutionPathLabel path) {
  CudaExecutorOptions o =
      SmallOptions(path == ExecutionPathLabel::kTwoStep ? 0 : kFusedAlwaysThreshold);
  o.greedy_host_decision_max_rows =
      path == ExecutionPathLabel::kHostDecided ? std::numeric_limits<int64_t>::max() : 0;
  return o;
}

class CudaExecutorPathTest : public ::testing::TestWithParam<PathCase> {};

TEST_P(CudaExecutorPathTest, MatchesOracleOverTheGridWithThePathForced) {
  SKIP_WITHOUT_GPU();
  const ExecutionPathLabel want = GetParam().path;
  CudaExecutorOptions options = OptionsForPath(want);
  options.mapped_inputs_max_bytes = GetParam().mapped ? int64_t{1} << 40 : 0;
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::Create(options);
  ASSERT_THAT(executor, IsOk());
  EXPECT_EQ((*executor)->Describe().dispatch_threshold_source, "config");
  EXPECT_EQ((*executor)->Describe().dispatch_threshold_bytes, options.dispatch_threshold_bytes);
  absl::StatusOr<std::unique_ptr<ArenaMemory>> arena =
      (*executor)->AllocateArenaMemory(::specverify::testing::kMaxGridDraftKvBytes + 4096);
  ASSERT_THAT(arena, IsOk());
  EXPECT_EQ((*arena)->kind(), "cuda:0");

  uint64_t id = 0;
  for (const GreedyWorkloadOptions& o : Cases()) {
    SCOPED_TRACE(::testing::Message() << "b=" << o.num_sequences << " gamma=[" << o.gamma_min
                                      << "," << o.gamma_max << "] alpha=" << o.alpha
                                      << " row_bytes=" << o.row_bytes);
    absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
    ASSERT_THAT(w, IsOk());
    // An odd offset: the arena hands out 256-aligned ranges, the kernels
    // must not depend on more.
    const int64_t offset = 256 * (id % 3);
    PoisonArena(**arena, offset, w->total_draft_rows() * w->row_bytes());
    Outcome out = RunBatch(**executor, MakeBatch(**executor, *w, **arena, offset, ++id));
    ASSERT_THAT(out.status, IsOk());
    EXPECT_EQ(out.batch->path, want);
    EXPECT_TRUE(out.batch->verified);
    // A host-decided batch with no accepted row launches nothing.
    if (want != ExecutionPathLabel::kHostDecided || w->expected.packed_kv.size() > 0) {
      EXPECT_GT(out.batch->device_time, absl::ZeroDuration());
    }
    EXPECT_NE(out.completion_thread, std::this_thread::get_id());
    ASSERT_TRUE(MatchesOracle(*w, *out.batch, **arena, offset));
  }
  EXPECT_THAT((*executor)->health(), IsOk());
}

std::string PathName(ExecutionPathLabel path) {
  switch (path) {
    case ExecutionPathLabel::kHostDecided: return "host_decided";
    case ExecutionPathLabel::kFused: return "fused";
    case ExecutionPathLabel::kTwoStep: return "two_step";
    default: return "other";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPath, CudaExecutorPathTest,
                         ::testing::Values(PathCase{ExecutionPathLabel::kHostDecided, false},
                                           PathCase{ExecutionPathLabel::kFused, false},
                                           PathCase{ExecutionPathLabel::kTwoStep, false},
                                           PathCase{ExecutionPathLabel::kHostDecided, true},
                                           PathCase{ExecutionPathLabel::kFused, true},
                                           PathCase{ExecutionPathLabel::kTwoStep, true}),
                         [](const auto& info) {
                           return absl::StrCat(PathName(info.param.path),
                                               info.param.mapped ? "_mapped" : "_copied");
                         });

// A batch whose requests 0 and 2 (of four) return into regions, with the KV
// rows staged or in device "regions" (scattered, in reverse order): on every
// path each output gets exactly its request's accepted rows and nothing past
// them, and the other requests' rows are packed in the arena (or, when they
// are inline on the host-decided path, left in the staging for the batcher
// and not copied at all). A host-decided batch copies the region requests'
// rows once, straight into their outputs: their range of the arena is never
// written.
class CudaExecutorRegionReturnTest
    : public ::testing::TestWithParam<std::tuple<ExecutionPathLabel, bool>> {};

TEST_P(CudaExecutorRegionReturnTest, EachOutputGetsItsRequestsRowsAndTheOthersArePacked) {
  SKIP_WITHOUT_GPU();
  const auto [path, kv_from_regions] = GetParam();
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor =
      CudaExecutor::Create(OptionsForPath(path));
  ASSERT_THAT(executor, IsOk());
  absl::StatusOr<std::unique_ptr<ArenaMemory>> arena = (*executor)->AllocateArenaMemory(1 << 22);
  ASSERT_THAT(arena, IsOk());
  const std::vector<std::pair<int64_t, bool>> cases = {{100, false}, {4096, false}, {100, true}, {4096, true}};
  for (const auto& c : cases) {
    const int64_t row_bytes = c.first;
    const bool others_inline = c.second;
    SCOPED_TRACE(::testing::Message() << "row_bytes " << row_bytes
                                      << (others_inline ? ", requests 1 and 3 inline" : ""));
    GreedyWorkloadOptions wo;
    wo.num_sequences = 12;
    wo.gamma_min = 1;
    wo.gamma_max = 12;
    wo.alpha = 0.7;
    wo.row_bytes = row_bytes;
    wo.seed = 9;
    const GreedyWorkload w = *GenerateGreedyWorkload(wo);
    const GreedyExpected& e = w.expected;
    constexpr int32_t kPerRequest = 3;
    constexpr int32_t kRequests = 4;
    const auto returns_into_region = [](int32_t r) { return r % 2 == 0; };
    const int64_t rows = w.total_draft_rows();

    std::vector<void*> owned;
    const auto device_copy = [&](const std::byte* host, int64_t bytes, int poison) {
      void* d = nullptr;
      EXPECT_EQ(cudaMalloc(&d, static_cast<size_t>(bytes)), cudaSuccess);
      owned.push_back(d);
      if (host != nullptr) {
        EXPECT_EQ(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
      } else {
        EXPECT_EQ(cudaMemset(d, poison, bytes), cudaSuccess);
      }
      return static_cast<std::byte*>(d);
    };
    testing::StagedRegions regions;
    if (kv_from_regions) {
      std::vector<int64_t> at;
      const std::vector<std::byte> region = testing::RowsLastSequenceFirst(w, &at);
      std::byte* d = device_copy(region.data(), static_cast<int64_t>(region.size()), 0);
      for (int32_t i = 0; i < w.num_sequences(); ++i) regions.kv_sources.push_back(d + at[i]);
    }
    std::vector<std::byte*> outputs(kRequests, nullptr);
    for (int32_t r = 0; r < kRequests; ++r) {
      if (!returns_into_region(r)) continue;
      PackedDelivery d = testing::DeliveryFor(w, r * kPerRequest, kPerRequest, nullptr);
      d.destination = outputs[r] = device_copy(nullptr, int64_t{d.max_rows} * row_bytes, 0xA5);
      regions.deliveries.push_back(d);
    }
    absl::StatusOr<std::unique_ptr<Batch>> staged =
        testing::StageGreedyWorkload(**executor, w, (*arena)->base(), 0, regions);
    ASSERT_THAT(staged, IsOk());
    std::unique_ptr<Batch> batch = *std::move(staged);
    batch->wants_host_rows = others_inline;
    PoisonArena(**arena, 0, rows * row_bytes);

    Outcome out = RunBatch(**executor, std::move(batch), /*keep_staging=*/true);
    ASSERT_THAT(out.status, IsOk());
    EXPECT_EQ(out.batch->path, path);
    EXPECT_EQ(out.batch->results.accepted_lengths, e.accepted_lengths);
    EXPECT_EQ(out.batch->results.next_tokens, e.next_tokens);
    ASSERT_EQ(out.batch->results.packed_row_offsets, e.packed_row_offsets);
    EXPECT_EQ(out.batch->inline_rows_from_staging,
              path == ExecutionPathLabel::kHostDecided && others_inline && !kv_from_regions);
    std::vector<std::byte> packed(static_cast<size_t>(rows * row_bytes));
    ASSERT_THAT((*arena)->CopyToHost(0, rows * row_bytes, packed.data()), IsOk());
    for (int32_t r = 0; r < kRequests; ++r) {
      SCOPED_TRACE(::testing::Message() << "request " << r);
      const int32_t first = r * kPerRequest;
      const int64_t begin = int64_t{e.packed_row_offsets[first]} * row_bytes;
      const int64_t end = int64_t{e.packed_row_offsets[first + kPerRequest]} * row_bytes;
      const std::span<const std::byte> want =
          std::span<const std::byte>(e.packed_kv).subspan(begin, end - begin);
      const std::span<const std::byte> arena_range =
          std::span<const std::byte>(packed).subspan(begin, end - begin);
      if (!returns_into_region(r)) {
        if (!out.batch->inline_rows_from_staging) {
          EXPECT_TRUE(::specverify::testing::BytesEqual(arena_range, want));
          continue;
        }
        // Inline answers read the staging; nothing packs their rows.
        std::vector<std::byte> staged;
        const GreedyHostInputs& in = out.batch->inputs;
        for (int32_t i = first; i < first + kPerRequest; ++i) {
          const std::byte* at = in.draft_kv.data() + int64_t{in.draft_offsets[i]} * row_bytes;
          staged.insert(staged.end(), at, at + int64_t{e.accepted_lengths[i]} * row_bytes);
        }
        EXPECT_TRUE(::specverify::testing::BytesEqual(staged, want));
        EXPECT_TRUE(::specverify::testing::AllBytesAre(arena_range, kPoison));
        continue;
      }
      const int64_t capacity =
          int64_t{w.draft_offsets[first + kPerRequest] - w.draft_offsets[first]} * row_bytes;
      std::vector<std::byte> got(static_cast<size_t>(capacity));
      ASSERT_EQ(cudaMemcpy(got.data(), outputs[r], capacity, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_TRUE(::specverify::testing::BytesEqual(
          std::span<const std::byte>(got).first(want.size()), want));
      EXPECT_TRUE(::specverify::testing::AllBytesAre(
          std::span<const std::byte>(got).subspan(want.size()), kPoison));
      if (path == ExecutionPathLabel::kHostDecided) {
        EXPECT_TRUE(::specverify::testing::AllBytesAre(arena_range, kPoison))
            << "the host-decided path copied region-returned rows through the arena";
      }
    }
    for (void* d : owned) EXPECT_EQ(cudaFree(d), cudaSuccess);
  }
  EXPECT_THAT((*executor)->health(), IsOk());
}

INSTANTIATE_TEST_SUITE_P(
    EveryPath, CudaExecutorRegionReturnTest,
    ::testing::Combine(::testing::Values(ExecutionPathLabel::kHostDecided,
                                         ExecutionPathLabel::kFused, ExecutionPathLabel::kTwoStep),
                       ::testing::Bool()),
    [](const auto& info) {
      return absl::StrCat(PathName(std::get<0>(info.param)),
                          std::get<1>(info.param) ? "_kv_in_regions" : "_kv_staged");
    });

// Every batch on the device with both of its paths in the mix, or the
// batches of at most 1000 draft tokens decided on the host and the rest on
// the device.
class CudaExecutorOverlapTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(CudaExecutorOverlapTest, OverlappingBatchesInThreeSlotsAllMatchTheOracle) {
  SKIP_WITHOUT_GPU();
  const int64_t host_max_rows = GetParam();
  CudaExecutorOptions o = SmallOptions(/*threshold=*/256 << 10);  // both device paths in the mix
  o.greedy_host_decision_max_rows = host_max_rows;
  o.slots = 3;
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::Create(o);
  ASSERT_THAT(executor, IsOk());
  EXPECT_EQ((*executor)->max_batches_in_flight(), 3);
  constexpr int kBatches = 40;
  constexpr int64_t kStride = 8 << 20;
  absl::StatusOr<std::unique_ptr<ArenaMemory>> arena =
      (*executor)->AllocateArenaMemory(kBatches * kStride);
  ASSERT_THAT(arena, IsOk());

  std::vector<GreedyWorkload> workloads;
  for (int i = 0; i < kBatches; ++i) {
    GreedyWorkloadOptions w;
    w.num_sequences = 1 + (i * 37) % 300;
    w.gamma_min = 1;
    w.gamma_max = 1 + i % 16;
    w.alpha = 0.6;
    w.row_bytes = (i % 4 == 0) ? 0 : (i % 4 == 1 ? 512 : 4096);
    w.seed = 77 + i;
    workloads.push_back(*GenerateGreedyWorkload(w));
    PoisonArena(**arena, i * kStride, workloads.back().total_draft_rows() * w.row_bytes);
  }
  // Submitted without waiting: the executor queues, stages into free slots
  // and completes in order.
  absl::Mutex mu;
  std::vector<std::unique_ptr<Batch>> done(kBatches);
  std::vector<absl::Status> statuses(kBatches);
  int completed = 0;
  bool fused = false, two_step = false;
  int host_decided = 0, host_decided_wrongly = 0;
  for (int i = 0; i < kBatches; ++i) {
    (*executor)->Submit(MakeBatch(**executor, workloads[i], **arena, i * kStride, i),
                        [&, i](std::unique_ptr<Batch> b, absl::Status s) {
                          absl::MutexLock lock(&mu);
                          fused |= b->path == ExecutionPathLabel::kFused;
                          two_step |= b->path == ExecutionPathLabel::kTwoStep;
                          const bool on_host = b->path == ExecutionPathLabel::kHostDecided;
                          host_decided += on_host;
                          host_decided_wrongly +=
                              on_host != (b->inputs.total_draft_rows() <= host_max_rows);
                          // The slot goes back with the staging, as the
                          // batcher gives it back after reading results.
                          b->staging.reset();
                          done[i] = std::move(b);
                          statuses[i] = std::move(s);
                          ++completed;
                        });
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](int* c) { return *c == kBatches; }, &completed));
  }
  for (int i = 0; i < kBatches; ++i) {
    SCOPED_TRACE(i);
    ASSERT_THAT(statuses[i], IsOk());
    ASSERT_TRUE(MatchesOracle(workloads[i], *done[i], **arena, i * kStride));
  }
  EXPECT_EQ(host_decided_wrongly, 0);
  if (host_max_rows == 0) {
    EXPECT_EQ(host_decided, 0);
    EXPECT_TRUE(fused);
    EXPECT_TRUE(two_step);
  } else {
    EXPECT_GT(host_decided, 0);
    EXPECT_LT(host_decided, kBatches);
  }
}

INSTANTIATE_TEST_SUITE_P(Decisions, CudaExecutorOverlapTest, ::testing::Values(0, 1000),
                         [](const auto& info) {
                           return info.param == 0 ? std::string("device")
                                                  : absl::StrCat("host_up_to_", info.param);
                         });

TEST(CudaExecutorTest, CalibratesTheThresholdWhenNoneIsConfigured) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::Create(SmallOptions(-1));
  ASSERT_THAT(executor, IsOk());
  const BackendDescription d = (*executor)->Describe();
  EXPECT_EQ(d.name, "cuda");
  EXPECT_EQ(d.dispatch_threshold_source, "calibration");
  EXPECT_GT(d.dispatch_threshold_bytes, 0);
  EXPECT_FALSE((*executor)->dispatch_info().summary.empty());
  EXPECT_FALSE((*executor)->dispatch_info().measurements.empty());
  EXPECT_FALSE(d.device_name.empty());
}

TEST(CudaExecutorTest, InjectedFaultFailsTheBatchAndEveryLaterOneStickily) {
  SKIP_WITHOUT_GPU();
  CudaExecutorOptions o = SmallOptions(kFusedAlwaysThreshold);
  o.fail_batch_number_for_testing = 2;
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::Create(o);
  ASSERT_THAT(executor, IsOk());
  absl::StatusOr<std::unique_ptr<ArenaMemory>> arena = (*executor)->AllocateArenaMemory(1 << 20);
  ASSERT_THAT(arena, IsOk());
  GreedyWorkloadOptions wo;
  wo.num_sequences = 16;
  wo.row_bytes = 64;
  const GreedyWorkload w = *GenerateGreedyWorkload(wo);

  PoisonArena(**arena, 0, w.total_draft_rows() * w.row_bytes());
  Outcome first = RunBatch(**executor, MakeBatch(**executor, w, **arena, 0, 1));
  ASSERT_THAT(first.status, IsOk());
  EXPECT_TRUE(MatchesOracle(w, *first.batch, **arena, 0));
  EXPECT_THAT((*executor)->health(), IsOk());

  Outcome second = RunBatch(**executor, MakeBatch(**executor, w, **arena, 0, 2));
  EXPECT_THAT(second.status, StatusIs(absl::StatusCode::kInternal,
                                      HasSubstr("cudaErrorInvalidMemcpyDirection")));
  EXPECT_THAT((*executor)->health(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("out of service")));
  // Sticky: a later batch never runs, whatever the device would now do.
  Outcome third = RunBatch(**executor, MakeBatch(**executor, w, **arena, 0, 3));
  EXPECT_THAT(third.status, StatusIs(absl::StatusCode::kInternal,
                                     HasSubstr("cudaErrorInvalidMemcpyDirection")));
  EXPECT_TRUE(third.batch->results.accepted_lengths.empty());
}

// A host-decided batch that leaves the device nothing to do (no KV rows, or
// rows but none accepted) enqueues nothing: zero device time, the oracle's
// results, completed on the executor's thread; the arena stays untouched.
// Its inline rows (none) are answered from the staging.
TEST(CudaExecutorTest, HostDecidedBatchWithNothingToCopyLeavesTheDeviceIdle) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor =
      CudaExecutor::Create(SmallOptions(kFusedAlwaysThreshold));
  ASSERT_THAT(executor, IsOk());
  absl::StatusOr<std::unique_ptr<ArenaMemory>> arena = (*executor)->AllocateArenaMemory(1 << 20);
  ASSERT_THAT(arena, IsOk());
  uint64_t id = 0;
  for (const int64_t row_bytes : {int64_t{0}, int64_t{256}}) {
    GreedyWorkloadOptions wo;
    wo.num_sequences = 9;
    wo.gamma_min = 1;
    wo.gamma_max = 8;
    wo.alpha = row_bytes == 0 ? 0.7 : 0.0;  // with rows: nothing accepted
    wo.row_bytes = row_bytes;
    wo.seed = 3;
    const GreedyWorkload w = *GenerateGreedyWorkload(wo);
    SCOPED_TRACE(::testing::Message() << "row_bytes " << row_bytes);
    ASSERT_TRUE(row_bytes == 0 || w.expected.packed_kv.empty());
    PoisonArena(**arena, 0, w.total_draft_rows() * w.row_bytes());
    std::unique_ptr<Batch> batch = MakeBatch(**executor, w, **arena, 0, ++id);
    batch->wants_host_rows = row_bytes > 0;
    Outcome out = RunBatch(**executor, std::move(batch));
    ASSERT_THAT(out.status, IsOk());
    EXPECT_EQ(out.batch->path, ExecutionPathLabel::kHostDecided);
    EXPECT_EQ(out.batch->device_time, absl::ZeroDuration());
    EXPECT_NE(out.completion_thread, std::this_thread::get_id());
    EXPECT_EQ(out.batch->packed_kv_host, nullptr);
    EXPECT_EQ(out.batch->inline_rows_from_staging, row_bytes > 0);
    ASSERT_TRUE(MatchesOracle(w, *out.batch, **arena, 0));
  }
  EXPECT_THAT((*executor)->health(), IsOk());
}

TEST(CudaExecutorTest, ExplicitFaultHookFailsTheNextBatch) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor =
      CudaExecutor::Create(SmallOptions(kFusedAlwaysThreshold));
  ASSERT_THAT(executor, IsOk());
  absl::StatusOr<std::unique_ptr<ArenaMemory>> arena = (*executor)->AllocateArenaMemory(1 << 20);
  ASSERT_THAT(arena, IsOk());
  GreedyWorkloadOptions wo;
  wo.num_sequences = 4;
  const GreedyWorkload w = *GenerateGreedyWorkload(wo);
  (*executor)->InjectFaultForTesting();
  EXPECT_THAT(RunBatch(**executor, MakeBatch(**executor, w, **arena, 0, 1)).status,
              StatusIs(absl::StatusCode::kInternal, HasSubstr("cuda:0")));
  EXPECT_FALSE((*executor)->health().ok());
}

TEST(CudaExecutorTest, BatchLargerThanTheSlotsFailsAloneWithoutAFault) {
  SKIP_WITHOUT_GPU();
  CudaExecutorOptions o = SmallOptions(kFusedAlwaysThreshold);
  o.max_batch_sequences = 8;
  o.max_draft_tokens = 8;
  o.max_batch_kv_bytes = 4096;
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::Create(o);
  ASSERT_THAT(executor, IsOk());
  absl::StatusOr<std::unique_ptr<ArenaMemory>> arena = (*executor)->AllocateArenaMemory(1 << 20);
  ASSERT_THAT(arena, IsOk());
  GreedyWorkloadOptions wo;
  wo.num_sequences = 16;
  const GreedyWorkload w = *GenerateGreedyWorkload(wo);
  // Refused when staging is asked for: no slot is taken, nothing launched.
  EXPECT_THAT(testing::StageGreedyWorkload(**executor, w, (*arena)->base()),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("16 sequences")));
  EXPECT_THAT((*executor)->health(), IsOk());
  wo.num_sequences = 4;
  const GreedyWorkload fits = *GenerateGreedyWorkload(wo);
  EXPECT_THAT(RunBatch(**executor, MakeBatch(**executor, fits, **arena, 0, 2)).status, IsOk());
}

TEST(CudaExecutorTest, StartUpOutOfMemoryNamesTheFlagToLower) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor =
      CudaExecutor::Create(SmallOptions(kFusedAlwaysThreshold));
  ASSERT_THAT(executor, IsOk());
  EXPECT_THAT((*executor)->AllocateArenaMemory(int64_t{1} << 50),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("--kv_arena_bytes")));
  CudaExecutorOptions huge = SmallOptions(kFusedAlwaysThreshold);
  huge.max_batch_kv_bytes = int64_t{1} << 46;
  EXPECT_THAT(CudaExecutor::Create(huge),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("--max_batch_bytes")));
  // Neither failure is a device fault.
  EXPECT_THAT((*executor)->health(), IsOk());
}

TEST(CudaExecutorTest, ArenaCopyOutsideTheArenaIsOutOfRange) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor =
      CudaExecutor::Create(SmallOptions(kFusedAlwaysThreshold));
  ASSERT_THAT(executor, IsOk());
  absl::StatusOr<std::unique_ptr<ArenaMemory>> arena = (*executor)->AllocateArenaMemory(4096);
  ASSERT_THAT(arena, IsOk());
  std::vector<std::byte> out(8192);
  EXPECT_THAT((*arena)->CopyToHost(4000, 200, out.data()),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("outside the arena")));
  EXPECT_THAT((*arena)->CopyToHost(0, 4096, out.data()), IsOk());
  EXPECT_TRUE(::specverify::testing::AllBytesAre(std::span<const std::byte>(out).first(4096),
                                                 std::byte{0}));
}

TEST(CudaExecutorTest, NoDeviceAtThatOrdinalIsAFailedPrecondition) {
  CudaExecutorOptions o;
  o.device_ordinal = 4096;
  EXPECT_THAT(CudaExecutor::Create(o),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("cuda:4096")));
}

TEST(CudaExecutorTest, SubmitAfterShutdownIsUnavailable) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor =
      CudaExecutor::Create(SmallOptions(kFusedAlwaysThreshold));
  ASSERT_THAT(executor, IsOk());
  (*executor)->Shutdown();
  GreedyWorkloadOptions wo;
  const GreedyWorkload w = *GenerateGreedyWorkload(wo);
  auto batch = std::make_unique<Batch>();
  absl::Status status;
  (*executor)->Submit(std::move(batch),
                      [&](std::unique_ptr<Batch>, absl::Status s) { status = std::move(s); });
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shut down")));
}

// The rows of a request's staged sequences as a packed answer would carry
// them: each sequence's first k rows, in order.
std::vector<std::byte> AcceptedRowsFromStaging(const Batch& batch) {
  const GreedyHostInputs& in = batch.inputs;
  std::vector<std::byte> rows;
  for (int32_t i = 0; i < in.num_sequences(); ++i) {
    const std::byte* first = in.draft_kv.data() + int64_t{in.draft_offsets[i]} * in.row_bytes;
    rows.insert(rows.end(), first, first + int64_t{batch.results.accepted_lengths[i]} * in.row_bytes);
  }
  return rows;
}

// Twelve ragged sequences of 4 KiB rows: the inline-answer tests' batch.
GreedyWorkload InlineRowsWorkload() {
  GreedyWorkloadOptions wo;
  wo.num_sequences = 12;
  wo.gamma_min = 1;
  wo.gamma_max = 12;
  wo.row_bytes = 4096;
  wo.seed = 5;
  return *GenerateGreedyWorkload(wo);
}

// Inline answers of a device-decided batch come back in pinned memory, by
// one D2H copy of the packed rows.
TEST(CudaExecutorTest, InlineRowsComeBackInPinnedMemoryWithTheResults) {
  SKIP_WITHOUT_GPU();
  CudaExecutorOptions o = SmallOptions(kFusedAlwaysThreshold);
  o.greedy_host_decision_max_rows = 0;
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::Create(o);
  ASSERT_THAT(executor, IsOk());
  absl::StatusOr<std::unique_ptr<ArenaMemory>> arena = (*executor)->AllocateArenaMemory(1 << 22);
  ASSERT_THAT(arena, IsOk());
  const GreedyWorkload w = InlineRowsWorkload();
  std::unique_ptr<Batch> batch = MakeBatch(**executor, w, **arena, 0, 1);
  batch->wants_host_rows = true;
  Outcome out = RunBatch(**executor, std::move(batch), /*keep_staging=*/true);
  ASSERT_THAT(out.status, IsOk());
  EXPECT_FALSE(out.batch->inline_rows_from_staging);
  ASSERT_NE(out.batch->packed_kv_host, nullptr);
  EXPECT_TRUE(::specverify::testing::BytesEqual(
      std::span<const std::byte>(out.batch->packed_kv_host, w.expected.packed_kv.size()),
      w.expected.packed_kv));
  // Without the ask, no copy and no pointer.
  Outcome plain = RunBatch(**executor, MakeBatch(**executor, w, **arena, 0, 2));
  ASSERT_THAT(plain.status, IsOk());
  EXPECT_EQ(plain.batch->packed_kv_host, nullptr);
}

// A host-decided batch leaves inline answers' rows where they were staged
// (the batcher copies each sequence's first k rows from there), so with no
// handle in the batch the device does nothing; with a handle it packs every
// row into the arena, and the staged rows are still intact for the inline
// answers (no D2H wrote over them).
TEST(CudaExecutorTest, HostDecidedInlineRowsAreAnsweredFromTheStaging) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor =
      CudaExecutor::Create(SmallOptions(kFusedAlwaysThreshold));
  ASSERT_THAT(executor, IsOk());
  absl::StatusOr<std::unique_ptr<ArenaMemory>> arena = (*executor)->AllocateArenaMemory(1 << 22);
  ASSERT_THAT(arena, IsOk());
  const GreedyWorkload w = InlineRowsWorkload();
  ASSERT_FALSE(w.expected.packed_kv.empty());
  const int64_t capacity = w.total_draft_rows() * w.row_bytes();
  uint64_t id = 0;
  for (const bool with_handle : {false, true}) {
    SCOPED_TRACE(with_handle ? "inline and handle requests" : "inline requests only");
    PoisonArena(**arena, 0, capacity);
    std::unique_ptr<Batch> batch = MakeBatch(**executor, w, **arena, 0, ++id);
    batch->wants_host_rows = true;
    batch->wants_handle_rows = with_handle;
    Outcome out = RunBatch(**executor, std::move(batch), /*keep_staging=*/true);
    ASSERT_THAT(out.status, IsOk());
    EXPECT_EQ(out.batch->path, ExecutionPathLabel::kHostDecided);
    EXPECT_TRUE(out.batch->inline_rows_from_staging);
    EXPECT_EQ(out.batch->packed_kv_host, nullptr);
    EXPECT_TRUE(::specverify::testing::BytesEqual(AcceptedRowsFromStaging(*out.batch),
                                                  w.expected.packed_kv));
    if (with_handle) {
      EXPECT_GT(out.batch->device_time, absl::ZeroDuration());
      EXPECT_TRUE(MatchesOracle(w, *out.batch, **arena, 0));
    } else {
      EXPECT_EQ(out.batch->device_time, absl::ZeroDuration());
      std::vector<std::byte> packed(static_cast<size_t>(capacity));
      ASSERT_THAT((*arena)->CopyToHost(0, capacity, packed.data()), IsOk());
      EXPECT_TRUE(::specverify::testing::AllBytesAre(packed, kPoison)) << "rows packed for nobody";
    }
  }
  EXPECT_THAT((*executor)->health(), IsOk());
}

TEST(CudaExecutorTest, ABatchNotStagedByTheExecutorIsRefused) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor =
      CudaExecutor::Create(SmallOptions(kFusedAlwaysThreshold));
  ASSERT_THAT(executor, IsOk());
  Outcome out = RunBatch(**executor, std::make_unique<Batch>());
  EXPECT_THAT(out.status, StatusIs(absl::StatusCode::kFailedPrecondition,
                                   HasSubstr("not staged by this CUDA executor")));
  EXPECT_THAT((*executor)->health(), IsOk());
}

// A sampled batch's per-sequence parameters, row tables and staged rows
// travel in the inputs' H2D copy when they fit after the inputs in the
// slot's inputs buffers (one copy, one operation fewer before the kernels);
// otherwise, and when region KV rows leave the inputs' tail to the device,
// in the slot's own sampled buffers (two copies).
TEST(CudaExecutorTest, SampledSectionSharesTheInputsCopyWhenItFits) {
  SKIP_WITHOUT_GPU();
  CudaExecutorOptions options = SmallOptions(kFusedAlwaysThreshold);
  options.max_batch_sequences = 8;
  options.max_batch_kv_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::Create(options);
  ASSERT_THAT(executor, IsOk());
  const auto staged_at = [&](const StagingShape& shape) -> int64_t {
    Batch batch;
    absl::StatusOr<std::unique_ptr<StagingLease>> lease = (*executor)->AcquireStaging(shape, &batch);
    EXPECT_THAT(lease, IsOk());
    if (!lease.ok()) return -2;
    const auto* inputs = reinterpret_cast<const std::byte*>(batch.inputs.draft_offsets.data());
    const auto* sampled = reinterpret_cast<const std::byte*>(batch.sampled.sequences.data());
    const int64_t at = (*executor)->SampledSectionInInputs(shape);
    if (at >= 0) {
      EXPECT_EQ(sampled - inputs, at);
      EXPECT_EQ(at, StagingAlignUp(LayoutStaging(shape).inputs_total));
    } else {
      const std::byte* inputs_end = inputs + LayoutStaging(shape).inputs_total;
      EXPECT_TRUE(sampled + LayoutStaging(shape).sampled_total <= inputs || sampled >= inputs_end)
          << "a sampled section outside the inputs must not overlap them";
    }
    return at;
  };
  StagingShape small;
  small.sampled = true;
  small.sequences = 4;
  small.draft_rows = 16;
  small.target_value_bytes = (16 + 4) * 1000 * 4;
  small.draft_value_bytes = 16 * 1000 * 4;
  EXPECT_GE(staged_at(small), 0);
  StagingShape in_regions = small;  // row tables only
  in_regions.values_from_regions = in_regions.draft_rows_from_regions = true;
  in_regions.target_value_bytes = in_regions.draft_value_bytes = 0;
  EXPECT_GE(staged_at(in_regions), 0);
  StagingShape with_rows = small;  // KV rows and distributions filling the slot
  with_rows.kv_bytes = 1 << 20;
  with_rows.target_value_bytes = 512 << 10;
  with_rows.draft_value_bytes = 0;
  EXPECT_EQ(staged_at(with_rows), -1);
  StagingShape kv_in_regions = small;  // the device gathers the inputs' tail
  kv_in_regions.kv_bytes = 16 * 4096;
  kv_in_regions.kv_from_regions = true;
  EXPECT_EQ(staged_at(kv_in_regions), -1);
  StagingShape greedy;
  greedy.sequences = 4;
  greedy.draft_rows = 16;
  EXPECT_EQ((*executor)->SampledSectionInInputs(greedy), -1);
}

}  // namespace
}  // namespace specverify::server
