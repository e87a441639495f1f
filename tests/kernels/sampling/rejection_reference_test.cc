// Semantics and edge cases of the CPU rejection-sampling reference, and the
// host validator's statuses.
#include "kernels/sampling/rejection_reference.h"

#include <cstring>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/greedy/greedy_reference.h"
#include "kernels/sampling/rejection_core.h"
#include "kernels/sampling/rejection_validate.h"
#include "kernels/workload/sampling_workload.h"
#include "tests/kernels/sampling/sampling_test_util.h"
#include "tests/testing/status_matchers.h"

namespace specverify {
namespace {

using ::specverify::testing::ExplicitBatch;
using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct ReferenceRun {
  RejectionHostOutputs out;
  absl::Status validation;
  absl::Status outcome;
};

ReferenceRun RunReference(const RejectionBatchInput& in) {
  ReferenceRun r{RejectionHostOutputs(in.num_sequences, 0xAB), absl::OkStatus(), absl::OkStatus()};
  const RejectionSampleParams params{in, r.out.view()};
  r.validation = ValidateRejectionBatch(params);
  if (!r.validation.ok()) return r;
  ReferenceRejectionSample(params);
  r.outcome = RejectionOutcomeStatus(r.out.status_codes.data(), r.out.error_positions.data(), in.num_sequences);
  return r;
}

SequenceSamplingParams Seq(uint64_t seed, int32_t index) {
  SequenceSamplingParams s;
  s.seed = seed;
  s.sequence_index = index;
  return s;
}

TEST(RejectionReferenceTest, IdenticalDistributionsAcceptEverything) {
  ExplicitBatch batch(4, SampleValueKind::kProbabilities, SampleDtype::kFloat32, true);
  const std::vector<float> p = {0.1f, 0.2f, 0.3f, 0.4f};
  for (int32_t i = 0; i < 200; ++i) batch.Add({p, p, p, p}, {p, p, p}, {i % 4, (i + 1) % 4, 3}, Seq(5, i));
  const ReferenceRun r = RunReference(batch.input());
  ASSERT_THAT(r.validation, IsOk());
  ASSERT_THAT(r.outcome, IsOk());
  for (int32_t i = 0; i < 200; ++i) {
    EXPECT_EQ(r.out.accepted_lengths[i], 3) << "sequence " << i;
    EXPECT_EQ(r.out.mismatch[i], 0);
    EXPECT_GE(r.out.next_tokens[i], 0);
  }
}

TEST(RejectionReferenceTest, DisjointSupportsRejectAtOnceAndSampleTheTargetSupport) {
  ExplicitBatch batch(6, SampleValueKind::kProbabilities, SampleDtype::kFloat32, true);
  const std::vector<float> p = {0.5f, 0.5f, 0.0f, 0.0f, 0.0f, 0.0f};
  const std::vector<float> q = {0.0f, 0.0f, 0.25f, 0.25f, 0.25f, 0.25f};
  for (int32_t i = 0; i < 200; ++i) batch.Add({p, p}, {q}, {2 + i % 4}, Seq(9, i));
  const ReferenceRun r = RunReference(batch.input());
  ASSERT_THAT(r.outcome, IsOk());
  for (int32_t i = 0; i < 200; ++i) {
    EXPECT_EQ(r.out.accepted_lengths[i], 0);
    EXPECT_EQ(r.out.mismatch[i], 1);
    EXPECT_THAT(r.out.next_tokens[i], ::testing::AnyOf(0, 1));
  }
}

TEST(RejectionReferenceTest, ZeroTargetProbabilityIsNeverAcceptedEvenWithZeroDraftProbability) {
  // q(x) == 0 for the drafted token: the ratio counts as +inf when p > 0
  // (accept) and the token is rejected when p == 0.
  ExplicitBatch batch(3, SampleValueKind::kProbabilities, SampleDtype::kFloat32, true);
  const std::vector<float> p_zero = {0.0f, 0.5f, 0.5f};
  const std::vector<float> p_pos = {0.2f, 0.4f, 0.4f};
  const std::vector<float> q = {0.0f, 0.5f, 0.5f};
  for (int32_t i = 0; i < 100; ++i) batch.Add({p_zero, p_zero}, {q}, {0}, Seq(3, i));
  for (int32_t i = 0; i < 100; ++i) batch.Add({p_pos, p_pos}, {q}, {0}, Seq(3, 100 + i));
  const ReferenceRun r = RunReference(batch.input());
  ASSERT_THAT(r.outcome, IsOk());
  for (int32_t i = 0; i < 100; ++i) {
    EXPECT_EQ(r.out.accepted_lengths[i], 0);
    EXPECT_NE(r.out.next_tokens[i], 0);
    EXPECT_EQ(r.out.accepted_lengths[100 + i], 1);
  }
}

TEST(RejectionReferenceTest, OneHotDraftAcceptsWithTheTargetProbability) {
  // No draft probabilities: q is one-hot, so x is accepted w.p. p(x) and the
  // recovery never returns x itself.
  ExplicitBatch batch(4, SampleValueKind::kProbabilities, SampleDtype::kFloat32, false);
  const std::vector<float> p = {0.7f, 0.1f, 0.1f, 0.1f};
  constexpr int32_t kN = 4000;
  for (int32_t i = 0; i < kN; ++i) batch.Add({p, p}, {}, {0}, Seq(11, i));
  const ReferenceRun r = RunReference(batch.input());
  ASSERT_THAT(r.outcome, IsOk());
  int32_t accepted = 0;
  for (int32_t i = 0; i < kN; ++i) {
    accepted += r.out.accepted_lengths[i];
    if (r.out.accepted_lengths[i] == 0) {
      EXPECT_NE(r.out.next_tokens[i], 0);
    }
  }
  // Binomial(4000, 0.7): sd 29; 5 sd bound.
  EXPECT_NEAR(accepted, 2800, 5 * 29);
}

TEST(RejectionReferenceTest, ZeroResidualFallsBackToTheTargetRow) {
  // p = q / 2 elementwise (rows not normalized alike): acceptance 1/2, and
  // max(0, p - q) is all zero, so the documented fallback samples p.
  ExplicitBatch batch(2, SampleValueKind::kProbabilities, SampleDtype::kFloat32, true);
  const std::vector<float> q = {0.5f, 0.5f};
  const std::vector<float> p = {0.25f, 0.25f};
  for (int32_t i = 0; i < 400; ++i) batch.Add({p, p}, {q}, {i % 2}, Seq(21, i));
  const ReferenceRun r = RunReference(batch.input());
  ASSERT_THAT(r.outcome, IsOk());
  int32_t rejected = 0;
  for (int32_t i = 0; i < 400; ++i) {
    if (r.out.accepted_lengths[i] == 0) {
      ++rejected;
      EXPECT_THAT(r.out.next_tokens[i], ::testing::AnyOf(0, 1));
    }
  }
  EXPECT_NEAR(rejected, 200, 5 * 10);
}

TEST(RejectionReferenceTest, GreedyTemperatureZeroMatchesArgmax) {
  ExplicitBatch batch(5, SampleValueKind::kLogits, SampleDtype::kFloat32, true);
  const std::vector<float> z0 = {0.0f, 3.0f, 1.0f, 3.0f, -1.0f};  // argmax 1 (lowest of the tie)
  const std::vector<float> z1 = {4.0f, 0.0f, 0.0f, 0.0f, 0.0f};   // argmax 0
  const std::vector<float> z2 = {0.0f, 0.0f, 0.0f, 0.0f, 9.0f};   // argmax 4
  SequenceSamplingParams greedy = Seq(1, 0);
  greedy.temperature = 0.0f;
  batch.Add({z0, z1, z2}, {z2, z2}, {1, 0}, greedy);  // all accepted: bonus argmax(z2)
  greedy.sequence_index = 1;
  batch.Add({z0, z1, z2}, {z2, z2}, {1, 2}, greedy);  // rejected at 1: argmax(z1)
  greedy.sequence_index = 2;
  batch.Add({z0, z1, z2}, {z2, z2}, {3, 0}, greedy);  // tie loser rejected at 0
  const ReferenceRun r = RunReference(batch.input());
  ASSERT_THAT(r.outcome, IsOk());
  EXPECT_EQ(r.out.accepted_lengths[0], 2);
  EXPECT_EQ(r.out.next_tokens[0], 4);
  EXPECT_EQ(r.out.accepted_lengths[1], 1);
  EXPECT_EQ(r.out.next_tokens[1], 0);
  EXPECT_EQ(r.out.accepted_lengths[2], 0);
  EXPECT_EQ(r.out.next_tokens[2], 1);
}

TEST(RejectionReferenceTest, TopKNeverEmitsTokensOutsideTheKept) {
  ExplicitBatch batch(6, SampleValueKind::kLogits, SampleDtype::kFloat32, false);
  const std::vector<float> z = {1.0f, 2.0f, 3.0f, 0.5f, 2.5f, 0.0f};  // top-2: tokens 2, 4
  SequenceSamplingParams s = Seq(4, 0);
  s.top_k = 2;
  for (int32_t i = 0; i < 300; ++i) {
    s.sequence_index = i;
    batch.Add({z, z}, {}, {i % 6}, s);
  }
  const ReferenceRun r = RunReference(batch.input());
  ASSERT_THAT(r.outcome, IsOk());
  for (int32_t i = 0; i < 300; ++i) {
    if (i % 6 != 2 && i % 6 != 4) {
      EXPECT_EQ(r.out.accepted_lengths[i], 0) << i;
    }
    EXPECT_THAT(r.out.next_tokens[i], ::testing::AnyOf(2, 4)) << i;
  }
}

TEST(RejectionReferenceTest, TopPKeepsTheSmallestSetReachingTheMass) {
  // softmax of log(0.5, 0.3, 0.15, 0.05): top_p 0.75 keeps {0, 1} (0.5 < 0.75,
  // 0.8 >= 0.75 stops before token 2).
  ExplicitBatch batch(4, SampleValueKind::kLogits, SampleDtype::kFloat32, false);
  const std::vector<float> z = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SequenceSamplingParams s = Seq(8, 0);
  s.top_p = 0.75f;
  for (int32_t i = 0; i < 300; ++i) {
    s.sequence_index = i;
    batch.Add({z, z}, {}, {2 + i % 2}, s);
  }
  const ReferenceRun r = RunReference(batch.input());
  ASSERT_THAT(r.outcome, IsOk());
  for (int32_t i = 0; i < 300; ++i) {
    EXPECT_EQ(r.out.accepted_lengths[i], 0);
    EXPECT_THAT(r.out.next_tokens[i], ::testing::AnyOf(0, 1));
  }
}

// The top-p boundary is exact: with weights 1, 1/2, 1/2 (top-p units 2^40,
// 2^39, 2^39) and top_p = 1/2 the mass above the halves equals the budget,
// so they are dropped (strictly less is kept); a hair more keeps them.
TEST(RejectionReferenceTest, TopPMassExactlyAtTheBudgetDropsTheNextValue) {
  float half = -0.69f;  // the logit whose weight is exactly 1/2 (T = 1, max 0)
  while (rejection::LogitWeight(half, 0.0f, 1.0f) > 0.5f) half = std::nextafter(half, -1.0f);
  while (rejection::LogitWeight(half, 0.0f, 1.0f) < 0.5f) half = std::nextafter(half, 0.0f);
  ASSERT_EQ(rejection::LogitWeight(half, 0.0f, 1.0f), 0.5f);
  const std::vector<float> z = {0.0f, half, half};
  for (const float top_p : {0.5f, std::nextafter(0.5f, 1.0f)}) {
    ExplicitBatch batch(3, SampleValueKind::kLogits, SampleDtype::kFloat32, false);
    SequenceSamplingParams s = Seq(21, 0);
    s.top_p = top_p;
    for (int32_t i = 0; i < 200; ++i) {
      s.sequence_index = i;
      batch.Add({z, z}, {}, {1 + i % 2}, s);
    }
    const ReferenceRun r = RunReference(batch.input());
    ASSERT_THAT(r.outcome, IsOk());
    int32_t halves = 0;
    for (int32_t i = 0; i < 200; ++i) halves += r.out.next_tokens[i] != 0;
    if (top_p == 0.5f) {
      EXPECT_EQ(halves, 0) << "top_p 0.5 keeps token 0 alone";
    } else {
      EXPECT_GT(halves, 50) << "top_p just above 0.5 keeps all three (the halves weigh 1/2)";
    }
  }
}

TEST(RejectionReferenceTest, OutcomeDoesNotDependOnBatchComposition) {
  SamplingWorkloadOptions o;
  o.num_sequences = 12;
  o.vocab_size = 300;
  o.gamma_min = 1;
  o.gamma_max = 6;
  o.shape = DistributionShape::kMixed;
  o.sequences_per_request = 3;
  auto w = GenerateSamplingWorkload(o);
  ASSERT_TRUE(w.ok());
  const ReferenceRun full = RunReference(w->input());
  ASSERT_THAT(full.outcome, IsOk());
  // The same sequences alone (a batch of one each) give the same results.
  for (int32_t i = 0; i < o.num_sequences; ++i) {
    RejectionBatchInput one = w->input();
    const int32_t first = w->draft_offsets[i];
    const int32_t offsets[2] = {0, w->gamma(i)};
    one.num_sequences = 1;
    one.total_draft_tokens = w->gamma(i);
    one.draft_offsets = offsets;
    one.draft_tokens = w->draft_tokens.data() + first;
    one.target_values = w->target_values.data() + (static_cast<int64_t>(first) + i) * o.vocab_size * 4;
    one.draft_values = w->draft_values.data() + static_cast<int64_t>(first) * o.vocab_size * 4;
    one.sequences = w->sequences.data() + i;
    const ReferenceRun single = RunReference(one);
    ASSERT_THAT(single.outcome, IsOk());
    EXPECT_EQ(single.out.accepted_lengths[0], full.out.accepted_lengths[i]) << "sequence " << i;
    EXPECT_EQ(single.out.next_tokens[0], full.out.next_tokens[i]) << "sequence " << i;
  }
}

TEST(RejectionReferenceTest, EveryDtypeAndKindRunsOnTheWorkloadShapes) {
  for (SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kFloat16, SampleDtype::kBFloat16}) {
    for (SampleValueKind kind : {SampleValueKind::kProbabilities, SampleValueKind::kLogits}) {
      for (bool draft : {true, false}) {
        SamplingWorkloadOptions o;
        o.num_sequences = 8;
        o.vocab_size = 5000;
        o.gamma_min = 1;
        o.gamma_max = 8;
        o.dtype = dtype;
        o.kind = kind;
        o.has_draft_probs = draft;
        o.shape = DistributionShape::kMixed;
        o.seed = 77;
        auto w = GenerateSamplingWorkload(o);
        ASSERT_TRUE(w.ok());
        const ReferenceRun r = RunReference(w->input());
        ASSERT_THAT(r.validation, IsOk());
        ASSERT_THAT(r.outcome, IsOk());
        for (int32_t i = 0; i < o.num_sequences; ++i) {
          EXPECT_GE(r.out.accepted_lengths[i], 0);
          EXPECT_LE(r.out.accepted_lengths[i], w->gamma(i));
          EXPECT_GE(r.out.next_tokens[i], 0);
          EXPECT_LT(r.out.next_tokens[i], o.vocab_size);
          EXPECT_EQ(r.out.mismatch[i], r.out.accepted_lengths[i] < w->gamma(i) ? 1 : 0);
        }
      }
    }
  }
}

TEST(RejectionReferenceTest, GreedyTargetTokensLetTheGreedyPackPackTheAcceptedRows) {
  // The sampled batch's outcome, replayed through the greedy verify-and-pack
  // reference with the synthetic target tokens, gives the same accepted
  // lengths and packs exactly the accepted KV rows.
  SamplingWorkloadOptions o;
  o.num_sequences = 40;
  o.vocab_size = 50;
  o.gamma_min = 1;
  o.gamma_max = 9;
  o.shape = DistributionShape::kMixed;
  o.draft_noise = 2.0f;
  o.seed = 606;
  auto w = GenerateSamplingWorkload(o);
  ASSERT_TRUE(w.ok());
  RejectionBatchInput in = w->input();
  // One bad sequence: its lengths must come out 0 in the pack too.
  std::vector<std::byte> target = w->target_values;
  const float nan = kNaN;
  std::memcpy(target.data() + (static_cast<int64_t>(w->draft_offsets[3]) + 3) * o.vocab_size * 4 +
                  4 * w->draft_tokens[w->draft_offsets[3]],
              &nan, 4);
  in.target_values = target.data();
  RejectionHostOutputs out(in.num_sequences, 0xAB);
  std::vector<int32_t> greedy_targets(w->total_target_rows(), -7);
  RejectionBatchOutput view = out.view();
  view.greedy_target_tokens = greedy_targets.data();
  ReferenceRejectionSample(RejectionSampleParams{in, view});
  ASSERT_EQ(out.status_codes[3], kRejectionBadTargetValue);

  constexpr int64_t kRowBytes = 8;
  std::vector<std::byte> kv(w->total_draft_rows() * kRowBytes);
  for (size_t b = 0; b < kv.size(); ++b) kv[b] = static_cast<std::byte>(b * 7 + 1);
  GreedyVerifyParams greedy;
  greedy.input = GreedyBatchInput{in.num_sequences, w->draft_offsets.data(), w->draft_tokens.data(),
                                  greedy_targets.data(), kv.data(), kRowBytes};
  std::vector<int32_t> k(in.num_sequences), next(in.num_sequences), offsets(in.num_sequences + 1);
  std::vector<uint8_t> mismatch(in.num_sequences);
  std::vector<std::byte> packed(kv.size());
  greedy.output = GreedyBatchOutput{k.data(), next.data(), mismatch.data(), offsets.data(), packed.data()};
  ASSERT_THAT(ValidateGreedyBatch(greedy, LayoutLimits{kMaxBatchSequences, kMaxDraftTokens, o.vocab_size}), IsOk());
  ReferenceGreedyVerifyPack(greedy);
  int64_t row = 0;
  for (int32_t i = 0; i < in.num_sequences; ++i) {
    EXPECT_EQ(k[i], out.accepted_lengths[i]) << "sequence " << i;
    EXPECT_EQ(mismatch[i], out.mismatch[i]) << "sequence " << i;
    for (int32_t j = 0; j < k[i]; ++j, ++row) {
      EXPECT_EQ(std::memcmp(packed.data() + row * kRowBytes,
                            kv.data() + (static_cast<int64_t>(w->draft_offsets[i]) + j) * kRowBytes, kRowBytes),
                0);
    }
  }
  EXPECT_EQ(offsets[in.num_sequences], row);
}

// ------------------------------------------------------- bad inputs --

TEST(RejectionValidateTest, DraftTokenOutOfRangeNamesSequenceAndPosition) {
  ExplicitBatch batch(4, SampleValueKind::kProbabilities, SampleDtype::kFloat32, false);
  const std::vector<float> p = {0.25f, 0.25f, 0.25f, 0.25f};
  batch.Add({p, p}, {}, {1}, Seq(1, 0));
  batch.Add({p, p, p}, {}, {0, 4}, Seq(1, 1));
  const ReferenceRun r = RunReference(batch.input());
  EXPECT_THAT(r.validation, StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("sequence 1: draft_tokens[1] is 4, outside [0, 4)")));
}

