// Sampled (rejection-sampling) drafts end to end: the real server on
// loopback with a real backend — the CPU reference, and the CUDA executor
// when a GPU is visible (those cases skip visibly otherwise) — driven through
// Verify and VerifyStream by the real client, every answer checked against
// the CPU reference recomputed for the same seeds (client/sampled_requests.h).
#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "client/greedy_requests.h"
#include "client/sampled_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/workload/greedy_workload.h"
#include "kernels/workload/sampling_workload.h"
#include "server/app/verifier_server.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::client::BuildSampledRequest;
using ::specverify::client::CheckSampledResponse;
using ::specverify::client::ExpectedRequestStatus;
using ::specverify::client::SampledReference;
using ::specverify::client::SampledRequestCount;
using ::specverify::client::SampledRequestSettings;
using ::specverify::client::VerifierClient;
using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

// Records the batches the server reports.
class RecordingMetrics final : public NoopServerMetrics {
 public:
  void OnBatchExecuted(const BatchReport& report) override {
    absl::MutexLock lock(&mu_);
    batches_.push_back(report);
  }
  std::vector<BatchReport> batches() {
    absl::MutexLock lock(&mu_);
    return batches_;
  }

 private:
  absl::Mutex mu_;
  std::vector<BatchReport> batches_ ABSL_GUARDED_BY(mu_);
};

SamplingWorkload Workload(SampleDtype dtype, SampleValueKind kind, bool draft_probs,
                          uint64_t seed, int32_t sequences = 12, int32_t per_request = 3) {
  SamplingWorkloadOptions o;
  o.num_sequences = sequences;
  o.gamma_min = 1;
  o.gamma_max = 6;
  o.vocab_size = 1000;
  o.dtype = dtype;
  o.kind = kind;
  o.shape = DistributionShape::kMixed;
  o.has_draft_probs = draft_probs;
  o.sequences_per_request = per_request;
  o.seed = seed;
  if (kind == SampleValueKind::kLogits) {
    o.temperature = 0.8f;
    o.top_k = seed % 2 == 0 ? 50 : 0;
    o.top_p = seed % 3 == 0 ? 0.9f : 1.0f;
  }
  absl::StatusOr<SamplingWorkload> w = GenerateSamplingWorkload(o);
  EXPECT_THAT(w, IsOk());
  return *std::move(w);
}

// Parameter: the --device of the server under test.
class SampledServerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    options_.listen_address = "127.0.0.1:0";
    options_.metrics_address = "";
    options_.device = GetParam();
    options_.max_queue_delay_us = 2000;
    options_.max_batch_sequences = 64;
    options_.max_sequences_per_request = 16;
    options_.kv_arena_bytes = 8 << 20;
    options_.cpu_threads = 2;
  }
  void TearDown() override {
    if (server_ != nullptr) (void)server_->Shutdown(absl::Seconds(5));
  }
  void Start() {
    absl::StatusOr<std::unique_ptr<VerifierServer>> server =
        VerifierServer::Start(options_, &metrics_);
    if (!server.ok() && GetParam() != "cpu") {
      GTEST_SKIP() << "no " << GetParam() << " backend here: " << server.status();
    }
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    client::VerifierClientOptions c;
    c.address = server_->local_address();
    c.default_deadline = absl::Seconds(20);
    client_ = *VerifierClient::Create(c);
  }

  // Sends every request of `w` at once (asynchronously, so they share
  // batches) and returns the answers by request number.
  std::vector<absl::StatusOr<v1::VerifyResponse>> VerifyAll(
      const SamplingWorkload& w, const SampledRequestSettings& settings) {
    const int32_t n = SampledRequestCount(w);
    std::vector<absl::StatusOr<v1::VerifyResponse>> answers(n, absl::UnknownError("none"));
    absl::BlockingCounter pending(n);
    for (int32_t r = 0; r < n; ++r) {
      client_->VerifyAsync(*BuildSampledRequest(w, r, settings),
                           [&answers, &pending, r](absl::StatusOr<v1::VerifyResponse> a) {
                             answers[r] = std::move(a);
                             pending.DecrementCount();
                           });
    }
    pending.Wait();
    return answers;
  }

  ServerOptions options_;
  RecordingMetrics metrics_;
  std::unique_ptr<VerifierServer> server_;
  std::unique_ptr<VerifierClient> client_;
};

