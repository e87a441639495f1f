// The sampled-workload generator: reproducible from its seed, prefix-stable,
// shapes as documented, draft tokens drawn from the drafter's support, every
// dtype and kind, option checks, and the reference oracle.
#include "kernels/workload/sampling_workload.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/sampling/det_math.h"
#include "kernels/sampling/rejection_validate.h"
#include "tests/testing/status_matchers.h"

namespace specverify {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

SamplingWorkloadOptions Small() {
  SamplingWorkloadOptions o;
  o.num_sequences = 6;
  o.vocab_size = 300;
  o.gamma_min = 1;
  o.gamma_max = 5;
  o.shape = DistributionShape::kMixed;
  o.seed = 99;
  return o;
}

// Issue #15 (UBSan): outputs for zero sequences are empty vectors whose
// data() is null; the poison fill must not pass them to memset. Fails under
// -fsanitize=undefined before the guard.
TEST(SamplingWorkloadTest, HostOutputsForZeroSequencesAreEmpty) {
  RejectionHostOutputs none(0, 0xCD);
  EXPECT_TRUE(none.accepted_lengths.empty());
  EXPECT_TRUE(none.error_positions.empty());
  RejectionHostOutputs two(2, 0xCD);
  ASSERT_EQ(two.mismatch.size(), 2u);
  EXPECT_EQ(two.mismatch[1], 0xCD);
  EXPECT_EQ(static_cast<uint32_t>(two.status_codes[0]), 0xCDCDCDCDu);
}

TEST(SamplingWorkloadTest, SameSeedSameBytesAndPrefixStable) {
  auto a = GenerateSamplingWorkload(Small());
  auto b = GenerateSamplingWorkload(Small());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->target_values, b->target_values);
  EXPECT_EQ(a->draft_values, b->draft_values);
  EXPECT_EQ(a->draft_tokens, b->draft_tokens);
  SamplingWorkloadOptions more = Small();
  more.num_sequences = 9;
  auto c = GenerateSamplingWorkload(more);
  ASSERT_TRUE(c.ok());
  for (int32_t i = 0; i < 6; ++i) EXPECT_EQ(c->gamma(i), a->gamma(i));
  EXPECT_TRUE(std::equal(a->target_values.begin(), a->target_values.end(), c->target_values.begin()));
  SamplingWorkloadOptions other = Small();
  other.seed = 100;
  EXPECT_NE(GenerateSamplingWorkload(other)->target_values, a->target_values);
}

TEST(SamplingWorkloadTest, DisjointShapeSeparatesSupportsAndTokensComeFromTheDraft) {
  SamplingWorkloadOptions o = Small();
  o.shape = DistributionShape::kDisjoint;
  auto w = GenerateSamplingWorkload(o);
  ASSERT_TRUE(w.ok());
  const auto* target = reinterpret_cast<const float*>(w->target_values.data());
  const auto* draft = reinterpret_cast<const float*>(w->draft_values.data());
  const int32_t v = o.vocab_size;
  for (int64_t r = 0; r < w->total_target_rows(); ++r) {
    for (int32_t x = v / 2; x < v; ++x) ASSERT_EQ(target[r * v + x], 0.0f);
  }
  for (int64_t r = 0; r < w->total_draft_rows(); ++r) {
    for (int32_t x = 0; x < v / 2; ++x) ASSERT_EQ(draft[r * v + x], 0.0f);
    const int32_t token = w->draft_tokens[r];
    EXPECT_GT(draft[r * v + token], 0.0f) << "draft token outside the drafter's support";
  }
}

TEST(SamplingWorkloadTest, EveryDtypeKindAndDraftOptionValidates) {
  for (SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kFloat16, SampleDtype::kBFloat16}) {
    for (SampleValueKind kind :
         {SampleValueKind::kProbabilities, SampleValueKind::kLogits, SampleValueKind::kLogProbabilities}) {
      for (bool draft : {true, false}) {
        SamplingWorkloadOptions o = Small();
        o.dtype = dtype;
        o.kind = kind;
        o.has_draft_probs = draft;
        o.sequences_per_request = 4;
        if (kind == SampleValueKind::kLogits) {
          o.temperature = 0.7f;
          o.top_k = 20;
          o.top_p = 0.95f;
        }
        auto w = GenerateSamplingWorkload(o);
        ASSERT_TRUE(w.ok());
        const int64_t bytes = SampleDtypeBytes(dtype) * o.vocab_size;
        EXPECT_EQ(static_cast<int64_t>(w->target_values.size()), w->total_target_rows() * bytes);
        EXPECT_EQ(static_cast<int64_t>(w->draft_values.size()), draft ? w->total_draft_rows() * bytes : 0);
        EXPECT_EQ(w->request_of(5), 1);
        EXPECT_EQ(w->sequences[5].sequence_index, 1);
        EXPECT_EQ(w->sequences[4].seed, w->sequences[5].seed);
        EXPECT_NE(w->sequences[3].seed, w->sequences[4].seed);
        RejectionHostOutputs out = ReferenceOutcome(*w);
        EXPECT_THAT(ValidateRejectionBatch(RejectionSampleParams{w->input(), out.view()}), IsOk());
        EXPECT_THAT(RejectionOutcomeStatus(out.status_codes.data(), out.error_positions.data(), o.num_sequences),
                    IsOk());
      }
    }
  }
}

