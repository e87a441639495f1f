// The dispatcher's choice and configuration (host only, runs everywhere), the
// device-batch validation (host fields only), and the calibration (GPU only).
#include "kernels/greedy/greedy_dispatch.h"

#include <chrono>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/cuda_status.h"
#include "kernels/greedy/greedy_cuda.h"
#include "tests/testing/status_matchers.h"

namespace specverify {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

// Host-side shape only: the pointers are never dereferenced by the code
// under test, so any distinct non-null values do.
GreedyDeviceBatch FakeBatch(int32_t b, int32_t gamma, int64_t row_bytes) {
  static int32_t ints[8];
  static std::byte bytes[8];
  static uint8_t flags[8];
  GreedyDeviceBatch batch;
  batch.params.input.num_sequences = b;
  batch.params.input.draft_offsets = ints;
  batch.params.input.draft_tokens = ints;
  batch.params.input.target_tokens = ints;
  batch.params.input.draft_kv = row_bytes > 0 ? bytes : nullptr;
  batch.params.input.row_bytes = row_bytes;
  batch.params.output.accepted_lengths = ints;
  batch.params.output.next_tokens = ints;
  batch.params.output.mismatch = flags;
  batch.params.output.packed_row_offsets = ints;
  batch.params.output.packed_kv = row_bytes > 0 ? bytes : nullptr;
  batch.total_draft_rows = int64_t{b} * gamma;
  batch.max_gamma = gamma;
  return batch;
}

GreedyScratch FakeScratch() {
  static char storage[1];
  GreedyScratch scratch;
  scratch.data = storage;
  scratch.bytes = size_t{1} << 30;  // only the size field is checked
  return scratch;
}

TEST(GreedyDispatcherTest, ConfiguredThresholdSplitsOnEstimatedPackBytes) {
  GreedyDispatchConfig config;
  config.threshold_bytes = 1 << 20;  // 1 MiB
  absl::StatusOr<GreedyDispatcher> d = GreedyDispatcher::Create(config, nullptr);
  ASSERT_THAT(d.status(), IsOk());
  EXPECT_EQ(d->info().dispatch_threshold_source, "config");
  EXPECT_EQ(d->threshold_bytes(), 1 << 20);
  // 32 x 7 x 4096 = 896 KiB < 1 MiB; 32 x 8 x 4096 = 1 MiB is not below tau.
  EXPECT_EQ(d->Choose(FakeBatch(32, 7, 4096)), GreedyPath::kFused);
  EXPECT_EQ(d->Choose(FakeBatch(32, 8, 4096)), GreedyPath::kTwoStep);
  EXPECT_EQ(d->Choose(FakeBatch(4096, 256, 0)), GreedyPath::kFused);
}

TEST(GreedyDispatcherTest, ExpectedAcceptanceScalesTheEstimate) {
  GreedyDispatchConfig config;
  config.threshold_bytes = 1 << 20;
  config.expected_acceptance = 0.5;
  absl::StatusOr<GreedyDispatcher> d = GreedyDispatcher::Create(config, nullptr);
  ASSERT_THAT(d.status(), IsOk());
  EXPECT_EQ(d->EstimatedPackBytes(FakeBatch(32, 8, 4096)), 512 * 1024);
  EXPECT_EQ(d->Choose(FakeBatch(32, 8, 4096)), GreedyPath::kFused);
  EXPECT_EQ(d->Choose(FakeBatch(32, 16, 4096)), GreedyPath::kTwoStep);
}

TEST(GreedyDispatcherTest, RejectsNegativeThresholdAndBadAcceptance) {
  GreedyDispatchConfig config;
  config.threshold_bytes = -1;
  EXPECT_THAT(GreedyDispatcher::Create(config, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("threshold_bytes")));
  config.threshold_bytes = 0;
  config.expected_acceptance = 1.5;
  EXPECT_THAT(GreedyDispatcher::Create(config, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected_acceptance")));
}

TEST(GreedyDeviceBatchValidationTest, AcceptsWellFormedBatch) {
  EXPECT_THAT(ValidateGreedyDeviceBatch(FakeBatch(32, 8, 4096), FakeScratch()),
              IsOk());
  EXPECT_THAT(ValidateGreedyDeviceBatch(FakeBatch(4096, 256, 0), FakeScratch()),
              IsOk());
}

TEST(GreedyDeviceBatchValidationTest, NamesTheOffendingField) {
  const GreedyScratch scratch = FakeScratch();
  GreedyDeviceBatch batch = FakeBatch(kMaxBatchSequences + 1, 8, 16);
  EXPECT_THAT(ValidateGreedyDeviceBatch(batch, scratch),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("num_sequences")));
  batch = FakeBatch(4, 8, 16);
  batch.max_gamma = kMaxDraftTokens + 1;
  EXPECT_THAT(ValidateGreedyDeviceBatch(batch, scratch),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_gamma")));
  batch = FakeBatch(4, 8, 16);
  batch.total_draft_rows = 33;  // more than 4 x 8
  EXPECT_THAT(ValidateGreedyDeviceBatch(batch, scratch),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("total_draft_rows")));
  batch = FakeBatch(4, 8, 16);
  batch.params.output.packed_kv = nullptr;
  EXPECT_THAT(ValidateGreedyDeviceBatch(batch, scratch),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("packed_kv")));
  batch = FakeBatch(4, 8, 0);
  batch.params.input.draft_kv = batch.params.input.draft_kv + 0;
  batch.params.output.next_tokens = nullptr;
  EXPECT_THAT(ValidateGreedyDeviceBatch(batch, scratch),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("next_tokens")));
  GreedyScratch tiny = scratch;
  tiny.bytes = 8;
  EXPECT_THAT(ValidateGreedyDeviceBatch(FakeBatch(4, 8, 16), tiny),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("scratch.bytes")));
}

TEST(GreedyCalibrationTest, MeasuresBothPathsAndPicksCrossoverQuickly) {
  if (!CudaDeviceAvailable()) {
    GTEST_SKIP() << "no CUDA device: calibration not run here";
  }
  GreedyDispatchConfig config;  // no threshold: calibrate
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<GreedyDispatcher> d = GreedyDispatcher::Create(config, nullptr);
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - started)
                             .count();
  ASSERT_THAT(d.status(), IsOk());
  const GreedyDispatchInfo& info = d->info();
  std::cout << info.summary << "\n";
  for (const GreedyCalibrationPoint& p : info.measurements) {
    std::cout << "  pack_bytes=" << p.pack_bytes << " b=" << p.num_sequences
              << " gamma=" << p.gamma << " fused_us=" << p.fused_us
              << " two_step_us=" << p.two_step_us << "\n";
  }
  EXPECT_EQ(info.dispatch_threshold_source, "calibration");
  // 32 KiB to 64 MiB, doubling; two shapes per rung.
  EXPECT_EQ(info.measurements.size(), 24u);
  for (const GreedyCalibrationPoint& p : info.measurements) {
    EXPECT_GT(p.fused_us, 0);
    EXPECT_GT(p.two_step_us, 0);
  }
  // Start-up budget: well under a few seconds.
  EXPECT_LT(seconds, 2.0);
}

}  // namespace
}  // namespace specverify
