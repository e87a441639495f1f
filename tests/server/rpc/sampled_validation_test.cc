// Edge validation of sampled drafts (SampledTarget): every field, with the
// exact status and message naming the field, the sequence and the limit; and
// the batch key and payload of a valid request.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "client/sampled_requests.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/workload/sampling_workload.h"
#include "server/rpc/validation.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

class SampledValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SamplingWorkloadOptions o;
    o.num_sequences = 3;
    o.gamma_min = 4;
    o.gamma_max = 4;
    o.vocab_size = 100;
    o.kind = SampleValueKind::kLogits;
    o.dtype = SampleDtype::kFloat16;
    o.sequences_per_request = 3;
    workload_ = *GenerateSamplingWorkload(o);
    request_ = *client::BuildSampledRequest(workload_, 0, {});
  }
  absl::Status Validate() { return ValidateVerifyRequest(request_, limits_).status(); }
  v1::SampledTarget* Sampled(int i) { return request_.mutable_sequences(i)->mutable_sampled(); }

  SamplingWorkload workload_;
  v1::VerifyRequest request_;
  RequestLimits limits_;
};

TEST_F(SampledValidationTest, AValidRequestGetsItsBatchKeyAndPayload) {
  absl::StatusOr<ValidatedRequest> v = ValidateVerifyRequest(request_, limits_);
  ASSERT_THAT(v, IsOk());
  EXPECT_EQ(v->key.mode, VerifyMode::kSampled);
  EXPECT_EQ(v->key.vocab_size, 100);
  EXPECT_EQ(v->key.value_dtype, SampleDtype::kFloat16);
  EXPECT_EQ(v->key.value_kind, SampleValueKind::kLogits);
  EXPECT_EQ(v->key.method, SampleMethod::kExact);
  EXPECT_TRUE(v->key.has_draft_probs);
  // Per sequence: tokens 4 * (2 * 4 + 1), 24 bytes of parameters, rows
  // (5 + 4) * 100 * 2.
  EXPECT_EQ(v->payload_bytes, 3 * (36 + 24 + 1800));
  EXPECT_EQ(v->total_draft_rows, 12);
}

TEST_F(SampledValidationTest, SigmoidAndDraftPresenceChangeTheKey) {
  for (int i = 0; i < 3; ++i) {
    Sampled(i)->set_method(v1::SAMPLING_METHOD_SIGMOID_APPROXIMATION);
    Sampled(i)->set_sigmoid_alpha(-8);
    Sampled(i)->set_sigmoid_beta(8);
    Sampled(i)->clear_draft();
  }
  absl::StatusOr<ValidatedRequest> v = ValidateVerifyRequest(request_, limits_);
  ASSERT_THAT(v, IsOk());
  EXPECT_EQ(v->key.method, SampleMethod::kSigmoid);
  EXPECT_EQ(v->key.sigmoid_alpha, -8.0f);
  EXPECT_FALSE(v->key.has_draft_probs);
}

TEST_F(SampledValidationTest, LogProbabilitiesMapToTheirKindAndTakeAnyTemperature) {
  SamplingWorkloadOptions o = workload_.options;
  o.kind = SampleValueKind::kLogProbabilities;
  workload_ = *GenerateSamplingWorkload(o);
  request_ = *client::BuildSampledRequest(workload_, 0, {});
  EXPECT_EQ(request_.sequences(0).sampled().target().kind(), v1::DISTRIBUTION_KIND_LOG_PROBABILITIES);
  EXPECT_EQ(request_.sequences(0).sampled().draft().kind(), v1::DISTRIBUTION_KIND_LOG_PROBABILITIES);
  // Temperature is ignored for log-probabilities (the caller applied it), as for probabilities.
  Sampled(1)->set_temperature(0.0f);
  Sampled(2)->set_temperature(3.0f);
  absl::StatusOr<ValidatedRequest> v = ValidateVerifyRequest(request_, limits_);
  ASSERT_THAT(v, IsOk());
  EXPECT_EQ(v->key.value_kind, SampleValueKind::kLogProbabilities);
  EXPECT_EQ(v->key.value_dtype, SampleDtype::kFloat16);
  EXPECT_EQ(v->payload_bytes, 3 * (36 + 24 + 1800));
}

TEST_F(SampledValidationTest, APayloadAboveTheStagingLimitIsRejectedNamingIt) {
  limits_.max_sampled_request_bytes = 3 * (36 + 24 + 1800) - 1;
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sampled request payload is 5580 bytes "
                                                       "(distribution rows, tokens, parameters, "
                                                       "KV); limit max_sampled_request_bytes=5579")));
  limits_.max_sampled_request_bytes = 3 * (36 + 24 + 1800);
  EXPECT_THAT(Validate(), IsOk());
}