TEST_P(SampledServerTest, VerifyMatchesTheReferenceForEveryDtypeKindAndDraftOption) {
  Start();
  if (server_ == nullptr) return;
  uint64_t seed = 10;
  for (SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kFloat16, SampleDtype::kBFloat16}) {
    for (SampleValueKind kind : {SampleValueKind::kProbabilities, SampleValueKind::kLogits,
                                 SampleValueKind::kLogProbabilities}) {
      for (bool draft_probs : {true, false}) {
        SCOPED_TRACE(absl::StrCat("dtype ", static_cast<int>(dtype), " kind ",
                                  static_cast<int>(kind), " draft ", draft_probs, " seed ", seed));
        const SamplingWorkload w = Workload(dtype, kind, draft_probs, seed++);
        SampledRequestSettings settings;
        const RejectionHostOutputs expected = SampledReference(w, settings);
        std::vector<absl::StatusOr<v1::VerifyResponse>> answers = VerifyAll(w, settings);
        for (int32_t r = 0; r < static_cast<int32_t>(answers.size()); ++r) {
          ASSERT_THAT(answers[r], IsOk()) << "request " << r;
          EXPECT_THAT(CheckSampledResponse(w, r, settings, expected, *answers[r]), IsOk());
          EXPECT_EQ(answers[r]->timing().path(), v1::EXECUTION_PATH_SAMPLING);
          EXPECT_TRUE(answers[r]->exact());
          // One host copy of the payload: tokens, distribution rows, KV rows.
          const v1::VerifyRequest request = *BuildSampledRequest(w, r, settings);
          int64_t payload = 0;
          for (const v1::SequenceDraft& seq : request.sequences()) {
            payload += 4 * seq.draft_tokens_size() + seq.draft_kv().data().size() +
                       seq.sampled().target().values().data().size() +
                       seq.sampled().draft().values().data().size();
          }
          EXPECT_EQ(answers[r]->timing().host_copy_in_bytes(), payload) << "request " << r;
        }
      }
    }
  }
}

TEST_P(SampledServerTest, VerifyStreamMatchesTheReferenceWithPackedKvRows) {
  Start();
  if (server_ == nullptr) return;
  const SamplingWorkload w =
      Workload(SampleDtype::kBFloat16, SampleValueKind::kLogits, true, 77, 24, 4);
  SampledRequestSettings settings;
  settings.kv_row_bytes = 48;
  settings.kv_return = v1::KV_RETURN_INLINE;
  const RejectionHostOutputs expected = SampledReference(w, settings);
  absl::Mutex mu;
  std::map<std::string, v1::VerifyStreamResponse> answers;
  absl::StatusOr<std::unique_ptr<client::VerifyStreamSession>> session =
      client_->OpenStream([&](const v1::VerifyStreamResponse& a) {
        absl::MutexLock lock(&mu);
        answers[a.request_id()] = a;
      });
  ASSERT_THAT(session, IsOk());
  const int32_t n = SampledRequestCount(w);
  for (int32_t r = 0; r < n; ++r) {
    ASSERT_THAT((*session)->Send(*BuildSampledRequest(w, r, settings, absl::StrCat("s", r))),
                IsOk());
  }
  ASSERT_THAT((*session)->Finish(), IsOk());
  absl::MutexLock lock(&mu);
  ASSERT_EQ(answers.size(), static_cast<size_t>(n));
  int64_t rows = 0;
  for (int32_t r = 0; r < n; ++r) {
    const v1::VerifyStreamResponse& a = answers[absl::StrCat("s", r)];
    ASSERT_TRUE(a.has_response()) << r << ": " << a.error().message();
    EXPECT_THAT(CheckSampledResponse(w, r, settings, expected, a.response()), IsOk());
    rows += a.response().kv_inline().size() / 48;
  }
  EXPECT_GT(rows, 0);  // some rows were accepted and packed
}

