// The CPU reference against the workload generator's construction oracle,
// over the foundation grid, ragged mixes and the all-accept/all-reject edges.
#include "kernels/greedy/greedy_reference.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/workload/greedy_workload.h"
#include "tests/testing/byte_compare.h"
#include "tests/testing/greedy_grid.h"

namespace specverify {
namespace {

using ::testing::ElementsAreArray;

constexpr std::byte kPoison{0xA5};

void ExpectMatchesOracle(const GreedyWorkload& w) {
  GreedyHostOutputs out(w.input(), kPoison);
  GreedyVerifyParams params{w.input(), out.view()};
  ASSERT_TRUE(ValidateGreedyBatch(params).ok());
  ReferenceGreedyVerifyPack(params);

  const GreedyExpected& e = w.expected;
  EXPECT_THAT(out.accepted_lengths, ElementsAreArray(e.accepted_lengths));
  EXPECT_THAT(out.next_tokens, ElementsAreArray(e.next_tokens));
  EXPECT_THAT(out.mismatch, ElementsAreArray(e.mismatch));
  EXPECT_THAT(out.packed_row_offsets, ElementsAreArray(e.packed_row_offsets));
  const size_t packed_bytes = e.packed_kv.size();
  ASSERT_LE(packed_bytes, out.packed_kv.size());
  const std::span<const std::byte> packed(out.packed_kv);
  EXPECT_TRUE(testing::BytesEqual(packed.first(packed_bytes), e.packed_kv));
  // Nothing is written past the accepted rows: the tail keeps its poison.
  EXPECT_TRUE(testing::AllBytesAre(packed.subspan(packed_bytes), kPoison));
}

class GreedyReferenceGridTest
    : public ::testing::TestWithParam<GreedyWorkloadOptions> {};

TEST_P(GreedyReferenceGridTest, MatchesConstructionOracle) {
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(GetParam());
  ASSERT_TRUE(w.ok()) << w.status();
  ExpectMatchesOracle(*w);
}

INSTANTIATE_TEST_SUITE_P(
    FoundationGrid, GreedyReferenceGridTest,
    ::testing::ValuesIn(testing::GreedyFoundationGrid()),
    [](const auto& info) { return testing::GreedyCaseName(info.param); });

INSTANTIATE_TEST_SUITE_P(
    Ragged, GreedyReferenceGridTest,
    ::testing::ValuesIn(testing::GreedyRaggedCases()),
    [](const auto& info) { return testing::GreedyCaseName(info.param); });

TEST(GreedyReferenceTest, AllAcceptEmitsBonusTokenAndPacksEveryRow) {
  GreedyWorkloadOptions o;
  o.num_sequences = 9;
  o.gamma_min = 1;
  o.gamma_max = 20;
  o.alpha = 1.0;
  o.row_bytes = 6;
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
  ASSERT_TRUE(w.ok());
  GreedyHostOutputs out(w->input(), kPoison);
  GreedyVerifyParams params{w->input(), out.view()};
  ReferenceGreedyVerifyPack(params);
  for (int32_t i = 0; i < o.num_sequences; ++i) {
    EXPECT_EQ(out.accepted_lengths[i], w->gamma(i));
    EXPECT_EQ(out.mismatch[i], 0);
    EXPECT_EQ(out.next_tokens[i], w->target_tokens_of(i).back());
  }
  EXPECT_EQ(out.packed_row_offsets[o.num_sequences], w->total_draft_rows());
  EXPECT_EQ(out.packed_kv, w->draft_kv);
}

TEST(GreedyReferenceTest, AllRejectEmitsCorrectionAtPositionZeroAndPacksNothing) {
  GreedyWorkloadOptions o;
  o.num_sequences = 9;
  o.gamma_min = 1;
  o.gamma_max = 20;
  o.alpha = 0.0;
  o.row_bytes = 6;
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
  ASSERT_TRUE(w.ok());
  GreedyHostOutputs out(w->input(), kPoison);
  GreedyVerifyParams params{w->input(), out.view()};
  ReferenceGreedyVerifyPack(params);
  for (int32_t i = 0; i < o.num_sequences; ++i) {
    EXPECT_EQ(out.accepted_lengths[i], 0);
    EXPECT_EQ(out.mismatch[i], 1);
    EXPECT_EQ(out.next_tokens[i], w->target_tokens_of(i)[0]);
    EXPECT_EQ(out.packed_row_offsets[i], 0);
  }
  EXPECT_TRUE(testing::AllBytesAre(out.packed_kv, kPoison));
}

// Hand-written case, independent of the generator: the first mismatch wins
// even when later positions agree again.
TEST(GreedyReferenceTest, StopsAtFirstMismatchEvenIfLaterPositionsAgree) {
  const std::vector<int32_t> offsets = {0, 4, 6};
  const std::vector<int32_t> draft = {5, 6, 7, 8, /*seq 1*/ 1, 2};
  const std::vector<int32_t> target = {5, 9, 7, 8, 42, /*seq 1*/ 1, 2, 77};
  std::vector<std::byte> kv(6 * 2);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = std::byte(i);
  GreedyBatchInput in{2, offsets.data(), draft.data(), target.data(), kv.data(), 2};
  GreedyHostOutputs out(in, kPoison);
  GreedyVerifyParams params{in, out.view()};
  ASSERT_TRUE(ValidateGreedyBatch(params).ok());
  ReferenceGreedyVerifyPack(params);
  EXPECT_THAT(out.accepted_lengths, ElementsAreArray({1, 2}));
  EXPECT_THAT(out.next_tokens, ElementsAreArray({9, 77}));
  EXPECT_THAT(out.mismatch, ElementsAreArray({1, 0}));
  EXPECT_THAT(out.packed_row_offsets, ElementsAreArray({0, 1, 3}));
  // Row 0 of seq 0 (bytes 0,1), rows 0..1 of seq 1 (draft rows 4,5: bytes 8..11).
  EXPECT_THAT(std::vector<std::byte>(out.packed_kv.begin(), out.packed_kv.begin() + 6),
              ElementsAreArray({std::byte{0}, std::byte{1}, std::byte{8},
                                std::byte{9}, std::byte{10}, std::byte{11}}));
}

TEST(GreedyReferenceTest, RangesComposeToTheWholeBatch) {
  GreedyWorkloadOptions o;
  o.num_sequences = 333;
  o.gamma_min = 1;
  o.gamma_max = 64;
  o.row_bytes = 18;
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
  ASSERT_TRUE(w.ok());
  GreedyHostOutputs out(w->input(), kPoison);
  GreedyVerifyParams params{w->input(), out.view()};
  // As a multi-threaded caller would: disjoint ranges in any order.
  ReferenceGreedyVerifyRange(params, 200, 333);
  ReferenceGreedyVerifyRange(params, 0, 200);
  ReferencePackedRowOffsets(params);
  ReferencePackRange(params, 100, 333);
  ReferencePackRange(params, 0, 100);
  EXPECT_THAT(out.accepted_lengths, ElementsAreArray(w->expected.accepted_lengths));
  EXPECT_TRUE(testing::BytesEqual(
      std::span<const std::byte>(out.packed_kv).first(w->expected.packed_kv.size()),
      w->expected.packed_kv));
}

}  // namespace
}  // namespace specverify
