// specverify-loadgen against the real specverify-server (CPU backend, and the
// no-op backend as the transport ceiling), each started as a child process on
// loopback: every mode answers every request correctly, the counts agree, the
// server's /metrics are joined in, and both servers drain with exit code 0.
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/loadgen/loadgen.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/loadgen/server_process.h"

namespace specverify::loadgen {
namespace {

using ::specverify::testing::PickFreeLoopbackPort;
using ::specverify::testing::ServerProcess;

// A few hundred requests per step: enough for every code path and a p99,
// about 0.1-0.3 s per step on one CPU core.
constexpr int64_t kRequestsPerStep = 300;

class LoadgenServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    metrics_port_ = PickFreeLoopbackPort();
    auto server = ServerProcess::Start(
        SPECVERIFY_SERVER_BINARY,
        {"--device=cpu", absl::StrCat("--metrics_address=127.0.0.1:", metrics_port_)});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = new ServerProcess(std::move(*server));
    auto noop = ServerProcess::Start(SPECVERIFY_SERVER_BINARY, {"--device=noop", "--metrics_address="});
    ASSERT_TRUE(noop.ok()) << noop.status();
    noop_ = new ServerProcess(std::move(*noop));
  }

  static void TearDownTestSuite() {
    // A clean drain on SIGTERM is part of the contract the demo relies on.
    for (ServerProcess** p : {&server_, &noop_}) {
      if (*p == nullptr) continue;
      absl::StatusOr<int> code = (*p)->Stop();
      EXPECT_TRUE(code.ok()) << code.status();
      if (code.ok()) {
        EXPECT_EQ(*code, 0);
      }
      delete *p;
      *p = nullptr;
    }
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(noop_, nullptr);
  }

  static LoadgenConfig BaseConfig() {
    LoadgenConfig c;
    c.address = server_->address();
    c.concurrency = {8};
    c.requests = kRequestsPerStep;
    c.warmup_s = 0.1;
    c.transport.deadline_ms = 10000;
    c.connect_timeout_s = 5;
    c.workload.gamma_min = c.workload.gamma_max = 8;
    c.workload.alpha = 0.6;
    c.workload.sequences_per_request = 4;
    c.workload.row_bytes = 512;
    c.workload.pool_requests = 128;
    return c;
  }

  static std::string MetricsUrl() {
    return absl::StrCat("http://127.0.0.1:", metrics_port_, "/metrics");
  }

  static ServerProcess* server_;
  static ServerProcess* noop_;
  static int metrics_port_;
};

ServerProcess* LoadgenServerTest::server_ = nullptr;
ServerProcess* LoadgenServerTest::noop_ = nullptr;
int LoadgenServerTest::metrics_port_ = 0;

void ExpectCorrectAndConsistent(const RunReport& report, int64_t expected_sent_per_step,
                                int32_t sequences_per_request) {
  ASSERT_FALSE(report.steps.empty());
  for (const StepPair& pair : report.steps) {
    const StepResult& r = pair.server;
    EXPECT_EQ(r.sent, r.ok + r.rpc_errors);
    EXPECT_EQ(r.latency.count(), r.ok);
    EXPECT_EQ(r.send_lag.count(), r.sent);
    if (expected_sent_per_step > 0) {
      EXPECT_EQ(r.sent, expected_sent_per_step);
    }
    EXPECT_EQ(r.rpc_errors, 0) << (r.error_examples.empty() ? "" : r.error_examples[0]);
    EXPECT_EQ(r.ok, r.sent);
    EXPECT_EQ(r.wrong_answers, 0)
        << (r.wrong_answer_examples.empty() ? "" : r.wrong_answer_examples[0]);
    EXPECT_EQ(r.kv_mismatches, 0);
    EXPECT_EQ(r.kv_fetch_errors, 0) << (r.error_examples.empty() ? "" : r.error_examples[0]);
    EXPECT_EQ(r.unverified, 0);
    EXPECT_EQ(r.sequences, int64_t{sequences_per_request} * r.ok);
    // The server's timing block is filled for every answer.
    EXPECT_EQ(r.server_queue.count(), r.ok);
    // Its stages in order: queue <= submit <= complete <= total.
    ASSERT_EQ(r.server_complete.count(), r.ok);
    if (r.ok > 0) {
      EXPECT_LE(r.server_queue.ValueAtQuantile(0.5), r.server_submit.ValueAtQuantile(0.5));
      EXPECT_LE(r.server_submit.ValueAtQuantile(0.5), r.server_complete.ValueAtQuantile(0.5));
      EXPECT_LE(r.server_complete.ValueAtQuantile(0.5), r.server_time.ValueAtQuantile(0.5));
    }
  }
  EXPECT_EQ(report.server.backend, "cpu");
  EXPECT_EQ(ExitCodeFor(report), kExitOk);
}