TEST_P(SampledServerTest, NanAtAReadPositionFailsOnlyItsRequestNamingSequenceAndPosition) {
  // The four requests (12 sequences) share one batch.
  options_.preferred_batch_sequences = 12;
  options_.max_queue_delay_us = 50000;
  Start();
  if (server_ == nullptr) return;
  SamplingWorkload w = Workload(SampleDtype::kFloat32, SampleValueKind::kProbabilities, true, 5);
  // Request 2, its sequence 1 (workload sequence 7): p_0(x_0) is always read.
  const int32_t bad = 2 * 3 + 1;
  const int64_t v = w.options.vocab_size;
  const int64_t row = w.draft_offsets[bad] + bad;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&w.target_values[(row * v + w.draft_tokens[w.draft_offsets[bad]]) * 4], &nan, 4);
  SampledRequestSettings settings;
  const RejectionHostOutputs expected = SampledReference(w, settings);
  ASSERT_THAT(ExpectedRequestStatus(w, 2, expected),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 1, position 0")));
  std::vector<absl::StatusOr<v1::VerifyResponse>> answers = VerifyAll(w, settings);
  for (int32_t r = 0; r < 4; ++r) {
    if (r == 2) {
      EXPECT_THAT(answers[r], StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("sequence 1, position 0: target")));
      continue;
    }
    ASSERT_THAT(answers[r], IsOk()) << r;
    EXPECT_THAT(CheckSampledResponse(w, r, settings, expected, *answers[r]), IsOk());
    EXPECT_EQ(answers[r]->timing().batch_requests(), 4);  // it ran beside the bad one
  }
  EXPECT_TRUE(server_->info().modes_size() >= 1);
  // The server keeps serving.
  std::vector<absl::StatusOr<v1::VerifyResponse>> again =
      VerifyAll(Workload(SampleDtype::kFloat32, SampleValueKind::kProbabilities, true, 6),
                settings);
  for (const auto& a : again) EXPECT_THAT(a, IsOk());
}

// An invalid value that only the race over the sampled row reads (not a
// drafted token's value, which the decision reads first): on the GPU a race
// block flags it and the completion's fold of the race slots fails the
// sequence at k. The batch's other requests return their packed KV rows
// inline: the failed sequence's rows, copied on the device with its k before
// the fold knew, must not shift theirs.
TEST_P(SampledServerTest, NanOnlyTheSampledRowHoldsFailsItsRequestAndKeepsTheOthersRows) {
  options_.preferred_batch_sequences = 12;
  options_.max_queue_delay_us = 50000;
  Start();
  if (server_ == nullptr) return;
  SamplingWorkload w = Workload(SampleDtype::kFloat32, SampleValueKind::kProbabilities, true, 15);
  SampledRequestSettings settings;
  settings.kv_row_bytes = 48;
  settings.kv_return = v1::KV_RETURN_INLINE;
  // Request 1, its first sequence with accepted rows (so that rows were
  // copied for it), the row its race sweeps.
  const RejectionHostOutputs clean = SampledReference(w, settings);
  int32_t in_request = 0;
  while (in_request < 3 && clean.accepted_lengths[3 + in_request] == 0) ++in_request;
  ASSERT_LT(in_request, 3) << "no sequence of request 1 accepts a draft token";
  const int32_t bad = 3 + in_request;
  const int32_t k = clean.accepted_lengths[bad];
  const int32_t first = w.draft_offsets[bad];
  const int32_t gamma = w.draft_offsets[bad + 1] - first;
  int32_t element = 0;  // a token no drafted position reads
  while (std::find(w.draft_tokens.begin() + first, w.draft_tokens.begin() + first + gamma, element) !=
         w.draft_tokens.begin() + first + gamma) {
    ++element;
  }
  const int64_t row = first + bad + k;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&w.target_values[(row * w.options.vocab_size + element) * 4], &nan, 4);
  const RejectionHostOutputs expected = SampledReference(w, settings);
  ASSERT_THAT(ExpectedRequestStatus(w, 1, expected),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("sequence ", in_request, ", position ", k, ": target"))));
  std::vector<absl::StatusOr<v1::VerifyResponse>> answers = VerifyAll(w, settings);
  int64_t rows_after_bad = 0;
  for (int32_t r = 0; r < 4; ++r) {
    if (r == 1) {
      EXPECT_THAT(answers[r],
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           HasSubstr(absl::StrCat("sequence ", in_request, ", position ", k, ": target"))));
      continue;
    }
    ASSERT_THAT(answers[r], IsOk()) << r;
    EXPECT_THAT(CheckSampledResponse(w, r, settings, expected, *answers[r]), IsOk()) << r;
    EXPECT_EQ(answers[r]->timing().batch_requests(), 4);  // it ran beside the bad one
    if (r > 1) rows_after_bad += answers[r]->kv_inline().size() / 48;
  }
  EXPECT_GT(rows_after_bad, 0);  // rows packed after the failed sequence's were checked
}