TEST(RejectionValidateTest, BadSamplingParametersAreRejected) {
  ExplicitBatch batch(4, SampleValueKind::kProbabilities, SampleDtype::kFloat32, false);
  const std::vector<float> p = {0.25f, 0.25f, 0.25f, 0.25f};
  SequenceSamplingParams s = Seq(1, 0);
  s.top_k = 2;  // probabilities: the caller applies top-k
  batch.Add({p, p}, {}, {1}, s);
  EXPECT_THAT(RunReference(batch.input()).validation,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 0: sampling parameters")));

  ExplicitBatch logits(4, SampleValueKind::kLogits, SampleDtype::kFloat32, false);
  SequenceSamplingParams t = Seq(1, 0);
  t.temperature = -1.0f;
  logits.Add({p, p}, {}, {1}, t);
  EXPECT_THAT(RunReference(logits.input()).validation,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("temperature -1")));
  ExplicitBatch top_p_zero(4, SampleValueKind::kLogits, SampleDtype::kFloat32, false);
  SequenceSamplingParams u = Seq(1, 0);
  u.top_p = 0.0f;  // the proto's "0 = all" is mapped to 1 by the server before this layer
  top_p_zero.Add({p, p}, {}, {1}, u);
  EXPECT_THAT(RunReference(top_p_zero.input()).validation,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top_p 0")));
}

TEST(RejectionValidateTest, SigmoidRequiresLogitsAndOrderedConstants) {
  ExplicitBatch batch(4, SampleValueKind::kProbabilities, SampleDtype::kFloat32, false);
  const std::vector<float> p = {0.25f, 0.25f, 0.25f, 0.25f};
  batch.Add({p, p}, {}, {1}, Seq(1, 0));
  EXPECT_THAT(RunReference(batch.input(SampleMethod::kSigmoid)).validation,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("requires LOGITS")));
  ExplicitBatch logits(4, SampleValueKind::kLogits, SampleDtype::kFloat32, false);
  logits.Add({p, p}, {}, {1}, Seq(1, 0));
  RejectionBatchInput in = logits.input(SampleMethod::kSigmoid);
  in.sigmoid_alpha = 5.0f;
  in.sigmoid_beta = 1.0f;
  RejectionHostOutputs out(1, 0);
  EXPECT_THAT(ValidateRejectionBatch(RejectionSampleParams{in, out.view()}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sigmoid_alpha")));
}

TEST(RejectionOutcomeTest, NaNInADraftedTargetProbabilityIsInvalidArgument) {
  ExplicitBatch batch(4, SampleValueKind::kProbabilities, SampleDtype::kFloat32, true);
  const std::vector<float> p = {0.25f, 0.25f, 0.25f, 0.25f};
  std::vector<float> bad = p;
  bad[2] = kNaN;
  batch.Add({p, p}, {p}, {1}, Seq(1, 0));
  batch.Add({p, p, bad, p}, {p, p, p}, {0, 1, 2}, Seq(1, 1));
  const ReferenceRun r = RunReference(batch.input());
  ASSERT_THAT(r.validation, IsOk());
  EXPECT_THAT(r.outcome, StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("sequence 1, position 2: target: target value is NaN")));
  EXPECT_EQ(r.out.status_codes[0], kRejectionOk);
  EXPECT_EQ(r.out.status_codes[1], kRejectionBadTargetValue);
  EXPECT_EQ(r.out.next_tokens[1], -1);
  EXPECT_EQ(r.out.accepted_lengths[1], 0);
}

TEST(RejectionOutcomeTest, NegativeOrInfiniteDraftProbabilityIsInvalidArgument) {
  ExplicitBatch batch(4, SampleValueKind::kProbabilities, SampleDtype::kFloat32, true);
  const std::vector<float> p = {0.25f, 0.25f, 0.25f, 0.25f};
  std::vector<float> negative = p;
  negative[1] = -0.25f;
  std::vector<float> infinite = p;
  infinite[0] = kInf;
  batch.Add({p, p}, {negative}, {1}, Seq(1, 0));
  batch.Add({p, p}, {infinite}, {0}, Seq(1, 1));
  const ReferenceRun r = RunReference(batch.input());
  EXPECT_THAT(r.outcome, StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("sequence 0, position 0: draft")));
  EXPECT_EQ(r.out.status_codes[1], kRejectionBadDraftValue);
}