TEST_F(LoadgenServerTest, ClosedLoopUnaryWithMetrics) {
  LoadgenConfig c = BaseConfig();
  c.concurrency = {1, 8};
  c.metrics_url = MetricsUrl();
  c.wait_for_serving_s = 10;  // the server registers grpc.health.v1
  // The "before" scrape starts when the warm-up ends, on its own thread; 300
  // requests can all be answered before that scrape returns on a loaded
  // machine (an empty delta), more so since the batcher dispatches at once.
  // A duration is no cure (one stalled request can leave nothing measured);
  // many requests are.
  constexpr int64_t kRequestsAroundScrapes = 2000;
  c.requests = kRequestsAroundScrapes;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, kRequestsAroundScrapes, 4);
  for (const StepPair& pair : report->steps) {
    // Acceptance of Binomial(8, 0.6) drafts: 0.6 within sampling noise.
    EXPECT_NEAR(pair.server.acceptance(), 0.6, 0.05);
    EXPECT_TRUE(pair.server.metrics.scraped) << pair.server.metrics.error;
    EXPECT_TRUE(pair.server.metrics.has_queue_delay);
    EXPECT_TRUE(pair.server.metrics.has_device_time);
    EXPECT_GT(pair.server.metrics.batches, 0);
    // Every handle was released (no fetch asked for).
    EXPECT_EQ(pair.server.kv_released, pair.server.ok);
  }
}

TEST_F(LoadgenServerTest, ClosedLoopStreamOverTwoChannels) {
  LoadgenConfig c = BaseConfig();
  c.rpc = RpcKind::kStream;
  c.channels = 2;
  c.concurrency = {16};
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, kRequestsPerStep, 4);
}

TEST_F(LoadgenServerTest, OpenLoopConstantRate) {
  LoadgenConfig c = BaseConfig();
  c.mode = LoopMode::kOpen;
  c.rates = {500};
  c.requests = 0;
  c.duration_s = 0.4;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  // Intended send times i / 500 s inside [0.1 s, 0.5 s): exactly 200.
  ExpectCorrectAndConsistent(*report, 200, 4);
}

TEST_F(LoadgenServerTest, OpenLoopPoissonOverAStream) {
  LoadgenConfig c = BaseConfig();
  c.mode = LoopMode::kOpen;
  c.arrival = ArrivalProcess::kPoisson;
  c.rpc = RpcKind::kStream;
  c.rates = {1000};
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, kRequestsPerStep, 4);
}

TEST_F(LoadgenServerTest, FetchKvOfEveryAnswerMatchesTheOracle) {
  LoadgenConfig c = BaseConfig();
  c.workload.fetch_kv_fraction = 1.0;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, kRequestsPerStep, 4);
  const StepResult& r = report->steps[0].server;
  // Answers whose sequences all kept 0 rows have nothing to fetch and are
  // released instead; with alpha 0.6 and 4 x 8 drafts that is very rare.
  EXPECT_EQ(r.kv_fetches + r.kv_released, r.ok);
  EXPECT_GT(r.kv_fetches, r.ok * 9 / 10);
}

TEST_F(LoadgenServerTest, InlineKvAndRaggedGamma) {
  LoadgenConfig c = BaseConfig();
  c.workload.kv_return = KvReturnMode::kInline;
  c.workload.gamma_min = 1;
  c.workload.gamma_max = 32;
  c.workload.sequences_per_request = 7;
  c.workload.row_bytes = 100;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, kRequestsPerStep, 7);
}

