// End to end: a real Prometheus server scrapes a running specverify-server
// (CPU backend) while the test drives greedy verification load through the
// client library; then Prometheus's HTTP API must give back the counters the
// test sent, the acceptance rate of the workload, a throughput and latency
// quantiles. This is what the dashboard and the alerts rely on.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/greedy_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/workload/greedy_workload.h"
#include "tests/metrics/child_process.h"
#include "tests/metrics/http_get.h"
#include "tests/metrics/promtool.h"
#include "tests/testing/status_matchers.h"

namespace specverify {
namespace {

using ::specverify::testing::ChildProcess;
using ::specverify::testing::HttpGet;
using ::specverify::testing::IsOk;
using ::specverify::testing::PickFreePort;
using ::testing::DoubleNear;

constexpr int kRequests = 48;
constexpr int kSequencesPerRequest = 2;
constexpr int kInvalidRequests = 3;  // answered INVALID_ARGUMENT, never executed
// Long enough for a few 1 s scrapes and the slowest start-up seen on 2 cores.
constexpr auto kWaitLimit = std::chrono::seconds(20);

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buffer[4];
      std::snprintf(buffer, sizeof(buffer), "%%%02X", c);
      out += buffer;
    }
  }
  return out;
}

// The single value of an instant query, e.g. sum(...). NOT_FOUND when the
// result is empty (series not scraped yet).
absl::StatusOr<double> QueryScalar(int prometheus_port, const std::string& promql) {
  auto response = HttpGet(prometheus_port, "/api/v1/query?query=" + UrlEncode(promql));
  if (!response.ok()) return response.status();
  if (response->status != 200) {
    return absl::InternalError(absl::StrCat("HTTP ", response->status, ": ", response->body));
  }
  static const std::regex kValue(R"re("value":\[[0-9.eE+-]+,"([^"]+)"\])re");
  std::smatch match;
  if (!std::regex_search(response->body, match, kValue)) {
    return absl::NotFoundError(absl::StrCat(promql, " -> ", response->body));
  }
  return std::stod(match[1].str());  // handles "NaN" and "+Inf" too
}

class PrometheusScrapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(SPECVERIFY_PROMETHEUS)) {
      GTEST_SKIP() << "no Prometheus server at '" << SPECVERIFY_PROMETHEUS
                   << "' (Debian package: prometheus)";
    }
    dir_ = ::testing::TempDir() + "/specverify_prometheus_scrape_" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/tsdb");
    grpc_port_ = PickFreePort();
    metrics_port_ = PickFreePort();
    prometheus_port_ = PickFreePort();
    ASSERT_TRUE(grpc_port_ > 0 && metrics_port_ > 0 && prometheus_port_ > 0);
  }

  void TearDown() override {
    client_.reset();  // no open channel for the server's drain to wait on
    prometheus_.Stop();
    server_.Stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void StartServer() {
    ASSERT_THAT(server_.Start({SPECVERIFY_SERVER_BINARY,
                               absl::StrCat("--listen-address=127.0.0.1:", grpc_port_),
                               absl::StrCat("--metrics-address=127.0.0.1:", metrics_port_),
                               "--device=cpu"},
                              dir_ + "/server.log"),
                IsOk());
    // Connect only once the server listens: a channel whose first connect is
    // refused backs off for seconds before it tries again.
    const auto give_up = std::chrono::steady_clock::now() + kWaitLimit;
    while (server_.Describe().find("listening on port") == std::string::npos) {
      ASSERT_TRUE(server_.Running()) << "server exited:\n" << server_.Describe();
      ASSERT_LT(std::chrono::steady_clock::now(), give_up) << server_.Describe();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    client::VerifierClientOptions options;
    options.address = absl::StrCat("127.0.0.1:", grpc_port_);
    options.default_deadline = absl::Seconds(5);
    auto client = client::VerifierClient::Create(options);
    ASSERT_THAT(client, IsOk());
    client_ = std::move(*client);
    while (true) {
      ASSERT_TRUE(server_.Running()) << "server exited:\n" << server_.Describe();
      auto serving = client_->CheckHealth();
      if (serving.ok() && *serving) break;
      ASSERT_LT(std::chrono::steady_clock::now(), give_up)
          << "server not SERVING: " << serving.status() << "\n" << server_.Describe();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  void StartPrometheus() {
    const std::string config = dir_ + "/prometheus.yml";
    std::ofstream(config) << "global:\n"
                          << "  scrape_interval: 1s\n"
                          << "  scrape_timeout: 900ms\n"
                          << "scrape_configs:\n"
                          << "  - job_name: specverify\n"
                          << "    static_configs:\n"
                          << "      - targets: ['127.0.0.1:" << metrics_port_ << "']\n";
    ASSERT_THAT(prometheus_.Start({SPECVERIFY_PROMETHEUS, "--config.file=" + config,
                                   "--storage.tsdb.path=" + dir_ + "/tsdb",
                                   absl::StrCat("--web.listen-address=127.0.0.1:",
                                                prometheus_port_),
                                   "--log.level=warn"},
                                  dir_ + "/prometheus.log"),
                IsOk());
  }

  // Polls `promql` until it equals `expected` (an instant query through the
  // HTTP API), failing with the last answer after kWaitLimit.
  void WaitForValue(const std::string& promql, double expected) {
    const auto give_up = std::chrono::steady_clock::now() + kWaitLimit;
    absl::StatusOr<double> value = absl::UnknownError("not queried");
    while (std::chrono::steady_clock::now() < give_up) {
      ASSERT_TRUE(prometheus_.Running()) << prometheus_.Describe();
      value = QueryScalar(prometheus_port_, promql);
      if (value.ok() && *value == expected) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    FAIL() << promql << " never became " << expected << "; last: "
           << (value.ok() ? std::to_string(*value) : value.status().ToString()) << "\n"
           << prometheus_.Describe() << "\n"
           << server_.Describe();
  }

  double Query(const std::string& promql) {
    auto value = QueryScalar(prometheus_port_, promql);
    EXPECT_THAT(value, IsOk()) << promql;
    return value.ok() ? *value : std::nan("");
  }

  std::string dir_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  int prometheus_port_ = 0;
  ChildProcess server_;
  ChildProcess prometheus_;
  std::unique_ptr<client::VerifierClient> client_;
};

TEST_F(PrometheusScrapeTest, CountersAcceptanceThroughputAndQuantilesComeBackFromPrometheus) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_NO_FATAL_FAILURE(StartPrometheus());
  // One scrape before any load, so that rate() sees the counters rise from 0.
  ASSERT_NO_FATAL_FAILURE(WaitForValue(R"(up{job="specverify"})", 1));

  GreedyWorkloadOptions workload_options;
  workload_options.num_sequences = kRequests * kSequencesPerRequest;
  workload_options.gamma_min = 4;
  workload_options.gamma_max = 12;
  workload_options.alpha = 0.7;
  workload_options.row_bytes = 64;
  workload_options.vocab_size = 1000;
  workload_options.seed = 6;
  auto workload = GenerateGreedyWorkload(workload_options);
  ASSERT_THAT(workload, IsOk());
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  for (int32_t i = 0; i < workload->num_sequences(); ++i) {
    draft_tokens += workload->gamma(i);
    accepted_tokens += workload->expected.accepted_lengths[i];
  }

  // Four client threads, so that the batcher sees concurrent requests.
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<absl::Status> failures(kRequests);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = t; r < kRequests; r += kThreads) {
        client::GreedyRequestOptions request_options;
        request_options.first_sequence = r * kSequencesPerRequest;
        request_options.num_sequences = kSequencesPerRequest;
        request_options.kv_return = v1::KV_RETURN_NONE;
        auto request = client::BuildGreedyRequest(*workload, request_options);
        if (!request.ok()) {
          failures[r] = request.status();
          continue;
        }
        auto response = client_->Verify(*request);
        if (!response.ok()) {
          failures[r] = response.status();
          continue;
        }
        client::GreedyCheckOptions check;
        check.first_sequence = request_options.first_sequence;
        check.num_sequences = kSequencesPerRequest;
        check.kv_return = v1::KV_RETURN_NONE;
        failures[r] = client::CheckGreedyResponse(*workload, check, *response);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int r = 0; r < kRequests; ++r) ASSERT_THAT(failures[r], IsOk()) << "request " << r;

  // Requests the server must refuse: a draft with no tokens.
  for (int i = 0; i < kInvalidRequests; ++i) {
    v1::VerifyRequest invalid;
    invalid.add_sequences();
    EXPECT_EQ(client_->Verify(invalid).status().code(), absl::StatusCode::kInvalidArgument);
  }

  // What Prometheus scraped equals what the test sent.
  ASSERT_NO_FATAL_FAILURE(WaitForValue(
      R"(sum(specverify_requests_total{job="specverify",rpc="Verify",code="OK"}))", kRequests));
  ASSERT_NO_FATAL_FAILURE(WaitForValue(
      R"(sum(specverify_requests_total{job="specverify",rpc="Verify",code="INVALID_ARGUMENT"}))",
      kInvalidRequests));
  EXPECT_EQ(Query(R"(sum(specverify_requests_rejected_total{job="specverify",reason="invalid"}))"),
            kInvalidRequests);
  EXPECT_EQ(Query(R"(sum(specverify_sequences_verified_total{job="specverify"}))"),
            workload->num_sequences());
  EXPECT_EQ(Query(R"(sum(specverify_draft_tokens_total{job="specverify"}))"), draft_tokens);
  EXPECT_EQ(Query(R"(sum(specverify_accepted_tokens_total{job="specverify"}))"),
            accepted_tokens);
  EXPECT_EQ(Query(R"(sum(specverify_request_duration_seconds_count{job="specverify",rpc="Verify"}))"),
            kRequests + kInvalidRequests);
  EXPECT_EQ(Query(R"(sum(specverify_queue_delay_seconds_count{job="specverify"}))"), kRequests);
  EXPECT_EQ(Query(R"(sum(specverify_batches_total{job="specverify",path="cpu"}))"),
            Query(R"(sum(specverify_batch_size_sequences_count{job="specverify"}))"));
  EXPECT_EQ(Query(R"(specverify_build_info{job="specverify",backend="cpu"})"), 1);

  // The dashboard's derived series are computable from what was scraped.
  EXPECT_THAT(Query(R"(sum(specverify_accepted_tokens_total{job="specverify"}) / )"
                    R"(sum(specverify_draft_tokens_total{job="specverify"}))"),
              DoubleNear(static_cast<double>(accepted_tokens) / draft_tokens, 1e-12));
  EXPECT_GT(Query(R"(sum(rate(specverify_requests_total{job="specverify",code="OK"}[1m])))"), 0);
  const std::string buckets =
      R"(sum by (le) (rate(specverify_request_duration_seconds_bucket{job="specverify",rpc="Verify"}[1m])))";
  const double p50 = Query("histogram_quantile(0.5, " + buckets + ")");
  const double p99 = Query("histogram_quantile(0.99, " + buckets + ")");
  EXPECT_TRUE(std::isfinite(p50) && std::isfinite(p99)) << "p50 " << p50 << " p99 " << p99;
  EXPECT_GT(p50, 0);
  EXPECT_LE(p50, p99);
  EXPECT_LT(p99, 5.0);  // the client's deadline: no answered request took longer
  // The live endpoint, exposer_* series included, passes Prometheus's linter.
  const std::string promtool = SPECVERIFY_PROMTOOL;
  if (!promtool.empty()) {
    auto live = HttpGet(metrics_port_, "/metrics");
    ASSERT_THAT(live, IsOk());
    EXPECT_EQ(live->status, 200);
    EXPECT_THAT(testing::PromtoolCheckMetrics(promtool, live->body), IsOk());
  }
  const double mean_batch =
      Query(R"(sum(specverify_batch_size_sequences_sum{job="specverify"}) / )"
            R"(sum(specverify_batch_size_sequences_count{job="specverify"}))");
  EXPECT_GE(mean_batch, kSequencesPerRequest);
  EXPECT_LE(mean_batch, workload->num_sequences());
}

}  // namespace
}  // namespace specverify