// Log-probability rows are the logs of the probability rows of the same
// options: exp(lp) matches p to float rounding, -inf exactly where p is 0
// (the disjoint shape's off-support half), and the draft tokens are the same.
TEST(SamplingWorkloadTest, LogProbabilityRowsAreLogsOfTheProbabilityRows) {
  SamplingWorkloadOptions o = Small();
  o.shape = DistributionShape::kMixed;  // includes disjoint supports: zeros
  auto probs = GenerateSamplingWorkload(o);
  o.kind = SampleValueKind::kLogProbabilities;
  auto logs = GenerateSamplingWorkload(o);
  ASSERT_TRUE(probs.ok() && logs.ok());
  EXPECT_EQ(probs->draft_tokens, logs->draft_tokens);
  ASSERT_EQ(probs->target_values.size(), logs->target_values.size());
  ASSERT_EQ(probs->draft_values.size(), logs->draft_values.size());
  int64_t zeros = 0;
  const auto compare = [&zeros](const std::vector<std::byte>& p_bytes, const std::vector<std::byte>& lp_bytes) {
    const auto* p = reinterpret_cast<const float*>(p_bytes.data());
    const auto* lp = reinterpret_cast<const float*>(lp_bytes.data());
    for (size_t x = 0; x < p_bytes.size() / 4; ++x) {
      if (p[x] == 0.0f) {
        ++zeros;
        ASSERT_EQ(lp[x], -std::numeric_limits<float>::infinity()) << "element " << x;
      } else {
        ASSERT_LE(lp[x], 1e-6f) << "element " << x;
        ASSERT_NEAR(std::exp(static_cast<double>(lp[x])), p[x], 1e-5 * p[x] + 1e-30) << "element " << x;
      }
    }
  };
  compare(probs->target_values, logs->target_values);
  compare(probs->draft_values, logs->draft_values);
  EXPECT_GT(zeros, 0);
}

// caller_top_k: every stored row keeps its distribution's k most likely
// tokens, renormalized (probability 0, log-probability -inf elsewhere), the
// draft tokens come from the filtered q, and the batch still validates.
TEST(SamplingWorkloadTest, CallerFilteredRowsKeepTheirTopKRenormalized) {
  constexpr int32_t kTopK = 7;
  for (SampleValueKind kind : {SampleValueKind::kProbabilities, SampleValueKind::kLogProbabilities}) {
    SamplingWorkloadOptions o = Small();
    o.kind = kind;
    o.caller_top_k = kTopK;
    auto w = GenerateSamplingWorkload(o);
    ASSERT_THAT(w, IsOk());
    const bool log_probs = kind == SampleValueKind::kLogProbabilities;
    const int32_t v = o.vocab_size;
    const auto check_rows = [&](const std::vector<std::byte>& bytes, const char* which) {
      const auto* values = reinterpret_cast<const float*>(bytes.data());
      for (size_t row = 0; row < bytes.size() / 4 / v; ++row) {
        int32_t kept = 0;
        double mass = 0.0;
        for (int32_t x = 0; x < v; ++x) {
          const float value = values[row * v + x];
          const double p = log_probs ? std::exp(static_cast<double>(value)) : value;
          if (p > 0.0) ++kept;
          mass += p;
        }
        // Normal noise: no ties at the cut, so exactly k (a disjoint row's
        // half off support is below the cut too).
        EXPECT_EQ(kept, kTopK) << which << " row " << row;
        EXPECT_NEAR(mass, 1.0, 1e-5) << which << " row " << row;
      }
    };
    check_rows(w->target_values, "target");
    check_rows(w->draft_values, "draft");
    const auto* q = reinterpret_cast<const float*>(w->draft_values.data());
    for (size_t j = 0; j < w->draft_tokens.size(); ++j) {
      const float value = q[j * v + w->draft_tokens[j]];
      EXPECT_GT(log_probs ? std::exp(static_cast<double>(value)) : value, 0.0) << "draft token " << j;
    }
    RejectionHostOutputs out(o.num_sequences, 0);
    EXPECT_THAT(ValidateRejectionBatch(RejectionSampleParams{w->input(), out.view()}), IsOk());
  }
}

TEST(SamplingWorkloadTest, BadOptionsAreInvalidArgument) {
  SamplingWorkloadOptions o = Small();
  o.gamma_min = 0;
  EXPECT_THAT(GenerateSamplingWorkload(o).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gamma")));
  o = Small();
  o.vocab_size = 1;
  EXPECT_THAT(GenerateSamplingWorkload(o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vocab_size")));
  o = Small();
  o.top_p = 0.0f;
  EXPECT_THAT(GenerateSamplingWorkload(o).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top_p")));
  o = Small();
  o.kind = SampleValueKind::kLogits;
  o.caller_top_k = 5;
  EXPECT_THAT(GenerateSamplingWorkload(o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("caller_top_k is 5; must be >= 0, and 0 for logits")));
}

}  // namespace
}  // namespace specverify
