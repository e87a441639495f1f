// The load generator end to end against an in-process fake Verifier on
// loopback: every mode keeps its counts consistent, and every kind of wrong
// answer (next token, fetched KV bytes, unverified answers from the server
// under test) is detected and fails the run.
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/loadgen/report.h"
#include "client/loadgen/loadgen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/loadgen/fake_verifier.h"
#include "tests/testing/status_matchers.h"

namespace specverify::loadgen {
namespace {

using ::specverify::testing::FakeVerifier;
using ::specverify::testing::FakeVerifierOptions;
using ::specverify::testing::LoopbackServer;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

// Small enough that a step takes well under a second on one loaded core.
constexpr int64_t kRequestsPerStep = 200;

LoadgenConfig BaseConfig(const std::string& address) {
  LoadgenConfig c;
  c.address = address;
  c.mode = LoopMode::kClosed;
  c.concurrency = {4};
  c.requests = kRequestsPerStep;
  c.warmup_s = 0.05;
  c.transport.deadline_ms = 5000;
  c.workload.gamma_min = 4;
  c.workload.gamma_max = 12;
  c.workload.sequences_per_request = 2;
  c.workload.row_bytes = 64;
  c.workload.pool_requests = 64;
  c.workload.alpha = 0.7;
  return c;
}

// The counting invariants every step must keep (step_result.h).
void ExpectConsistent(const StepResult& r) {
  EXPECT_EQ(r.sent, r.ok + r.rpc_errors);
  EXPECT_EQ(r.latency.count(), r.ok);
  EXPECT_EQ(r.service_time.count(), r.ok);
  EXPECT_EQ(r.send_lag.count(), r.sent);
  EXPECT_LE(r.wrong_answers + r.unverified, r.ok);
  int64_t by_code = 0;
  for (const auto& [code, n] : r.errors_by_code) by_code += n;
  EXPECT_EQ(by_code, r.rpc_errors);
  EXPECT_GT(r.window_s, 0);
  // client_cpu_cores is not asserted: process CPU time is sampled at tick
  // granularity and reads 0 for a short step on a busy machine.
  EXPECT_GE(r.client_cpu_cores, 0);
}

// A correct run: every request answered, every answer right.
void ExpectClean(const RunReport& report, int64_t expected_sent_per_step) {
  for (const StepPair& pair : report.steps) {
    const StepResult& r = pair.server;
    ExpectConsistent(r);
    if (expected_sent_per_step > 0) {
      EXPECT_EQ(r.sent, expected_sent_per_step);
    }
    EXPECT_EQ(r.ok, r.sent);
    EXPECT_EQ(r.rpc_errors, 0) << (r.error_examples.empty() ? "" : r.error_examples[0]);
    EXPECT_EQ(r.wrong_answers, 0) << (r.wrong_answer_examples.empty() ? "" : r.wrong_answer_examples[0]);
    EXPECT_EQ(r.kv_mismatches, 0);
    EXPECT_EQ(r.unverified, 0);
    EXPECT_EQ(r.sequences, 2 * r.ok);
    EXPECT_GT(r.acceptance(), 0.4);
    EXPECT_LT(r.acceptance(), 0.95);
  }
  EXPECT_EQ(ExitCodeFor(report), kExitOk);
}

class LoadgenFakeServerTest : public ::testing::Test {
 protected:
  FakeVerifier correct_{FakeVerifierOptions{}};
  LoopbackServer server_{&correct_};
};

TEST_F(LoadgenFakeServerTest, ClosedLoopUnarySweep) {
  LoadgenConfig c = BaseConfig(server_.address());
  c.concurrency = {1, 8};
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->steps.size(), 2u);
  EXPECT_EQ(report->steps[1].server.spec.concurrency, 8);
  EXPECT_EQ(report->server.backend, "fake");
  ExpectClean(*report, kRequestsPerStep);
  // Without --fetch_kv every handle is released, none is leaked.
  EXPECT_EQ(report->steps[0].server.kv_released, kRequestsPerStep);
  EXPECT_EQ(correct_.live_handles(), 0);
}

// --start_at_unix: set up, then no Verify before the start time; a start
// time already past starts at once.
TEST_F(LoadgenFakeServerTest, StartAtHoldsTheFirstRequestUntilItsTime) {
  LoadgenConfig c = BaseConfig(server_.address());
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  c.start_at_unix_s = std::chrono::duration<double>(now).count() + 1.5;
  absl::StatusOr<RunReport> report;
  std::thread run([&] { report = RunLoadgen(c); });
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_EQ(correct_.verify_requests(), 0) << "a request went out before --start_at_unix";
  run.join();
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectClean(*report, kRequestsPerStep);
  // The measured window (after the warm-up) began after the start time, and
  // the report says when.
  const double wall_now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GE(report->steps[0].server.window_start_unix_s, c.start_at_unix_s + c.warmup_s - 0.01);
  EXPECT_LT(report->steps[0].server.window_start_unix_s, wall_now);
  EXPECT_THAT(FormatJson(*report), HasSubstr(absl::StrFormat("\"window_start_unix_s\":%.3f",
                                                             report->steps[0].server.window_start_unix_s)));

  c.start_at_unix_s = 1.0;  // 1970: long past
  report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectClean(*report, kRequestsPerStep);
}

TEST_F(LoadgenFakeServerTest, ClosedLoopStreamOverSeveralChannels) {
  LoadgenConfig c = BaseConfig(server_.address());
  c.rpc = RpcKind::kStream;
  c.channels = 3;
  c.concurrency = {16};
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectClean(*report, kRequestsPerStep);
  EXPECT_EQ(correct_.live_handles(), 0);
}

// A server that ends every stream UNAVAILABLE mid-flight (its 25th request
// unanswered, and whatever was sent after it): with resending, each new call
// gets what the last one left and every request is answered once, right.
TEST(LoadgenStreamResendTest, UnansweredRequestsAreSentAgainOnANewStream) {
  FakeVerifier flaky(FakeVerifierOptions{.end_stream_after = 25});
  LoopbackServer server(&flaky);
  LoadgenConfig c = BaseConfig(server.address());
  c.rpc = RpcKind::kStream;
  c.channels = 2;
  c.concurrency = {8};
  c.resend_unanswered = 3;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectClean(*report, kRequestsPerStep);
  // At least the step's requests over 24 answers a call, on each channel.
  EXPECT_GE(flaky.stream_calls(), kRequestsPerStep / 24);
}

// Without resending the stream's end fails what it left unanswered and stops
// those slots: the step ends early with UNAVAILABLE errors, not hung.
TEST(LoadgenStreamResendTest, WithoutResendingAnEndedStreamFailsItsRequests) {
  FakeVerifier flaky(FakeVerifierOptions{.end_stream_after = 25});
  LoopbackServer server(&flaky);
  LoadgenConfig c = BaseConfig(server.address());
  c.rpc = RpcKind::kStream;
  c.concurrency = {8};
  c.warmup_s = 0;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  const StepResult& r = report->steps[0].server;
  ExpectConsistent(r);
  EXPECT_EQ(r.ok, 24);
  EXPECT_GT(r.rpc_errors, 0);
  EXPECT_EQ(r.errors_by_code.count("UNAVAILABLE"), 1u);
  EXPECT_LT(r.sent, kRequestsPerStep);
  EXPECT_EQ(flaky.stream_calls(), 1);
}

// A server that never answers a stream's first request: the resends stop
// after N new calls in a row without an answer, and the step ends.
TEST(LoadgenStreamResendTest, ResendingGivesUpAfterNCallsWithoutAnAnswer) {
  FakeVerifier dead(FakeVerifierOptions{.end_stream_after = 1});
  LoopbackServer server(&dead);
  LoadgenConfig c = BaseConfig(server.address());
  c.rpc = RpcKind::kStream;
  c.concurrency = {2};
  c.warmup_s = 0;
  c.resend_unanswered = 2;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  const StepResult& r = report->steps[0].server;
  ExpectConsistent(r);
  EXPECT_EQ(r.ok, 0);
  EXPECT_EQ(r.rpc_errors, r.sent);
  EXPECT_EQ(dead.stream_calls(), 3);
}

TEST_F(LoadgenFakeServerTest, OpenLoopConstantRateSendsOnSchedule) {
  LoadgenConfig c = BaseConfig(server_.address());
  c.mode = LoopMode::kOpen;
  c.rates = {1000};
  c.requests = 0;
  c.duration_s = 0.4;
  c.warmup_s = 0.1;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  // Intended times i / 1000 s falling in [0.1 s, 0.5 s): exactly 400.
  ExpectClean(*report, 400);
  // Sends are never early; a loaded machine may send the last ones late.
  EXPECT_NEAR(report->steps[0].server.offered_rate, 1000, 300);
}

TEST_F(LoadgenFakeServerTest, OpenLoopPoissonOverStreams) {
  LoadgenConfig c = BaseConfig(server_.address());
  c.mode = LoopMode::kOpen;
  c.arrival = ArrivalProcess::kPoisson;
  c.rpc = RpcKind::kStream;
  c.rates = {2000};
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectClean(*report, kRequestsPerStep);
  EXPECT_EQ(report->steps[0].server.spec.arrival, ArrivalProcess::kPoisson);
}

TEST_F(LoadgenFakeServerTest, FetchKvChecksEveryFetchedByte) {
  LoadgenConfig c = BaseConfig(server_.address());
  c.workload.fetch_kv_fraction = 1.0;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectClean(*report, kRequestsPerStep);
  const StepResult& r = report->steps[0].server;
  EXPECT_EQ(r.kv_fetches, r.ok);
  EXPECT_EQ(r.kv_fetch_latency.count(), r.ok);
  EXPECT_EQ(r.kv_fetch_errors, 0);
  EXPECT_EQ(correct_.live_handles(), 0);  // release_after on every fetch
}

TEST_F(LoadgenFakeServerTest, FetchKvSampleFetchesSomeAndReleasesTheRest) {
  LoadgenConfig c = BaseConfig(server_.address());
  c.workload.fetch_kv_fraction = 0.25;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectClean(*report, kRequestsPerStep);
  const StepResult& r = report->steps[0].server;
  EXPECT_EQ(r.kv_fetches + r.kv_released, r.ok);
  EXPECT_GT(r.kv_fetches, 20);
  EXPECT_LT(r.kv_fetches, 90);
  EXPECT_EQ(correct_.live_handles(), 0);
}

TEST_F(LoadgenFakeServerTest, InlineKvIsChecked) {
  LoadgenConfig c = BaseConfig(server_.address());
  c.workload.kv_return = KvReturnMode::kInline;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectClean(*report, kRequestsPerStep);
  EXPECT_EQ(report->steps[0].server.kv_released, 0);
}

TEST(LoadgenWrongAnswerTest, WrongNextTokenFailsTheRun) {
  FakeVerifier liar(FakeVerifierOptions{.wrong_next_token_every = 10});
  LoopbackServer server(&liar);
  LoadgenConfig c = BaseConfig(server.address());
  c.warmup_s = 0;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  const StepResult& r = report->steps[0].server;
  ExpectConsistent(r);
  EXPECT_EQ(r.ok, kRequestsPerStep);
  EXPECT_EQ(r.wrong_answers, kRequestsPerStep / 10);
  ASSERT_FALSE(r.wrong_answer_examples.empty());
  EXPECT_THAT(r.wrong_answer_examples[0], HasSubstr("next_token"));
  EXPECT_EQ(ExitCodeFor(*report), kExitWrongAnswers);
  EXPECT_THAT(FormatTable(*report), HasSubstr("20 WRONG ANSWERS"));
}

TEST(LoadgenWrongAnswerTest, WrongNextTokenOnAStreamFailsTheRun) {
  FakeVerifier liar(FakeVerifierOptions{.wrong_next_token_every = 7});
  LoopbackServer server(&liar);
  LoadgenConfig c = BaseConfig(server.address());
  c.rpc = RpcKind::kStream;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(report->steps[0].server.wrong_answers, 0);
  EXPECT_EQ(ExitCodeFor(*report), kExitWrongAnswers);
}

TEST(LoadgenWrongAnswerTest, CorruptFetchedKvFailsTheRun) {
  FakeVerifier liar(FakeVerifierOptions{.corrupt_fetch_every = 3});
  LoopbackServer server(&liar);
  LoadgenConfig c = BaseConfig(server.address());
  c.workload.fetch_kv_fraction = 1.0;
  c.workload.alpha = 1.0;  // every sequence keeps rows, so every fetch has bytes
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  const StepResult& r = report->steps[0].server;
  EXPECT_EQ(r.wrong_answers, 0);
  EXPECT_GT(r.kv_mismatches, 50);
  ASSERT_FALSE(r.wrong_answer_examples.empty());
  EXPECT_THAT(r.wrong_answer_examples[0], HasSubstr("fetched kv"));
  EXPECT_EQ(ExitCodeFor(*report), kExitWrongAnswers);
}

TEST(LoadgenCeilingTest, NoopCeilingAnswersAreUnverifiedNotWrong) {
  FakeVerifier correct(FakeVerifierOptions{});
  FakeVerifier noop(FakeVerifierOptions{.noop = true});
  LoopbackServer server(&correct);
  LoopbackServer ceiling(&noop);
  LoadgenConfig c = BaseConfig(server.address());
  c.ceiling_address = ceiling.address();
  c.concurrency = {2, 4};
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->has_ceiling);
  EXPECT_EQ(report->ceiling.backend, "noop");
  ExpectClean(*report, kRequestsPerStep);
  for (const StepPair& pair : report->steps) {
    ASSERT_TRUE(pair.has_ceiling);
    ExpectConsistent(pair.ceiling);
    EXPECT_EQ(pair.ceiling.unverified, pair.ceiling.ok);
    EXPECT_EQ(pair.ceiling.wrong_answers, 0);
    EXPECT_GT(ComputeCeilingRatio(pair).throughput_ratio, 0);
    EXPECT_GT(ComputeCeilingRatio(pair).p99_ratio, 0);
  }
  EXPECT_THAT(FormatTable(*report), HasSubstr("transport ceiling"));
}

