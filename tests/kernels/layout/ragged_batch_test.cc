// ValidateGreedyBatch rejects every malformed layout with a status that names
// the field, the sequence and the limit.
#include "kernels/layout/ragged_batch.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/workload/greedy_workload.h"
#include "tests/testing/status_matchers.h"

namespace specverify {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::IsOk;
using testing::StatusIs;

// A small valid batch the tests then break one field at a time.
struct Batch {
  std::vector<int32_t> offsets = {0, 2, 5};
  std::vector<int32_t> draft = {1, 2, 3, 4, 5};
  std::vector<int32_t> target = {1, 2, 0, 3, 4, 5, 6};
  std::vector<std::byte> kv = std::vector<std::byte>(5 * 4);
  int64_t row_bytes = 4;
  GreedyHostOutputs* out = nullptr;

  GreedyBatchInput input() const {
    return {static_cast<int32_t>(offsets.size() - 1), offsets.data(), draft.data(),
            target.data(), row_bytes > 0 ? kv.data() : nullptr, row_bytes};
  }
};

absl::Status Validate(Batch& batch, const LayoutLimits& limits = {}) {
  GreedyHostOutputs out(batch.input(), std::byte{0});
  return ValidateGreedyBatch({batch.input(), out.view()}, limits);
}

TEST(ValidateGreedyBatchTest, AcceptsValidBatch) {
  Batch batch;
  EXPECT_THAT(Validate(batch), IsOk());
}

TEST(ValidateGreedyBatchTest, RejectsNonZeroFirstOffset) {
  Batch batch;
  batch.offsets = {1, 2, 5};
  EXPECT_THAT(Validate(batch), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("draft_offsets[0] is 1")));
}

TEST(ValidateGreedyBatchTest, RejectsDecreasingOffsetsNamingTheSequence) {
  Batch batch;
  batch.offsets = {0, 3, 2};
  EXPECT_THAT(Validate(batch),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("sequence 1"), HasSubstr("is -1"),
                             HasSubstr("[1, 256]"))));
}

TEST(ValidateGreedyBatchTest, RejectsEmptyDraft) {
  Batch batch;
  batch.offsets = {0, 0, 5};
  EXPECT_THAT(Validate(batch), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("sequence 0: draft length")));
}

TEST(ValidateGreedyBatchTest, RejectsDraftLongerThanLimit) {
  Batch batch;
  LayoutLimits limits;
  limits.max_draft_tokens = 2;
  EXPECT_THAT(Validate(batch, limits),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("sequence 1"), HasSubstr("is 3"),
                             HasSubstr("[1, 2]"))));
}

TEST(ValidateGreedyBatchTest, RejectsNegativeDraftToken) {
  Batch batch;
  batch.draft[3] = -7;
  EXPECT_THAT(Validate(batch),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequence 1: draft_tokens[1] is -7; must be >= 0")));
}

TEST(ValidateGreedyBatchTest, RejectsTargetTokenOutsideVocabulary) {
  Batch batch;
  batch.target[6] = 100;  // sequence 1, bonus position 3
  LayoutLimits limits;
  limits.vocab_size = 100;
  EXPECT_THAT(Validate(batch, limits),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequence 1: target_tokens[3] is 100; must lie in [0, 100)")));
}

TEST(ValidateGreedyBatchTest, RejectsTooManySequences) {
  Batch batch;
  LayoutLimits limits;
  limits.max_sequences = 1;
  EXPECT_THAT(Validate(batch, limits),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("num_sequences is 2; must lie in [1, 1]")));
}

TEST(ValidateGreedyBatchTest, RejectsKvPointerWithoutRowBytes) {
  Batch batch;
  GreedyHostOutputs out(batch.input(), std::byte{0});
  GreedyBatchInput in = batch.input();
  in.row_bytes = 0;  // draft_kv still set
  EXPECT_THAT(ValidateGreedyBatch({in, out.view()}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("draft_kv")));
}

TEST(ValidateGreedyBatchTest, RejectsMissingOutput) {
  Batch batch;
  GreedyHostOutputs out(batch.input(), std::byte{0});
  GreedyBatchOutput view = out.view();
  view.next_tokens = nullptr;
  EXPECT_THAT(ValidateGreedyBatch({batch.input(), view}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("next_tokens")));
}

}  // namespace
}  // namespace specverify
