// The sampled request builder and checker: requests carry exactly the
// workload's rows, seeds and parameters, and the checker accepts the
// reference's answer and rejects every kind of wrong one.
#include <cstring>
#include <string>

#include "client/sampled_requests.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/workload/sampling_workload.h"
#include "tests/testing/status_matchers.h"

namespace specverify::client {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

SamplingWorkload MakeWorkload(bool draft_probs) {
  SamplingWorkloadOptions o;
  o.num_sequences = 8;
  o.gamma_min = 2;
  o.gamma_max = 5;
  o.vocab_size = 300;
  o.dtype = SampleDtype::kBFloat16;
  o.kind = SampleValueKind::kLogits;
  o.has_draft_probs = draft_probs;
  o.temperature = 0.7f;
  o.top_k = 20;
  o.sequences_per_request = 3;
  o.seed = 12;
  return *GenerateSamplingWorkload(o);
}

// What a correct server answers for request r (inline KV).
v1::VerifyResponse ReferenceResponse(const SamplingWorkload& w, int32_t r,
                                     const SampledRequestSettings& settings,
                                     const RejectionHostOutputs& e) {
  v1::VerifyResponse resp;
  resp.set_verified(true);
  resp.set_exact(settings.method == SampleMethod::kExact);
  int64_t row = 0;
  for (int32_t i = 3 * r; i < std::min(3 * r + 3, w.num_sequences()); ++i) {
    v1::SequenceResult* out = resp.add_results();
    out->set_accepted_length(e.accepted_lengths[i]);
    out->set_next_token(e.next_tokens[i]);
    out->set_mismatch(e.mismatch[i] != 0);
    out->set_kv_row_offset(row);
    out->set_kv_row_count(e.accepted_lengths[i]);
    for (int32_t j = 0; j < e.accepted_lengths[i]; ++j) {
      for (int64_t k = 0; k < settings.kv_row_bytes; ++k) {
        resp.mutable_kv_inline()->push_back(static_cast<char>(SyntheticKvByte(i, j, k)));
      }
    }
    row += e.accepted_lengths[i];
  }
  return resp;
}

TEST(SampledRequestsTest, EveryRowKindHasItsWireKind) {
  EXPECT_EQ(ToProtoKind(SampleValueKind::kProbabilities), v1::DISTRIBUTION_KIND_PROBABILITIES);
  EXPECT_EQ(ToProtoKind(SampleValueKind::kLogits), v1::DISTRIBUTION_KIND_LOGITS);
  EXPECT_EQ(ToProtoKind(SampleValueKind::kLogProbabilities), v1::DISTRIBUTION_KIND_LOG_PROBABILITIES);
}

TEST(SampledRequestsTest, RequestsCarryTheWorkloadsRowsSeedsAndParameters) {
  const SamplingWorkload w = MakeWorkload(true);
  EXPECT_EQ(SampledRequestCount(w), 3);  // 3 + 3 + 2 sequences
  SampledRequestSettings settings;
  settings.kv_row_bytes = 16;
  const v1::VerifyRequest req = *BuildSampledRequest(w, 2, settings, "r2");
  EXPECT_EQ(req.request_id(), "r2");
  EXPECT_EQ(req.seed(), w.sequences[6].seed);
  ASSERT_EQ(req.sequences_size(), 2);
  const v1::SequenceDraft& s = req.sequences(1);  // workload sequence 7
  EXPECT_EQ(s.draft_tokens_size(), w.gamma(7));
  EXPECT_EQ(s.sampled().target().values().shape(0), w.gamma(7) + 1);
  EXPECT_EQ(s.sampled().target().values().shape(1), 300);
  EXPECT_EQ(s.sampled().target().values().dtype(), v1::DATA_TYPE_BFLOAT16);
  EXPECT_EQ(s.sampled().target().kind(), v1::DISTRIBUTION_KIND_LOGITS);
  EXPECT_EQ(0, std::memcmp(s.sampled().target().values().data().data(),
                           w.target_values.data() + (w.draft_offsets[7] + 7) * 300 * 2,
                           (w.gamma(7) + 1) * 300 * 2));
  EXPECT_EQ(s.sampled().draft().values().shape(0), w.gamma(7));
  EXPECT_FLOAT_EQ(s.sampled().temperature(), 0.7f);
  EXPECT_EQ(s.sampled().top_k(), 20);
  EXPECT_EQ(s.draft_kv().data().size(), static_cast<size_t>(w.gamma(7) * 16));
  EXPECT_FALSE(MakeWorkload(false).draft_values.size() > 0);
  EXPECT_FALSE(BuildSampledRequest(MakeWorkload(false), 0, {})->sequences(0).sampled().has_draft());
  EXPECT_THAT(BuildSampledRequest(w, 3, settings).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("request 3 lies outside")));
}