TEST(LoadgenCeilingTest, UnverifiedAnswersFromAVerifyingBackendFailTheRun) {
  // Claims to be the CPU backend, answers like the no-op one.
  FakeVerifier impostor(FakeVerifierOptions{.noop = true, .backend = "cpu"});
  LoopbackServer server(&impostor);
  auto report = RunLoadgen(BaseConfig(server.address()));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->steps[0].server.unverified, kRequestsPerStep);
  EXPECT_EQ(report->steps[0].server.wrong_answers, 0);
  EXPECT_EQ(ExitCodeFor(*report), kExitWrongAnswers);
}

TEST(LoadgenCeilingTest, ADeclaredNoopServerUnderTestIsAnUnverifiedCeilingRun) {
  FakeVerifier noop(FakeVerifierOptions{.noop = true});
  LoopbackServer server(&noop);
  auto report = RunLoadgen(BaseConfig(server.address()));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->server.backend, "noop");
  EXPECT_EQ(report->steps[0].server.unverified, kRequestsPerStep);
  EXPECT_EQ(ExitCodeFor(*report), kExitOk);
  std::ostringstream out, err;
  EXPECT_EQ(RunLoadgenMain(BaseConfig(server.address()), out, err), kExitOk);
  EXPECT_THAT(out.str(), HasSubstr("no-op backend"));
}