struct Case {
  const char* name;
  std::function<void(v1::VerifyRequest&)> mutate;
  const char* message;
};

TEST_F(SampledValidationTest, EveryBadFieldIsInvalidArgumentNamingFieldSequenceAndLimit) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Case cases[] = {
      {"target missing", [](v1::VerifyRequest& r) { r.mutable_sequences(1)->mutable_sampled()->clear_target(); },
       "sequences[1].sampled.target is not set"},
      {"target dtype", [](v1::VerifyRequest& r) {
         r.mutable_sequences(2)->mutable_sampled()->mutable_target()->mutable_values()->set_dtype(v1::DATA_TYPE_UINT8);
       }, "sequences[2].sampled.target.values.dtype is 4; must be FLOAT32, FLOAT16 or BFLOAT16"},
      {"kind unset", [](v1::VerifyRequest& r) {
         r.mutable_sequences(0)->mutable_sampled()->mutable_target()->set_kind(v1::DISTRIBUTION_KIND_UNSPECIFIED);
       }, "sequences[0].sampled.target.kind is 0; must be PROBABILITIES, LOGITS or LOG_PROBABILITIES"},
      {"kind out of range", [](v1::VerifyRequest& r) {
         r.mutable_sequences(1)->mutable_sampled()->mutable_target()->set_kind(static_cast<v1::DistributionKind>(4));
       }, "sequences[1].sampled.target.kind is 4; must be PROBABILITIES, LOGITS or LOG_PROBABILITIES"},
      {"target rows", [](v1::VerifyRequest& r) {
         r.mutable_sequences(1)->mutable_sampled()->mutable_target()->mutable_values()->set_shape(0, 4);
       }, "sequences[1].sampled.target.values.shape[0] is 4; must be 5 (gamma + 1)"},
      {"target rank", [](v1::VerifyRequest& r) {
         r.mutable_sequences(1)->mutable_sampled()->mutable_target()->mutable_values()->add_shape(1);
       }, "sequences[1].sampled.target.values.shape has rank 3; must be [5, vocab]"},
      {"vocab too large", [](v1::VerifyRequest& r) {
         r.mutable_sequences(0)->mutable_sampled()->mutable_target()->mutable_values()->set_shape(1, 1 << 19);
       }, "sequences[0].sampled.target.values.shape[1] (vocab) is 524288; must lie in [2, 262144]"},
      {"target bytes", [](v1::VerifyRequest& r) {
         r.mutable_sequences(2)->mutable_sampled()->mutable_target()->mutable_values()->mutable_data()->append("xx");
       }, "sequences[2].sampled.target.values.data is 1002 bytes; shape x dtype size requires 1000"},
      {"draft rows", [](v1::VerifyRequest& r) {
         r.mutable_sequences(1)->mutable_sampled()->mutable_draft()->mutable_values()->set_shape(0, 5);
       }, "sequences[1].sampled.draft.values.shape[0] is 5; must be 4 (gamma)"},
      {"draft vocab", [](v1::VerifyRequest& r) {
         r.mutable_sequences(1)->mutable_sampled()->mutable_draft()->mutable_values()->set_shape(1, 50);
       }, "sequences[1].sampled.draft.values.shape[1] is 50; must equal the target's vocab 100"},
      {"draft dtype", [](v1::VerifyRequest& r) {
         auto* d = r.mutable_sequences(1)->mutable_sampled()->mutable_draft()->mutable_values();
         d->set_dtype(v1::DATA_TYPE_BFLOAT16);
       }, "sequences[1].sampled.draft.values.dtype is 3 but the target's is 2; one dtype per request"},
      {"draft kind", [](v1::VerifyRequest& r) {
         r.mutable_sequences(0)->mutable_sampled()->mutable_draft()->set_kind(v1::DISTRIBUTION_KIND_PROBABILITIES);
       }, "sequences[0].sampled.draft.kind is 1 but the target's is 2; one kind per request"},
      {"vocab_size", [](v1::VerifyRequest& r) {
         for (auto& s : *r.mutable_sequences()) s.set_vocab_size(99);
       }, "sequences[0].vocab_size is 99; must equal the distributions' width 100"},
      {"draft token", [](v1::VerifyRequest& r) {
         r.mutable_sequences(2)->set_draft_tokens(3, 100);
       }, "sequences[2].draft_tokens[3] is 100; token ids must lie in [0, vocab_size=100)"},
      {"temperature negative", [](v1::VerifyRequest& r) {
         r.mutable_sequences(1)->mutable_sampled()->set_temperature(-0.5f);
       }, "sequences[1].sampled.temperature is -0.5; must be finite and >= 0"},
      {"temperature nan", [nan](v1::VerifyRequest& r) {
         r.mutable_sequences(1)->mutable_sampled()->set_temperature(nan);
       }, "sequences[1].sampled.temperature is nan; must be finite and >= 0"},
      {"top_k", [](v1::VerifyRequest& r) { r.mutable_sequences(2)->mutable_sampled()->set_top_k(101); },
       "sequences[2].sampled.top_k is 101; must lie in [0, vocab=100] (0 = all)"},
      {"top_p", [](v1::VerifyRequest& r) { r.mutable_sequences(0)->mutable_sampled()->set_top_p(1.5f); },
       "sequences[0].sampled.top_p is 1.5; must lie in [0, 1] (0 or 1 = all)"},
      {"method", [](v1::VerifyRequest& r) {
         r.mutable_sequences(0)->mutable_sampled()->set_method(static_cast<v1::SamplingMethod>(9));
       }, "sequences[0].sampled.method is 9; not a SamplingMethod value"},
      {"sigmoid constants", [](v1::VerifyRequest& r) {
         auto* s = r.mutable_sequences(0)->mutable_sampled();
         s->set_method(v1::SAMPLING_METHOD_SIGMOID_APPROXIMATION);
         s->set_sigmoid_alpha(1);
         s->set_sigmoid_beta(4);
       }, "sequences[0].sampled.sigmoid_alpha/sigmoid_beta are 1/4; must be finite with alpha < 0 < beta"},
      {"sigmoid on probabilities", [](v1::VerifyRequest& r) {
         auto* s = r.mutable_sequences(0)->mutable_sampled();
         s->set_method(v1::SAMPLING_METHOD_SIGMOID_APPROXIMATION);
         s->mutable_target()->set_kind(v1::DISTRIBUTION_KIND_PROBABILITIES);
         s->mutable_draft()->set_kind(v1::DISTRIBUTION_KIND_PROBABILITIES);
       }, "sequences[0].sampled.method is SIGMOID_APPROXIMATION; it requires LOGITS"},
      {"top_k on probabilities", [](v1::VerifyRequest& r) {
         auto* s = r.mutable_sequences(1)->mutable_sampled();
         s->mutable_target()->set_kind(v1::DISTRIBUTION_KIND_PROBABILITIES);
         s->mutable_draft()->set_kind(v1::DISTRIBUTION_KIND_PROBABILITIES);
         s->set_top_k(5);
       }, "sequences[1].sampled.top_k/top_p are 5/1; they apply to LOGITS only"},
      {"sigmoid on log-probabilities", [](v1::VerifyRequest& r) {
         auto* s = r.mutable_sequences(0)->mutable_sampled();
         s->set_method(v1::SAMPLING_METHOD_SIGMOID_APPROXIMATION);
         s->mutable_target()->set_kind(v1::DISTRIBUTION_KIND_LOG_PROBABILITIES);
         s->mutable_draft()->set_kind(v1::DISTRIBUTION_KIND_LOG_PROBABILITIES);
       }, "it requires LOGITS, the target is LOG_PROBABILITIES"},
      {"top_p on log-probabilities", [](v1::VerifyRequest& r) {
         auto* s = r.mutable_sequences(2)->mutable_sampled();
         s->mutable_target()->set_kind(v1::DISTRIBUTION_KIND_LOG_PROBABILITIES);
         s->mutable_draft()->set_kind(v1::DISTRIBUTION_KIND_LOG_PROBABILITIES);
         s->set_top_p(0.9f);
       }, "sequences[2].sampled.top_k/top_p are 0/0.9; they apply to LOGITS only"},
      {"draft kind log-probabilities", [](v1::VerifyRequest& r) {
         r.mutable_sequences(0)->mutable_sampled()->mutable_draft()->set_kind(
             v1::DISTRIBUTION_KIND_LOG_PROBABILITIES);
       }, "sequences[0].sampled.draft.kind is 3 but the target's is 2; one kind per request"},
      {"one method per request", [](v1::VerifyRequest& r) {
         auto* s = r.mutable_sequences(2)->mutable_sampled();
         s->set_method(v1::SAMPLING_METHOD_SIGMOID_APPROXIMATION);
         s->set_sigmoid_alpha(-1);
         s->set_sigmoid_beta(1);
       }, "sequences[2].sampled method is 2 but sequences[0]'s is 1; one method per request"},
      {"one draft option per request", [](v1::VerifyRequest& r) {
         r.mutable_sequences(1)->mutable_sampled()->clear_draft();
       }, "sequences[1].sampled draft is absent but sequences[0]'s is present; one draft per request"},
      {"gamma", [](v1::VerifyRequest& r) { r.mutable_sequences(0)->clear_draft_tokens(); },
       "sequences[0].draft_tokens has 0 tokens; gamma must lie in [1, max_draft_tokens="},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SetUp();
    c.mutate(request_);
    EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr(c.message)));
  }
}

}  // namespace
}  // namespace specverify::server