TEST_F(LoadgenServerTest, TransportCeilingAgainstTheNoopServer) {
  LoadgenConfig c = BaseConfig();
  c.ceiling_address = noop_->address();
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, kRequestsPerStep, 4);
  ASSERT_TRUE(report->has_ceiling);
  EXPECT_EQ(report->ceiling.backend, "noop");
  const StepPair& pair = report->steps[0];
  ASSERT_TRUE(pair.has_ceiling);
  EXPECT_EQ(pair.ceiling.sent, kRequestsPerStep);
  EXPECT_EQ(pair.ceiling.ok, pair.ceiling.sent);
  EXPECT_EQ(pair.ceiling.unverified, pair.ceiling.ok);  // unverified, not wrong
  EXPECT_EQ(pair.ceiling.wrong_answers, 0);
  const CeilingRatio ratio = ComputeCeilingRatio(pair);
  EXPECT_GT(ratio.throughput_ratio, 0);
  EXPECT_GT(ratio.p99_ratio, 0);
  // The server's limits come with GetServerInfo, so the report can judge the
  // service target (met or missed depends on the machine, not asserted).
  EXPECT_GE(report->server.max_queue_delay_us, 0);
  EXPECT_THAT(FormatJson(*report), ::testing::HasSubstr("\"meets_target\":"));
}

// Raw gRPC, the no-op and another verifying server side by side (issue
// #12): the raw ceiling's answers are unverified, its placeholder handles are
// never fetched (a fetch would fail NOT_FOUND and count as an error), and the
// compare server's answers are checked like the server's.
TEST_F(LoadgenServerTest, RawCeilingNoopAndACompareServerSideBySide) {
  LoadgenConfig c = BaseConfig();
  c.ceiling_address = noop_->address();
  c.raw_ceiling = true;
  // The same CPU server again, reached as a compare target: checked alike.
  c.compare_addresses = {{"cpu2", server_->address()}};
  c.workload.kv_return = KvReturnMode::kHandle;
  c.workload.fetch_kv_fraction = 1.0;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, kRequestsPerStep, 4);
  const StepPair& pair = report->steps[0];
  ASSERT_TRUE(pair.has_raw);
  EXPECT_EQ(pair.raw.target, "raw");
  EXPECT_EQ(pair.raw.ok, kRequestsPerStep);
  EXPECT_EQ(pair.raw.rpc_errors, 0);
  EXPECT_EQ(pair.raw.unverified, pair.raw.ok);
  EXPECT_EQ(pair.raw.kv_fetches + pair.raw.kv_fetch_errors, 0);
  // The no-op ceiling's handles are real: fetched and released like the server's.
  EXPECT_EQ(pair.ceiling.kv_fetches, kRequestsPerStep);
  EXPECT_EQ(pair.ceiling.kv_fetch_errors, 0);
  ASSERT_EQ(pair.compare.size(), 1u);
  EXPECT_EQ(pair.compare[0].target, "cpu2");
  EXPECT_EQ(pair.compare[0].ok, kRequestsPerStep);
  EXPECT_EQ(pair.compare[0].unverified, 0);
  EXPECT_EQ(pair.compare[0].kv_fetches, kRequestsPerStep);
  EXPECT_EQ(report->total_wrong_answers(), 0);
  EXPECT_THAT(FormatTable(*report), ::testing::HasSubstr("service overhead vs raw gRPC"));
}

}  // namespace
}  // namespace specverify::loadgen

namespace specverify::loadgen {
namespace {

// The loadgen as a co-located worker (issue #13): payload in a shared-memory
// region it registers with both servers, packed rows returned into it; every
// answer checked from the region's bytes; only references on the wire.
TEST_F(LoadgenServerTest, SharedMemoryTransportWithRowsReturnedIntoTheRegion) {
  LoadgenConfig c = BaseConfig();
  c.ceiling_address = noop_->address();
  c.workload.transport = Transport::kShm;
  c.workload.kv_return = KvReturnMode::kRegion;
  c.workload.gamma_min = 1;
  c.workload.gamma_max = 12;
  c.workload.row_bytes = 4096;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, kRequestsPerStep, 4);
  EXPECT_EQ(report->steps[0].ceiling.ok, kRequestsPerStep);
  // Tokens and references only: far below the rows' 4 x 12 x 4 KiB.
  EXPECT_GT(report->request_wire_bytes, 0);
  EXPECT_LT(report->request_wire_bytes, 2048);
  EXPECT_THAT(FormatTable(*report), ::testing::HasSubstr("transport=shm"));
}

TEST_F(LoadgenServerTest, SampledRowsInSharedMemory) {
  LoadgenConfig c = BaseConfig();
  c.workload.mode = WorkloadMode::kSampled;
  c.workload.transport = Transport::kShm;
  c.workload.kv_return = KvReturnMode::kRegion;
  c.workload.vocab_size = 4096;
  c.workload.row_bytes = 64;
  c.workload.pool_requests = 16;
  c.requests = 100;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, 100, 4);
}