// Coordinated omission: when the server is slow and the client cannot keep
// its schedule, latency must still count from the intended send time.
TEST(LoadgenOpenLoopTest, LatencyCountsFromTheIntendedSendTime) {
  FakeVerifier slow(FakeVerifierOptions{.delay_us = 20000});
  LoopbackServer server(&slow);
  LoadgenConfig c = BaseConfig(server.address());
  c.mode = LoopMode::kOpen;
  c.rates = {100};
  c.requests = 0;
  c.duration_s = 0.3;
  c.warmup_s = 0;
  c.max_outstanding = 1;  // the client can only send one request at a time
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  const StepResult& r = report->steps[0].server;
  ExpectConsistent(r);
  EXPECT_EQ(r.sent, 30);
  // 30 requests x 20 ms served one at a time take 0.6 s for a 0.3 s schedule:
  // the last is sent about 0.3 s late, and its latency says so.
  EXPECT_LT(r.service_time.ValueAtQuantile(0.5), 60'000'000);
  EXPECT_GT(r.send_lag.max(), 200'000'000);
  EXPECT_GT(r.latency.max(), 250'000'000);
  EXPECT_GT(r.latency.ValueAtQuantile(0.9), 3 * r.service_time.ValueAtQuantile(0.9));
}

TEST(LoadgenSetupTest, UnreachableServerIsASetupError) {
  LoadgenConfig c = BaseConfig("127.0.0.1:1");
  c.connect_timeout_s = 0.3;
  EXPECT_THAT(RunLoadgen(c).status(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("127.0.0.1:1")));
  std::ostringstream out, err;
  EXPECT_EQ(RunLoadgenMain(c, out, err), kExitSetupError);
  EXPECT_THAT(err.str(), HasSubstr("cannot connect"));
}