TEST(RejectionOutcomeTest, InfiniteLogitAnywhereInARowIsInvalidArgument) {
  // Logits need the row normalizer, which reads every element.
  ExplicitBatch batch(4, SampleValueKind::kLogits, SampleDtype::kFloat32, false);
  const std::vector<float> z = {0.0f, 1.0f, 2.0f, 3.0f};
  std::vector<float> bad = z;
  bad[3] = -kInf;
  batch.Add({z, bad}, {}, {1}, Seq(1, 0));
  const ReferenceRun r = RunReference(batch.input());
  EXPECT_THAT(r.outcome, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 0, position 1: target")));
}

TEST(RejectionOutcomeTest, FullRowCheckCatchesWhatTheSamplerDoesNotRead) {
  ExplicitBatch batch(4, SampleValueKind::kProbabilities, SampleDtype::kFloat32, true);
  const std::vector<float> p = {0.25f, 0.25f, 0.25f, 0.25f};
  std::vector<float> bad = p;
  bad[3] = kNaN;  // in the draft row, never read: the drafted token is 0 and p == q accepts
  batch.Add({p, p}, {bad}, {0}, Seq(1, 0));
  RejectionBatchInput in = batch.input();
  const ReferenceRun lazy = RunReference(in);
  EXPECT_THAT(lazy.outcome, IsOk());
  in.validate_full_rows = true;
  const ReferenceRun full = RunReference(in);
  EXPECT_THAT(full.outcome, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 0, position 0: draft")));

  ExplicitBatch zero(4, SampleValueKind::kProbabilities, SampleDtype::kFloat32, false);
  const std::vector<float> nothing = {0.0f, 0.0f, 0.0f, 0.0f};
  zero.Add({p, nothing}, {}, {0}, Seq(1, 0));
  RejectionBatchInput zin = zero.input();
  zin.validate_full_rows = true;
  EXPECT_THAT(RunReference(zin).outcome,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("position 1: target or draft row")));
}

TEST(RejectionOutcomeTest, AllZeroRowToSampleFromIsInvalidArgument) {
  ExplicitBatch batch(3, SampleValueKind::kProbabilities, SampleDtype::kFloat32, false);
  const std::vector<float> p = {0.0f, 1.0f, 0.0f};
  const std::vector<float> nothing = {0.0f, 0.0f, 0.0f};
  batch.Add({p, nothing}, {}, {1}, Seq(1, 0));  // accepted (p = 1), bonus row empty
  const ReferenceRun r = RunReference(batch.input());
  EXPECT_THAT(r.outcome, StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("sequence 0, position 1: target: target row to sample from")));
}

}  // namespace
}  // namespace specverify