// Log-probabilities: -inf is a valid value (the workload's disjoint shape
// sends whole halves of -inf), NaN and +inf where read are refused naming the
// sequence and position, and only the bad request fails.
TEST_P(SampledServerTest, LogProbabilityNanOrPlusInfinityFailsOnlyItsRequest) {
  options_.preferred_batch_sequences = 12;
  options_.max_queue_delay_us = 50000;
  Start();
  if (server_ == nullptr) return;
  for (const float bad_value : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(absl::StrCat("bad value ", bad_value));
    SamplingWorkload w = Workload(SampleDtype::kFloat32, SampleValueKind::kLogProbabilities, true, 15);
    bool has_minus_infinity = false;
    for (size_t x = 0; x < w.target_values.size() / 4 && !has_minus_infinity; ++x) {
      float value;
      std::memcpy(&value, &w.target_values[4 * x], 4);
      has_minus_infinity = value == -std::numeric_limits<float>::infinity();
    }
    ASSERT_TRUE(has_minus_infinity) << "the workload should carry -inf log-probabilities";
    // Request 1, its sequence 2 (workload sequence 5): q_0(x_0) is always read.
    const int32_t bad = 1 * 3 + 2;
    const int64_t v = w.options.vocab_size;
    const int64_t row = w.draft_offsets[bad];
    std::memcpy(&w.draft_values[(row * v + w.draft_tokens[w.draft_offsets[bad]]) * 4], &bad_value, 4);
    SampledRequestSettings settings;
    const RejectionHostOutputs expected = SampledReference(w, settings);
    std::vector<absl::StatusOr<v1::VerifyResponse>> answers = VerifyAll(w, settings);
    for (int32_t r = 0; r < 4; ++r) {
      if (r == 1) {
        EXPECT_THAT(answers[r], StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("sequence 2, position 0: draft")));
        continue;
      }
      ASSERT_THAT(answers[r], IsOk()) << r;
      EXPECT_THAT(CheckSampledResponse(w, r, settings, expected, *answers[r]), IsOk());
      EXPECT_TRUE(answers[r]->exact());
    }
  }
}

TEST_P(SampledServerTest, SigmoidAnswersAreMarkedNotExactInResponsesAndMetrics) {
  Start();
  if (server_ == nullptr) return;
  // Sigmoid takes no top-k/top-p: seed 11 gives top_k 0 and top_p 1 (Workload).
  const SamplingWorkload w2 = Workload(SampleDtype::kFloat16, SampleValueKind::kLogits, true, 11);
  SampledRequestSettings settings;
  settings.method = SampleMethod::kSigmoid;
  settings.sigmoid_alpha = -4.0f;
  settings.sigmoid_beta = 4.0f;
  const RejectionHostOutputs expected = SampledReference(w2, settings);
  std::vector<absl::StatusOr<v1::VerifyResponse>> answers = VerifyAll(w2, settings);
  for (int32_t r = 0; r < static_cast<int32_t>(answers.size()); ++r) {
    ASSERT_THAT(answers[r], IsOk()) << r;
    EXPECT_FALSE(answers[r]->exact());
    EXPECT_THAT(CheckSampledResponse(w2, r, settings, expected, *answers[r]), IsOk());
  }
  const std::vector<BatchReport> batches = metrics_.batches();
  ASSERT_FALSE(batches.empty());
  for (const BatchReport& b : batches) {
    EXPECT_FALSE(b.exact);
    EXPECT_EQ(b.path, ExecutionPathLabel::kSampling);
  }
}

