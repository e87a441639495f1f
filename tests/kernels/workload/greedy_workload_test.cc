// The generator builds what seed 000 §2.4 describes and is reproducible.
#include "kernels/workload/greedy_workload.h"

#include <algorithm>
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace specverify {
namespace {

using ::testing::HasSubstr;
using testing::StatusIs;

TEST(GreedyWorkloadTest, TargetsAgreeBeforeAcceptedLengthAndDisagreeAtIt) {
  GreedyWorkloadOptions o;
  o.num_sequences = 500;
  o.gamma_min = 1;
  o.gamma_max = 64;
  o.alpha = 0.8;
  o.vocab_size = 2;  // the hardest case for "disagree": one alternative only
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
  ASSERT_TRUE(w.ok()) << w.status();
  for (int32_t i = 0; i < o.num_sequences; ++i) {
    const int32_t k = w->expected.accepted_lengths[i];
    const auto draft = w->draft_tokens_of(i);
    const auto target = w->target_tokens_of(i);
    ASSERT_GE(k, 0);
    ASSERT_LE(k, w->gamma(i));
    for (int32_t j = 0; j < k; ++j) ASSERT_EQ(draft[j], target[j]) << i << "," << j;
    if (k < w->gamma(i)) {
      ASSERT_NE(draft[k], target[k]) << "sequence " << i;
    }
    EXPECT_EQ(w->expected.next_tokens[i], target[k]);
    EXPECT_EQ(w->expected.mismatch[i], k < w->gamma(i) ? 1 : 0);
  }
}

TEST(GreedyWorkloadTest, AcceptedLengthsFollowBinomialMean) {
  GreedyWorkloadOptions o;
  o.num_sequences = 4096;
  o.gamma_min = o.gamma_max = 16;
  o.alpha = 0.3;
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
  ASSERT_TRUE(w.ok());
  double sum = 0;
  for (int32_t k : w->expected.accepted_lengths) sum += k;
  const double mean = sum / o.num_sequences;
  // Binomial(16, 0.3): mean 4.8, sd 1.83; the mean of 4096 draws has sd 0.029.
  // Six standard errors make a false failure a one-in-10^8 event.
  EXPECT_NEAR(mean, 4.8, 6 * 0.029);
}

TEST(GreedyWorkloadTest, SameSeedSameWorkloadAndPrefixStable) {
  GreedyWorkloadOptions o;
  o.num_sequences = 50;
  o.gamma_min = 1;
  o.gamma_max = 30;
  o.row_bytes = 10;
  absl::StatusOr<GreedyWorkload> a = GenerateGreedyWorkload(o);
  absl::StatusOr<GreedyWorkload> b = GenerateGreedyWorkload(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->draft_tokens, b->draft_tokens);
  EXPECT_EQ(a->draft_kv, b->draft_kv);

  o.seed = 2;
  absl::StatusOr<GreedyWorkload> c = GenerateGreedyWorkload(o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->draft_tokens, c->draft_tokens);
}

TEST(GreedyWorkloadTest, PackedKvIsTheAcceptedRowsInOrder) {
  GreedyWorkloadOptions o;
  o.num_sequences = 3;
  o.gamma_min = 2;
  o.gamma_max = 5;
  o.alpha = 0.5;
  o.row_bytes = 8;
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
  ASSERT_TRUE(w.ok());
  std::vector<std::byte> expected;
  for (int32_t i = 0; i < 3; ++i) {
    const auto rows = w->draft_kv_of(i);
    expected.insert(expected.end(), rows.begin(),
                    rows.begin() + w->expected.accepted_lengths[i] * o.row_bytes);
  }
  EXPECT_EQ(w->expected.packed_kv, expected);
}

// Issue #15 (UBSan): nothing accepted means an empty packed_kv whose data()
// is null; the generator must not hand it to memcpy. Likewise host outputs
// for a batch without KV rows (empty packed_kv). Fails under
// -fsanitize=undefined before the guards.
TEST(GreedyWorkloadTest, NothingAcceptedAndNoRowsNeedNoCopies) {
  GreedyWorkloadOptions o;
  o.num_sequences = 4;
  o.alpha = 0.0;  // k = 0 everywhere
  o.row_bytes = 16;
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->expected.packed_kv.empty());
  for (int32_t i = 0; i < o.num_sequences; ++i) EXPECT_EQ(w->expected.accepted_lengths[i], 0);

  o.row_bytes = 0;
  w = GenerateGreedyWorkload(o);
  ASSERT_TRUE(w.ok());
  GreedyHostOutputs outputs(w->input(), std::byte{0xAB});
  EXPECT_TRUE(outputs.packed_kv.empty());
  EXPECT_EQ(outputs.view().packed_kv, nullptr);
  ASSERT_EQ(outputs.accepted_lengths.size(), 4u);
  EXPECT_EQ(static_cast<uint32_t>(outputs.accepted_lengths[0]), 0xABABABABu);
}

// The load generator pools many requests' sequences into one workload
// (--pool_requests x --sequences_per_request, e.g. 32 x 256 for region
// returns at concurrency 32): more than one batch may hold, same prefix.
TEST(GreedyWorkloadTest, AWorkloadMayHoldMoreSequencesThanOneBatch) {
  GreedyWorkloadOptions o;
  o.num_sequences = kMaxBatchSequences;
  o.row_bytes = 4;
  absl::StatusOr<GreedyWorkload> batch = GenerateGreedyWorkload(o);
  o.num_sequences = 2 * kMaxBatchSequences;
  absl::StatusOr<GreedyWorkload> pool = GenerateGreedyWorkload(o);
  ASSERT_TRUE(batch.ok());
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ(pool->num_sequences(), 2 * kMaxBatchSequences);
  for (int32_t i = 0; i < kMaxBatchSequences; ++i) {
    ASSERT_TRUE(std::ranges::equal(pool->draft_tokens_of(i), batch->draft_tokens_of(i))) << i;
    ASSERT_EQ(pool->expected.accepted_lengths[i], batch->expected.accepted_lengths[i]) << i;
  }
}

TEST(GreedyWorkloadTest, RejectsOutOfRangeOptions) {
  GreedyWorkloadOptions o;
  o.alpha = 1.5;
  EXPECT_THAT(GenerateGreedyWorkload(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("alpha")));
  o = {};
  o.gamma_max = 257;
  EXPECT_THAT(GenerateGreedyWorkload(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gamma")));
  o = {};
  o.num_sequences = 0;
  EXPECT_THAT(GenerateGreedyWorkload(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_sequences")));
  o.num_sequences = kMaxGreedyWorkloadSequences + 1;
  EXPECT_THAT(GenerateGreedyWorkload(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_sequences")));
  o = {};
  o.num_sequences = kMaxGreedyWorkloadSequences;  // x 257 target tokens > int32
  o.gamma_max = 256;
  EXPECT_THAT(GenerateGreedyWorkload(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be at most 2147483647")));
  o = {};
  o.vocab_size = 1;
  EXPECT_THAT(GenerateGreedyWorkload(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vocab_size")));
}

}  // namespace
}  // namespace specverify