namespace specverify {
namespace {

using ::specverify::testing::IsOk;

// The CPU reference reads rows through row tables (the data plane's rows read
// in place) exactly as it reads contiguous rows: rows copied elsewhere in
// reverse order give the same outputs.
TEST(RejectionReferenceRowTablesTest, RowTablesGiveTheContiguousOutputs) {
  for (bool draft : {false, true}) {
    SamplingWorkloadOptions o;
    o.num_sequences = 11;
    o.vocab_size = 333;
    o.gamma_min = 1;
    o.gamma_max = 7;
    o.kind = SampleValueKind::kLogits;
    o.temperature = 0.7f;
    o.has_draft_probs = draft;
    o.shape = DistributionShape::kMixed;
    o.seed = draft ? 77 : 78;
    absl::StatusOr<SamplingWorkload> w = GenerateSamplingWorkload(o);
    ASSERT_TRUE(w.ok());
    const RejectionBatchInput contiguous = w->input();
    const int64_t row_bytes = contiguous.vocab_size * SampleDtypeBytes(contiguous.dtype);
    const auto scatter = [row_bytes](const void* base, int64_t rows, std::vector<std::byte>& store,
                                     std::vector<const void*>& table) {
      store.resize(static_cast<size_t>(rows * row_bytes));
      table.resize(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        std::byte* slot = store.data() + (rows - 1 - r) * row_bytes;
        std::memcpy(slot, static_cast<const std::byte*>(base) + r * row_bytes,
                    static_cast<size_t>(row_bytes));
        table[static_cast<size_t>(r)] = slot;
      }
    };
    std::vector<std::byte> target_store, draft_store;
    std::vector<const void*> target_table, draft_table;
    RejectionBatchInput tables = contiguous;
    scatter(contiguous.target_values, int64_t{contiguous.total_draft_tokens} + contiguous.num_sequences,
            target_store, target_table);
    tables.target_values = nullptr;
    tables.target_rows = target_table.data();
    if (draft) {
      scatter(contiguous.draft_values, contiguous.total_draft_tokens, draft_store, draft_table);
      tables.draft_values = nullptr;
      tables.draft_rows = draft_table.data();
    }
    RejectionHostOutputs a(contiguous.num_sequences, 0xAB), b(contiguous.num_sequences, 0xCD);
    ASSERT_THAT(ValidateRejectionBatch(RejectionSampleParams{tables, b.view()}), IsOk());
    ReferenceRejectionSample(RejectionSampleParams{contiguous, a.view()});
    ReferenceRejectionSample(RejectionSampleParams{tables, b.view()});
    EXPECT_EQ(a.accepted_lengths, b.accepted_lengths);
    EXPECT_EQ(a.next_tokens, b.next_tokens);
    EXPECT_EQ(a.status_codes, b.status_codes);
    EXPECT_EQ(a.error_positions, b.error_positions);
  }
}

}  // namespace
}  // namespace specverify