TEST(LoadgenSetupTest, ServerWithoutHealthServiceNeverBecomesServing) {
  FakeVerifier correct(FakeVerifierOptions{});
  LoopbackServer server(&correct);  // registers no grpc.health.v1 service
  LoadgenConfig c = BaseConfig(server.address());
  c.wait_for_serving_s = 0.3;
  EXPECT_THAT(RunLoadgen(c).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("not SERVING")));
}

// The executable, as a user runs it: its exit status is what CI scripts see.
int RunBinary(const std::string& args, std::string* output) {
  const std::string command = absl::StrCat(SPECVERIFY_LOADGEN_BINARY, " ", args, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(LoadgenBinaryTest, ExitsZeroOnACorrectServerAndWritesJsonAndCsv) {
  FakeVerifier correct(FakeVerifierOptions{});
  LoopbackServer server(&correct);
  const std::string dir = ::testing::TempDir();
  const std::string json = dir + "/loadgen_report.json";
  const std::string csv = dir + "/loadgen_report.csv";
  std::string output;
  const int code = RunBinary(
      absl::StrCat("--address=", server.address(),
                   " --concurrency=1,4 --requests=100 --warmup=0s --gamma=4:8 "
                   "--row-bytes=32 --fetch-kv --pool_requests=32 --json=", json, " --csv=", csv),
      &output);
  EXPECT_EQ(code, kExitOk) << output;
  EXPECT_THAT(output, HasSubstr("every checked answer matched the oracle"));
  std::ifstream json_file(json);
  std::stringstream json_text;
  json_text << json_file.rdbuf();
  EXPECT_THAT(json_text.str(), HasSubstr("\"wrong_answers\":0"));
  std::ifstream csv_file(csv);
  EXPECT_TRUE(csv_file.good());
}

TEST(LoadgenBinaryTest, ExitsNonZeroOnWrongAnswers) {
  FakeVerifier liar(FakeVerifierOptions{.wrong_next_token_every = 5});
  LoopbackServer server(&liar);
  std::string output;
  const int code = RunBinary(
      absl::StrCat("--address=", server.address(), " --concurrency=2 --requests=50 --warmup=0s"),
      &output);
  EXPECT_EQ(code, kExitWrongAnswers) << output;
  EXPECT_THAT(output, HasSubstr("WRONG ANSWERS"));
}

TEST(LoadgenBinaryTest, BadFlagIsASetupError) {
  std::string output;
  EXPECT_EQ(RunBinary("--address=127.0.0.1:1 --gamma=9:3", &output), kExitSetupError);
  EXPECT_THAT(output, HasSubstr("--gamma"));
  output.clear();
  EXPECT_EQ(RunBinary("--address=127.0.0.1:1 --connect-timeout=200ms", &output), kExitSetupError);
  EXPECT_THAT(output, HasSubstr("cannot connect"));
}

}  // namespace
}  // namespace specverify::loadgen
