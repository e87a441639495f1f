// The host's half of a host-finished race: FinishRejectionOutcomes folds each
// pending sequence's race slots as the device merge would (the GPU parity
// suite runs both merges against the CPU reference; this pins the fold's
// rules where no GPU is needed).
#include "kernels/sampling/rejection_finish.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/sampling/rejection_params.h"
#include "kernels/sampling/rejection_validate.h"
#include "tests/testing/status_matchers.h"

namespace specverify {
namespace {

using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Per-sequence outputs as a pending launch leaves them, and G slots each.
struct PendingBatch {
  PendingBatch(int32_t b, int32_t g)
      : accepted(b, 0), next(b, -1), mismatch(b, 0), codes(b, kRejectionOk), positions(b, -1),
        slots(static_cast<size_t>(b) * g), per_sequence(g) {}
  void Pending(int32_t i, int32_t k, int32_t gamma) {
    accepted[i] = k;
    next[i] = -1;
    mismatch[i] = k < gamma ? 1 : 0;
    codes[i] = kRejectionRacePending;
    positions[i] = k;
  }
  RejectionRaceSlot& Slot(int32_t i, int32_t g) { return slots[static_cast<size_t>(i) * per_sequence + g]; }
  void Finish() {
    RejectionBatchOutput view;
    view.accepted_lengths = accepted.data();
    view.next_tokens = next.data();
    view.mismatch = mismatch.data();
    view.status_codes = codes.data();
    view.error_positions = positions.data();
    FinishRejectionOutcomes(static_cast<int32_t>(codes.size()), slots.data(), per_sequence, view);
  }
  std::vector<int32_t> accepted, next;
  std::vector<uint8_t> mismatch;
  std::vector<int32_t> codes, positions;
  std::vector<RejectionRaceSlot> slots;
  int32_t per_sequence;
};

TEST(RejectionFinishTest, TheSmallestKeyAcrossTheSlotsWins) {
  PendingBatch p(1, 4);
  p.Pending(0, 3, 8);
  p.Slot(0, 0).word = RaceWord(0.5f, 7, false);
  p.Slot(0, 1).word = kRaceNoEntrant;  // a share without an entrant
  p.Slot(0, 2).word = RaceWord(0.25f, 90001, false);
  p.Slot(0, 3).word = RaceWord(0.75f, 2, false);
  p.Finish();
  EXPECT_EQ(p.codes[0], kRejectionOk);
  EXPECT_EQ(p.next[0], 90001);
  EXPECT_EQ(p.accepted[0], 3);
  EXPECT_EQ(p.mismatch[0], 1);
  EXPECT_EQ(p.positions[0], -1);
}

TEST(RejectionFinishTest, EqualKeysGoToTheLowerTokenAndResidualEntrantsBeatTargetOnes) {
  PendingBatch p(2, 2);
  p.Pending(0, 8, 8);  // the bonus token: k == gamma, no mismatch
  p.Slot(0, 0).word = RaceWord(0.5f, 300, false);
  p.Slot(0, 1).word = RaceWord(0.5f, 299, false);
  p.Pending(1, 2, 8);
  p.Slot(1, 0).word = RaceWord(0.0f, 5, true);  // the target race's best key
  p.Slot(1, 1).word = RaceWord(kInf, 6, false);   // any residual entrant
  p.Finish();
  EXPECT_EQ(p.next[0], 299);
  EXPECT_EQ(p.mismatch[0], 0);
  EXPECT_EQ(p.next[1], 6);
}

TEST(RejectionFinishTest, AnInvalidValueInAnySlotFailsTheSequenceAtK) {
  PendingBatch p(3, 3);
  for (int32_t i = 0; i < 3; ++i) {
    p.Pending(i, 4, 8);
    for (int32_t g = 0; g < 3; ++g) p.Slot(i, g).word = RaceWord(0.1f * (g + 1), 10 + g, false);
  }
  p.Slot(0, 2).flags = 2;  // a draft value
  p.Slot(0, 1).flags = 1;  // and a target value: the target's is reported
  p.Slot(1, 0).flags = 2;
  p.Finish();
  EXPECT_EQ(p.codes[0], kRejectionBadTargetValue);
  EXPECT_EQ(p.codes[1], kRejectionBadDraftValue);
  for (int32_t i = 0; i < 2; ++i) {
    EXPECT_EQ(p.accepted[i], 0) << i;
    EXPECT_EQ(p.next[i], -1) << i;
    EXPECT_EQ(p.mismatch[i], 1) << i;
    EXPECT_EQ(p.positions[i], 4) << i;
  }
  EXPECT_EQ(p.codes[2], kRejectionOk);
  EXPECT_EQ(p.next[2], 10);
}

TEST(RejectionFinishTest, NoEntrantInAnySlotIsAnEmptyRow) {
  PendingBatch p(1, 3);
  p.Pending(0, 0, 1);
  p.Finish();
  EXPECT_EQ(p.codes[0], kRejectionEmptyTargetRow);
  EXPECT_EQ(p.positions[0], 0);
  EXPECT_EQ(p.next[0], -1);
}

TEST(RejectionFinishTest, OutcomesDecidedWithoutARaceAreLeftAlone) {
  PendingBatch p(2, 1);
  p.codes[0] = kRejectionDraftTokenOutOfRange;
  p.positions[0] = 5;
  p.mismatch[0] = 1;
  p.accepted[1] = 2;
  p.next[1] = 44;  // decided without a race (greedy at temperature 0)
  p.mismatch[1] = 1;
  p.Slot(0, 0).word = RaceWord(0.1f, 1, false);  // stale slots of an earlier batch
  p.Slot(1, 0).flags = 1;
  p.Finish();
  EXPECT_EQ(p.codes[0], kRejectionDraftTokenOutOfRange);
  EXPECT_EQ(p.positions[0], 5);
  EXPECT_EQ(p.codes[1], kRejectionOk);
  EXPECT_EQ(p.next[1], 44);
  EXPECT_EQ(p.accepted[1], 2);
}

TEST(RejectionFinishTest, AnUnfinishedOutcomeIsAnInternalError) {
  const int32_t codes[2] = {kRejectionOk, kRejectionRacePending};
  const int32_t positions[2] = {-1, 3};
  EXPECT_THAT(RejectionOutcomeStatus(codes, positions, 2),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("FinishRejectionOutcomes")));
}

}  // namespace
}  // namespace specverify
