// specverify-loadgen --mode=sampled against the real specverify-server (CPU
// backend) started as a child process on loopback: every answer is checked by
// recomputing the CPU reference for the fixed seeds, and a run has zero wrong
// answers, zero RPC errors and zero KV mismatches, for probabilities and
// logits, with and without draft rows, unary and streamed, KV fetched back.
#include <string>

#include "absl/strings/str_cat.h"
#include "client/loadgen/loadgen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/loadgen/server_process.h"

namespace specverify::loadgen {
namespace {

using ::specverify::testing::ServerProcess;

class LoadgenSampledTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = ServerProcess::Start(SPECVERIFY_SERVER_BINARY,
                                       {"--device=cpu", "--metrics_address="});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = new ServerProcess(std::move(*server));
  }
  static void TearDownTestSuite() {
    if (server_ == nullptr) return;
    absl::StatusOr<int> code = server_->Stop();
    EXPECT_TRUE(code.ok()) << code.status();
    if (code.ok()) {
      EXPECT_EQ(*code, 0);
    }
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  static LoadgenConfig SampledConfig() {
    LoadgenConfig c;
    c.address = server_->address();
    c.concurrency = {8};
    c.requests = 120;
    c.warmup_s = 0.05;
    c.transport.deadline_ms = 20000;
    c.connect_timeout_s = 5;
    c.workload.mode = WorkloadMode::kSampled;
    c.workload.gamma_min = 2;
    c.workload.gamma_max = 6;
    c.workload.sequences_per_request = 3;
    c.workload.vocab_size = 2048;
    c.workload.row_bytes = 64;
    c.workload.pool_requests = 40;
    return c;
  }

  static ServerProcess* server_;
};

ServerProcess* LoadgenSampledTest::server_ = nullptr;

void ExpectAllCorrect(const RunReport& report) {
  ASSERT_FALSE(report.steps.empty());
  for (const StepPair& pair : report.steps) {
    const StepResult& r = pair.server;
    EXPECT_EQ(r.sent, 120);
    EXPECT_EQ(r.ok, r.sent);
    EXPECT_EQ(r.rpc_errors, 0) << (r.error_examples.empty() ? "" : r.error_examples[0]);
    EXPECT_EQ(r.wrong_answers, 0)
        << (r.wrong_answer_examples.empty() ? "" : r.wrong_answer_examples[0]);
    EXPECT_EQ(r.kv_mismatches, 0);
    EXPECT_EQ(r.kv_fetch_errors, 0);
    EXPECT_EQ(r.unverified, 0);
    EXPECT_EQ(r.sequences, 3 * r.ok);
    // Mixed distribution shapes: neither nothing nor everything is accepted.
    EXPECT_GT(r.acceptance(), 0.0);
    EXPECT_LT(r.acceptance(), 0.95);
  }
  EXPECT_EQ(ExitCodeFor(report), kExitOk);
}

TEST_F(LoadgenSampledTest, ProbabilitiesWithDraftRowsUnaryKvFetched) {
  LoadgenConfig c = SampledConfig();
  c.workload.dtype = SampleDtype::kFloat16;
  c.workload.kv_return = KvReturnMode::kHandle;
  c.workload.fetch_kv_fraction = 1.0;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllCorrect(*report);
  // Answers that accepted no row have no handle to fetch.
  EXPECT_GT(report->steps[0].server.kv_fetches, 60);
}

TEST_F(LoadgenSampledTest, LogitsWithoutDraftRowsOverAStreamKvInline) {
  LoadgenConfig c = SampledConfig();
  c.rpc = RpcKind::kStream;
  c.workload.dtype = SampleDtype::kBFloat16;
  c.workload.kind = SampleValueKind::kLogits;
  c.workload.draft_probs = false;
  c.workload.kv_return = KvReturnMode::kInline;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllCorrect(*report);
}

TEST_F(LoadgenSampledTest, LogProbabilityAnswersAreChecked) {
  LoadgenConfig c = SampledConfig();
  c.workload.kind = SampleValueKind::kLogProbabilities;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllCorrect(*report);
}

TEST_F(LoadgenSampledTest, SigmoidAnswersAreCheckedToo) {
  LoadgenConfig c = SampledConfig();
  c.workload.kind = SampleValueKind::kLogits;
  c.workload.method = SampleMethod::kSigmoid;
  c.workload.kv_return = KvReturnMode::kNone;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectAllCorrect(*report);
}

TEST(LoadgenSampledConfigTest, FlagsParseAndSigmoidNeedsLogits) {
  EXPECT_EQ(*ParseWorkloadMode("sampled"), WorkloadMode::kSampled);
  EXPECT_EQ(*ParseSampleDtype("bf16"), SampleDtype::kBFloat16);
  EXPECT_EQ(*ParseSampleKind("logits"), SampleValueKind::kLogits);
  EXPECT_EQ(*ParseSampleKind("logprobs"), SampleValueKind::kLogProbabilities);
  EXPECT_EQ(SampleKindName(SampleValueKind::kLogProbabilities), "logprobs");
  EXPECT_THAT(ParseSampleKind("log").status().message(),
              ::testing::HasSubstr("expected probs, logits or logprobs, got 'log'"));
  EXPECT_EQ(*ParseSampleMethod("sigmoid"), SampleMethod::kSigmoid);
  EXPECT_THAT(ParseSampleDtype("fp8").status().message(),
              ::testing::HasSubstr("expected fp32, fp16 or bf16, got 'fp8'"));
  LoadgenConfig c;
  c.address = "localhost:1";
  c.workload.mode = WorkloadMode::kSampled;
  c.workload.method = SampleMethod::kSigmoid;
  EXPECT_THAT(ValidateConfig(c).message(), ::testing::HasSubstr("sigmoid needs --kind=logits"));
}

}  // namespace
}  // namespace specverify::loadgen