TEST(SampledRequestsTest, CheckerAcceptsTheReferenceAndRejectsEveryWrongField) {
  const SamplingWorkload w = MakeWorkload(true);
  SampledRequestSettings settings;
  settings.kv_row_bytes = 8;
  settings.kv_return = v1::KV_RETURN_INLINE;
  const RejectionHostOutputs e = SampledReference(w, settings);
  const v1::VerifyResponse good = ReferenceResponse(w, 1, settings, e);
  EXPECT_THAT(CheckSampledResponse(w, 1, settings, e, good), IsOk());
  EXPECT_THAT(ExpectedRequestStatus(w, 1, e), IsOk());

  v1::VerifyResponse bad = good;
  bad.mutable_results(2)->set_next_token(good.results(2).next_token() + 1);
  EXPECT_THAT(CheckSampledResponse(w, 1, settings, e, bad),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("request 1 sequence 2: next_token is")));
  bad = good;
  bad.mutable_results(0)->set_mismatch(!good.results(0).mismatch());
  EXPECT_THAT(CheckSampledResponse(w, 1, settings, e, bad),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("mismatch")));
  bad = good;
  bad.set_exact(false);
  EXPECT_THAT(CheckSampledResponse(w, 1, settings, e, bad),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("exact")));
  bad = good;
  bad.set_verified(false);
  EXPECT_THAT(CheckSampledResponse(w, 1, settings, e, bad),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("verified is false")));
  bad = good;
  bad.mutable_results()->RemoveLast();
  EXPECT_THAT(CheckSampledResponse(w, 1, settings, e, bad),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("results count")));
  if (!good.kv_inline().empty()) {
    bad = good;
    (*bad.mutable_kv_inline())[0] ^= 1;
    EXPECT_THAT(CheckSampledResponse(w, 1, settings, e, bad),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("kv_inline row 0")));
  }
}

TEST(SampledRequestsTest, SigmoidReferenceDiffersFromExactAndIsMarkedNotExact) {
  SamplingWorkloadOptions o;
  o.num_sequences = 64;
  o.vocab_size = 200;
  o.kind = SampleValueKind::kLogits;
  o.seed = 3;
  const SamplingWorkload w = *GenerateSamplingWorkload(o);
  SampledRequestSettings sigmoid;
  sigmoid.method = SampleMethod::kSigmoid;
  const RejectionHostOutputs exact = SampledReference(w, {});
  const RejectionHostOutputs approx = SampledReference(w, sigmoid);
  int differ = 0;
  for (int i = 0; i < 64; ++i) {
    differ += exact.accepted_lengths[i] != approx.accepted_lengths[i] ||
              exact.next_tokens[i] != approx.next_tokens[i];
  }
  EXPECT_GT(differ, 0);
  const v1::VerifyRequest req = *BuildSampledRequest(w, 0, sigmoid);
  EXPECT_EQ(req.sequences(0).sampled().method(), v1::SAMPLING_METHOD_SIGMOID_APPROXIMATION);
  EXPECT_FLOAT_EQ(req.sequences(0).sampled().sigmoid_alpha(), -4.0f);
}

}  // namespace
}  // namespace specverify::client