// Token trees (issue #14): greedy trees with every handle's rows fetched
// and compared, sampled trees against the CPU reference.
TEST_F(LoadgenServerTest, TreeDraftsGreedyAndSampled) {
  LoadgenConfig c = BaseConfig();
  c.workload.tree = "2x3";
  c.workload.alpha = 0.7;
  c.workload.fetch_kv_fraction = 1.0;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, kRequestsPerStep, 4);
  EXPECT_GT(report->steps[0].server.accepted_tokens, 0);
  EXPECT_THAT(FormatTable(*report), ::testing::HasSubstr("tree=2x3"));

  LoadgenConfig s = BaseConfig();
  s.workload.mode = WorkloadMode::kSampled;
  s.workload.tree = "random:12";
  s.workload.vocab_size = 512;
  s.workload.row_bytes = 0;
  s.workload.kv_return = KvReturnMode::kNone;
  s.workload.pool_requests = 16;
  s.requests = 100;
  auto sampled = RunLoadgen(s);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  ExpectCorrectAndConsistent(*sampled, 100, 4);

  LoadgenConfig bad = BaseConfig();
  bad.workload.tree = "3y2";
  EXPECT_THAT(RunLoadgen(bad).status().message(), ::testing::HasSubstr("WIDTHxDEPTH"));
}

// Sampled trees carry a KV row per node (--row_bytes): answered as handles
// whose rows are all fetched and compared node by node along the
// reference's path, and with everything in shared memory, answered into it.
TEST_F(LoadgenServerTest, SampledTreeRowsAsHandlesAndIntoARegion) {
  for (const bool region : {false, true}) {
    SCOPED_TRACE(region ? "shm, rows into the region" : "inline, rows as handles");
    LoadgenConfig c = BaseConfig();
    c.workload.mode = WorkloadMode::kSampled;
    c.workload.tree = "random:10";
    c.workload.vocab_size = 256;
    c.workload.row_bytes = 48;
    c.workload.pool_requests = 8;
    if (region) {
      c.workload.transport = Transport::kShm;
      c.workload.kv_return = KvReturnMode::kRegion;
    } else {
      c.workload.kv_return = KvReturnMode::kHandle;
      c.workload.fetch_kv_fraction = 1.0;
    }
    c.requests = 60;
    auto report = RunLoadgen(c);
    ASSERT_TRUE(report.ok()) << report.status();
    ExpectCorrectAndConsistent(*report, 60, 4);
    const StepResult& r = report->steps[0].server;
    EXPECT_GT(r.accepted_tokens, 0);
    if (!region) {
      EXPECT_EQ(r.kv_fetches + r.kv_released, r.ok);
      EXPECT_GT(r.kv_fetches, r.ok / 2);  // answers with at least one row kept were fetched
    }
  }
}

// --region_copies: two pool entries laid out four times serve eight
// requests in flight, each reading its rows from, and getting its packed
// rows into, its own copy; every answer is checked from its copy's bytes.
TEST_F(LoadgenServerTest, RegionCopiesGiveEveryRequestInFlightItsOwnRows) {
  LoadgenConfig c = BaseConfig();
  c.workload.transport = Transport::kShm;
  c.workload.kv_return = KvReturnMode::kRegion;
  c.workload.pool_requests = 2;
  c.workload.region_copies = 4;
  c.concurrency = {8};
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, kRequestsPerStep, 4);

  LoadgenConfig s = BaseConfig();
  s.workload.mode = WorkloadMode::kSampled;
  s.workload.transport = Transport::kShm;
  s.workload.kind = SampleValueKind::kLogits;
  s.workload.vocab_size = 1024;
  s.workload.row_bytes = 0;
  s.workload.kv_return = KvReturnMode::kNone;
  s.workload.pool_requests = 1;
  s.workload.region_copies = 3;
  s.requests = 60;
  auto sampled = RunLoadgen(s);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  ExpectCorrectAndConsistent(*sampled, 60, 4);
}

TEST_F(LoadgenServerTest, RegionReturnNeedsARegionTransportAndEnoughPoolEntries) {
  LoadgenConfig c = BaseConfig();
  c.workload.kv_return = KvReturnMode::kRegion;
  EXPECT_THAT(RunLoadgen(c).status().message(), ::testing::HasSubstr("--transport"));
  c.workload.transport = Transport::kShm;
  c.concurrency = {256};
  EXPECT_THAT(RunLoadgen(c).status().message(), ::testing::HasSubstr("pool_requests"));
  c.workload.region_copies = 2;  // 128 entries x 2 copies: enough
  c.requests = 300;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, 300, 4);
}