// Log-probability rows (issue #17, item 2): p = ExpDet(v), -inf is
// probability 0, NaN and +inf are invalid, no normalizer.
namespace specverify {
namespace {

using ::specverify::testing::ExplicitBatch;
using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

constexpr float kLogNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kLogInf = std::numeric_limits<float>::infinity();

// A log-probability batch decides exactly as the probability batch whose rows
// are ExpDet of its values (the conversion is the only difference), for every
// dtype of the log-probabilities, with and without draft rows.
TEST(LogProbabilityReferenceTest, SameOutcomeAsProbabilitiesOfExpDet) {
  for (SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kFloat16, SampleDtype::kBFloat16}) {
    for (bool draft : {true, false}) {
      SamplingWorkloadOptions o;
      o.num_sequences = 24;
      o.vocab_size = 3001;
      o.gamma_min = 1;
      o.gamma_max = 6;
      o.dtype = dtype;
      o.kind = SampleValueKind::kLogProbabilities;
      o.has_draft_probs = draft;
      o.shape = DistributionShape::kMixed;
      o.seed = 1234;
      auto w = GenerateSamplingWorkload(o);
      ASSERT_TRUE(w.ok()) << w.status();
      const ReferenceRun logs = RunReference(w->input());
      ASSERT_THAT(logs.validation, IsOk());
      ASSERT_THAT(logs.outcome, IsOk());

      // The same rows as fp32 probabilities ExpDet(v).
      const auto to_probabilities = [&](const std::vector<std::byte>& bytes) {
        const int64_t n = static_cast<int64_t>(bytes.size()) / SampleDtypeBytes(dtype);
        std::vector<float> p(n);
        for (int64_t x = 0; x < n; ++x) p[x] = detmath::ExpDet(rejection::LoadValue(bytes.data(), dtype, x));
        std::vector<std::byte> out;
        AppendAsDtype(p.data(), n, SampleDtype::kFloat32, out);
        return out;
      };
      const std::vector<std::byte> target = to_probabilities(w->target_values);
      const std::vector<std::byte> draft_rows = to_probabilities(w->draft_values);
      RejectionBatchInput in = w->input();
      in.kind = SampleValueKind::kProbabilities;
      in.dtype = SampleDtype::kFloat32;
      in.target_values = target.data();
      in.draft_values = draft ? draft_rows.data() : nullptr;
      const ReferenceRun probs = RunReference(in);
      ASSERT_THAT(probs.outcome, IsOk());
      int32_t rejected = 0;
      for (int32_t i = 0; i < o.num_sequences; ++i) {
        SCOPED_TRACE(::testing::Message() << "dtype " << static_cast<int>(dtype) << " draft " << draft
                                          << " sequence " << i);
        EXPECT_EQ(logs.out.accepted_lengths[i], probs.out.accepted_lengths[i]);
        EXPECT_EQ(logs.out.next_tokens[i], probs.out.next_tokens[i]);
        EXPECT_EQ(logs.out.mismatch[i], probs.out.mismatch[i]);
        rejected += logs.out.mismatch[i];
      }
      // Both outcomes occur, so the comparison covers the residual and the
      // bonus races (with draft rows: the identical-shape sequences accept
      // everything; a one-hot drafter rarely gets all of gamma accepted).
      EXPECT_GT(rejected, 0);
      if (draft) {
        EXPECT_LT(rejected, o.num_sequences);
      }
    }
  }
}

TEST(LogProbabilityReferenceTest, MinusInfinityIsProbabilityZeroAndNeverEmitted) {
  const float ninf = -kLogInf;
  // Token 2 has target probability 0; the drafter proposes it half the time.
  const std::vector<float> p = {std::log(0.5f), std::log(0.5f), ninf, ninf};
  const std::vector<float> q = {std::log(0.25f), std::log(0.25f), std::log(0.5f), ninf};
  for (bool draft : {true, false}) {
    ExplicitBatch batch(4, SampleValueKind::kLogProbabilities, SampleDtype::kFloat32, draft);
    for (int32_t i = 0; i < 400; ++i) batch.Add({p, p}, {q}, {i % 2 == 0 ? 2 : i % 4 == 1 ? 0 : 1}, Seq(3, i));
    const ReferenceRun r = RunReference(batch.input());
    ASSERT_THAT(r.validation, IsOk());
    ASSERT_THAT(r.outcome, IsOk());
    for (int32_t i = 0; i < 400; ++i) {
      if (i % 2 == 0) {
        EXPECT_EQ(r.out.accepted_lengths[i], 0) << "a zero-probability draft was accepted, " << i;
      }
      EXPECT_THAT(r.out.next_tokens[i], ::testing::AnyOf(0, 1)) << "sequence " << i;
    }
  }
}

TEST(LogProbabilityReferenceTest, NaNOrPlusInfinityReadIsInvalidArgument) {
  const std::vector<float> lp = {std::log(0.25f), std::log(0.25f), std::log(0.25f), std::log(0.25f)};
  std::vector<float> nan_at_2 = lp;
  nan_at_2[2] = kLogNaN;
  std::vector<float> inf_at_1 = lp;
  inf_at_1[1] = kLogInf;
  ExplicitBatch batch(4, SampleValueKind::kLogProbabilities, SampleDtype::kFloat32, true);
  batch.Add({lp, lp}, {lp}, {1}, Seq(1, 0));                            // fine
  batch.Add({lp, lp, nan_at_2, lp}, {lp, lp, lp}, {0, 1, 2}, Seq(1, 1));  // drafted target value NaN
  batch.Add({lp, lp}, {inf_at_1}, {1}, Seq(1, 2));                      // drafted draft value +inf
  const ReferenceRun r = RunReference(batch.input());
  ASSERT_THAT(r.validation, IsOk());
  EXPECT_THAT(r.outcome, StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("sequence 1, position 2: target: target value is NaN")));
  EXPECT_EQ(r.out.status_codes[0], kRejectionOk);
  EXPECT_EQ(r.out.status_codes[1], kRejectionBadTargetValue);
  EXPECT_EQ(r.out.error_positions[1], 2);
  EXPECT_EQ(r.out.status_codes[2], kRejectionBadDraftValue);
  EXPECT_EQ(r.out.error_positions[2], 0);
  EXPECT_EQ(r.out.next_tokens[2], -1);