TEST_P(SampledServerTest, GreedyAndSampledRequestsInFlightTogether) {
  Start();
  if (server_ == nullptr) return;
  GreedyWorkloadOptions g;
  g.num_sequences = 40;
  g.row_bytes = 32;
  g.vocab_size = 1000;
  g.seed = 3;
  const GreedyWorkload greedy = *GenerateGreedyWorkload(g);
  const SamplingWorkload w = Workload(SampleDtype::kFloat32, SampleValueKind::kLogits, false, 21,
                                      40, 4);
  SampledRequestSettings settings;
  settings.kv_row_bytes = 32;
  settings.kv_return = v1::KV_RETURN_INLINE;
  const RejectionHostOutputs expected = SampledReference(w, settings);
  constexpr int kRequests = 10;
  std::vector<absl::StatusOr<v1::VerifyResponse>> greedy_answers(kRequests,
                                                                 absl::UnknownError("none"));
  std::vector<absl::StatusOr<v1::VerifyResponse>> sampled_answers(kRequests,
                                                                  absl::UnknownError("none"));
  absl::BlockingCounter pending(2 * kRequests);
  for (int r = 0; r < kRequests; ++r) {
    client::GreedyRequestOptions o;
    o.first_sequence = 4 * r;
    o.num_sequences = 4;
    o.kv_return = v1::KV_RETURN_INLINE;
    client_->VerifyAsync(*client::BuildGreedyRequest(greedy, o),
                         [&, r](absl::StatusOr<v1::VerifyResponse> a) {
                           greedy_answers[r] = std::move(a);
                           pending.DecrementCount();
                         });
    client_->VerifyAsync(*BuildSampledRequest(w, r, settings),
                         [&, r](absl::StatusOr<v1::VerifyResponse> a) {
                           sampled_answers[r] = std::move(a);
                           pending.DecrementCount();
                         });
  }
  pending.Wait();
  for (int r = 0; r < kRequests; ++r) {
    ASSERT_THAT(greedy_answers[r], IsOk());
    client::GreedyCheckOptions c;
    c.first_sequence = 4 * r;
    c.num_sequences = 4;
    c.kv_return = v1::KV_RETURN_INLINE;
    EXPECT_THAT(client::CheckGreedyResponse(greedy, c, *greedy_answers[r]), IsOk());
    EXPECT_NE(greedy_answers[r]->timing().path(), v1::EXECUTION_PATH_SAMPLING);
    ASSERT_THAT(sampled_answers[r], IsOk());
    EXPECT_THAT(CheckSampledResponse(w, r, settings, expected, *sampled_answers[r]), IsOk());
    EXPECT_EQ(sampled_answers[r]->timing().path(), v1::EXECUTION_PATH_SAMPLING);
  }
}

TEST_P(SampledServerTest, BadFieldValuesAreRejectedAtTheEdge) {
  Start();
  if (server_ == nullptr) return;
  const SamplingWorkload w = Workload(SampleDtype::kFloat32, SampleValueKind::kLogits, true, 31);
  v1::VerifyRequest bad = *BuildSampledRequest(w, 0, {});
  bad.mutable_sequences(1)->mutable_sampled()->set_temperature(-1.0f);
  EXPECT_THAT(client_->Verify(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequences[1].sampled.temperature is -1; must be finite and >= 0")));
  bad = *BuildSampledRequest(w, 0, {});
  bad.mutable_sequences(2)->mutable_sampled()->mutable_target()->mutable_values()->mutable_data()->pop_back();
  EXPECT_THAT(client_->Verify(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequences[2].sampled.target.values.data is")));
}

// The no-op backend (transport ceiling) answers sampled requests with the
// same shape as greedy ones, unverified: k = gamma, the last draft token.
TEST(SampledNoopServerTest, AnswersUnverifiedWithTheFixedShape) {
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.metrics_address = "";
  options.device = "noop";
  options.kv_arena_bytes = 1 << 20;
  RecordingMetrics metrics;
  absl::StatusOr<std::unique_ptr<VerifierServer>> server = VerifierServer::Start(options, &metrics);
  ASSERT_THAT(server, IsOk());
  client::VerifierClientOptions c;
  c.address = (*server)->local_address();
  std::unique_ptr<VerifierClient> client = *VerifierClient::Create(c);
  const SamplingWorkload w = Workload(SampleDtype::kFloat16, SampleValueKind::kLogits, true, 41);
  SampledRequestSettings settings;
  settings.method = SampleMethod::kSigmoid;
  absl::StatusOr<v1::VerifyResponse> a = client->Verify(*BuildSampledRequest(w, 1, settings));
  ASSERT_THAT(a, IsOk());
  EXPECT_FALSE(a->verified());
  EXPECT_FALSE(a->exact());
  EXPECT_EQ(a->timing().path(), v1::EXECUTION_PATH_NOOP);
  ASSERT_EQ(a->results_size(), 3);
  for (int s = 0; s < 3; ++s) {
    const int32_t i = 3 + s;
    EXPECT_EQ(a->results(s).accepted_length(), w.gamma(i));
    EXPECT_EQ(a->results(s).next_token(), w.draft_tokens[w.draft_offsets[i] + w.gamma(i) - 1]);
  }
  (void)(*server)->Shutdown(absl::Seconds(5));
}

INSTANTIATE_TEST_SUITE_P(Backends, SampledServerTest, ::testing::Values("cpu", "cuda:0"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "cpu" ? std::string("Cpu") : std::string("Cuda");
                         });

}  // namespace
}  // namespace specverify::server