// A server driving two executors (issue #16; two CPU executors stand in for
// two GPUs): the loadgen's answers, handle rows fetched from whichever device
// holds them, are all right, both devices answered, and the server drains
// with exit code 0.
TEST(LoadgenMultiDeviceTest, TwoExecutorsShareTheLoadAndEveryAnswerIsRight) {
  auto server = ServerProcess::Start(SPECVERIFY_SERVER_BINARY,
                                     {"--device=cpu:0,1", "--cpu_threads=1", "--metrics_address="});
  ASSERT_TRUE(server.ok()) << server.status();
  LoadgenConfig c;
  c.address = server->address();
  c.concurrency = {8};
  c.requests = 600;
  c.warmup_s = 0.1;
  c.transport.deadline_ms = 10000;
  c.connect_timeout_s = 5;
  c.workload.gamma_min = c.workload.gamma_max = 8;
  c.workload.alpha = 0.6;
  c.workload.sequences_per_request = 4;
  c.workload.row_bytes = 512;
  c.workload.pool_requests = 128;
  c.workload.fetch_kv_fraction = 1.0;
  auto report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, 600, 4);
  const StepResult& r = report->steps[0].server;
  ASSERT_EQ(r.answers_by_device.size(), 2u);
  EXPECT_GT(r.answers_by_device.at(0), 0);
  EXPECT_GT(r.answers_by_device.at(1), 0);
  EXPECT_EQ(r.answers_by_device.at(0) + r.answers_by_device.at(1), r.ok);
  EXPECT_THAT(FormatTable(*report), ::testing::HasSubstr("answers by device 0:"));
  EXPECT_THAT(FormatJson(*report), ::testing::HasSubstr("\"answers_by_device\":{\"0\":"));
  absl::StatusOr<int> code = server->Stop();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

// Streams through a restart of their only server: SIGTERM (the server
// drains, then ends its streams UNAVAILABLE) and a new process on the same
// port. With --resend_unanswered every request, sent before, during or after
// the gap, is answered once and right, and the step runs to its end. KV rows
// come back inline: a handle lives in the old process's arena, and a
// ReleaseKv caught by its shutdown fails CANCELLED (as it should).
TEST(LoadgenStreamRestartTest, ResendingStreamsRideThroughARestartOfTheServer) {
  const std::vector<std::string> args = {"--device=cpu", "--metrics_address=",
                                         absl::StrCat("--listen_address=127.0.0.1:", PickFreeLoopbackPort())};
  auto first = ServerProcess::Start(SPECVERIFY_SERVER_BINARY, args);
  ASSERT_TRUE(first.ok()) << first.status();
  LoadgenConfig c;
  c.address = first->address();
  c.rpc = RpcKind::kStream;
  c.channels = 2;
  c.concurrency = {8};
  c.duration_s = 3;
  c.warmup_s = 0;
  c.resend_unanswered = 20;
  c.transport.deadline_ms = 10000;
  c.connect_timeout_s = 5;
  c.workload.gamma_min = c.workload.gamma_max = 8;
  c.workload.sequences_per_request = 4;
  c.workload.row_bytes = 512;
  c.workload.pool_requests = 128;
  c.workload.kv_return = KvReturnMode::kInline;
  absl::StatusOr<RunReport> report;
  std::thread loadgen([&] { report = RunLoadgen(c); });
  absl::SleepFor(absl::Milliseconds(800));
  absl::StatusOr<int> first_code = first->Stop();
  auto second = ServerProcess::Start(SPECVERIFY_SERVER_BINARY, args);
  loadgen.join();
  ASSERT_TRUE(first_code.ok()) << first_code.status();
  EXPECT_EQ(*first_code, 0);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(report.ok()) << report.status();
  ExpectCorrectAndConsistent(*report, 0, 4);
  EXPECT_GT(report->steps[0].server.ok, 100);
  absl::StatusOr<int> second_code = second->Stop();
  ASSERT_TRUE(second_code.ok()) << second_code.status();
  EXPECT_EQ(*second_code, 0);
}

}  // namespace
}  // namespace specverify::loadgen