  // +inf in the sampled (bonus) row: read by the race, so refused; an
  // identical distribution accepts x_0 and samples row 1.
  ExplicitBatch bonus(4, SampleValueKind::kLogProbabilities, SampleDtype::kFloat32, true);
  bonus.Add({lp, inf_at_1}, {lp}, {0}, Seq(1, 0));
  const ReferenceRun b = RunReference(bonus.input());
  EXPECT_THAT(b.outcome, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 0, position 1: target")));
}

TEST(LogProbabilityReferenceTest, FullRowCheckCatchesUnreadValuesAndEmptyRows) {
  const std::vector<float> lp = {std::log(0.25f), std::log(0.25f), std::log(0.25f), std::log(0.25f)};
  std::vector<float> bad = lp;
  bad[3] = kLogNaN;  // in the draft row, never read: the drafted token is 0 and p == q accepts
  ExplicitBatch batch(4, SampleValueKind::kLogProbabilities, SampleDtype::kFloat32, true);
  batch.Add({lp, lp}, {bad}, {0}, Seq(1, 0));
  RejectionBatchInput in = batch.input();
  EXPECT_THAT(RunReference(in).outcome, IsOk());
  in.validate_full_rows = true;
  EXPECT_THAT(RunReference(in).outcome,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 0, position 0: draft")));

  // A row of -inf only has no mass: the full-row check names it; without
  // it, sampling from it is an empty row.
  const float ninf = -kLogInf;
  const std::vector<float> nothing = {ninf, ninf, ninf, ninf};
  ExplicitBatch zero(4, SampleValueKind::kLogProbabilities, SampleDtype::kFloat32, false);
  zero.Add({lp, nothing}, {}, {0}, Seq(1, 0));
  RejectionBatchInput zin = zero.input();
  zin.validate_full_rows = true;
  EXPECT_THAT(RunReference(zin).outcome,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("position 1: target or draft row")));
}

TEST(LogProbabilityReferenceTest, TopKTopPMustBeNeutralAndTemperatureIsIgnored) {
  const std::vector<float> lp = {std::log(0.5f), std::log(0.5f)};
  ExplicitBatch batch(2, SampleValueKind::kLogProbabilities, SampleDtype::kFloat32, false);
  SequenceSamplingParams s = Seq(1, 0);
  s.temperature = 0.0f;  // ignored: no greedy for log-probabilities
  batch.Add({lp, lp}, {}, {0}, s);
  EXPECT_THAT(RunReference(batch.input()).outcome, IsOk());
  ExplicitBatch filtered(2, SampleValueKind::kLogProbabilities, SampleDtype::kFloat32, false);
  s.top_k = 1;
  filtered.Add({lp, lp}, {}, {0}, s);
  EXPECT_THAT(RunReference(filtered.input()).validation,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("log-probabilities take top_k 0 and top_p 1")));
}

}  // namespace
}  // namespace specverify
