#include "server/metrics/prometheus_metrics.h"

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/metrics/exercise_events.h"
#include "tests/metrics/exposition_parser.h"
#include "tests/metrics/http_get.h"
#include "tests/metrics/promtool.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::testing::ExerciseEveryEvent;
using ::specverify::testing::FindSample;
using ::specverify::testing::HttpGet;
using ::specverify::testing::IsOk;
using ::specverify::testing::ParseExposition;
using ::specverify::testing::Sample;
using ::specverify::testing::SamplesNamed;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Optional;
using ::testing::DoubleNear;

// Not one of the fixed queue-delay boundaries, so the test sees the inserted one.
constexpr absl::Duration kMaxQueueDelay = absl::Microseconds(250);

std::unique_ptr<PrometheusServerMetrics> StartUnserved(
    absl::Duration max_queue_delay = kMaxQueueDelay) {
  PrometheusMetricsOptions options;
  options.listen_address = "";
  options.max_queue_delay = max_queue_delay;
  auto metrics = PrometheusServerMetrics::Start(options);
  EXPECT_THAT(metrics, IsOk());
  if (!metrics.ok()) return nullptr;
  (*metrics)->SetDevices({"cuda:0", "cuda:1"});
  return std::move(*metrics);
}

std::vector<Sample> Scrape(const PrometheusServerMetrics& metrics) {
  return ParseExposition(metrics.ExpositionText());
}

TEST(PrometheusServerMetricsTest, RequestsAreCountedByRpcAndCode) {
  auto metrics = StartUnserved();
  for (int i = 0; i < 3; ++i) {
    metrics->OnRequestFinished(RpcMethod::kVerify, absl::StatusCode::kOk, absl::Microseconds(120));
  }
  metrics->OnRequestFinished(RpcMethod::kVerify, absl::StatusCode::kResourceExhausted,
                             absl::Microseconds(30));
  metrics->OnRequestFinished(RpcMethod::kVerifyStream, absl::StatusCode::kOk,
                             absl::Milliseconds(2));

  const auto samples = Scrape(*metrics);
  EXPECT_THAT(FindSample(samples, "specverify_requests_total", {{"rpc", "Verify"}, {"code", "OK"}}),
              Optional(3.0));
  EXPECT_THAT(FindSample(samples, "specverify_requests_total",
                         {{"rpc", "Verify"}, {"code", "RESOURCE_EXHAUSTED"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_requests_total",
                         {{"rpc", "VerifyStream"}, {"code", "OK"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_requests_total",
                         {{"rpc", "FetchKv"}, {"code", "OK"}}),
              Optional(0.0));
  // Latency: 3 x 120 us + 30 us, all at or under 150 us, none under 25 us.
  EXPECT_THAT(FindSample(samples, "specverify_request_duration_seconds_count", {{"rpc", "Verify"}}),
              Optional(4.0));
  EXPECT_THAT(FindSample(samples, "specverify_request_duration_seconds_sum", {{"rpc", "Verify"}}),
              Optional(DoubleNear(390e-6, 1e-12)));
  EXPECT_THAT(FindSample(samples, "specverify_request_duration_seconds_bucket",
                         {{"rpc", "Verify"}, {"le", "0.00015"}}),
              Optional(4.0));
  EXPECT_THAT(FindSample(samples, "specverify_request_duration_seconds_bucket",
                         {{"rpc", "Verify"}, {"le", "0.0001"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_request_duration_seconds_bucket",
                         {{"rpc", "Verify"}, {"le", "2.5e-05"}}),
              Optional(0.0));
  EXPECT_THAT(FindSample(samples, "specverify_request_duration_seconds_bucket",
                         {{"rpc", "VerifyStream"}, {"le", "0.002"}}),
              Optional(1.0));
}

TEST(PrometheusServerMetricsTest, CodeOutsideAbslRangeIsCountedAsUnknown) {
  auto metrics = StartUnserved();
  metrics->OnRequestFinished(RpcMethod::kGetServerInfo, static_cast<absl::StatusCode>(99),
                             absl::Microseconds(5));
  EXPECT_THAT(FindSample(Scrape(*metrics), "specverify_requests_total",
                         {{"rpc", "GetServerInfo"}, {"code", "UNKNOWN"}}),
              Optional(1.0));
}

TEST(PrometheusServerMetricsTest, QueueDelayHasABucketBoundaryExactlyAtMaxQueueDelay) {
  auto metrics = StartUnserved(kMaxQueueDelay);
  const double boundary = absl::ToDoubleSeconds(kMaxQueueDelay);
  const auto& buckets = metrics->queue_delay_buckets_seconds();
  EXPECT_EQ(std::count(buckets.begin(), buckets.end(), boundary), 1);
  EXPECT_TRUE(std::is_sorted(buckets.begin(), buckets.end()));
  const auto& latency = metrics->latency_buckets_seconds();
  EXPECT_EQ(std::count(latency.begin(), latency.end(), boundary), 1);

  // A request held for exactly the batching budget lands in that bucket
  // (le is inclusive), one held 1 us longer does not.
  metrics->OnQueueDelay(kMaxQueueDelay);
  metrics->OnQueueDelay(kMaxQueueDelay + absl::Microseconds(1));
  const auto samples = Scrape(*metrics);
  EXPECT_THAT(FindSample(samples, "specverify_queue_delay_seconds_bucket", {{"le", "0.00025"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_queue_delay_seconds_bucket", {{"le", "0.0002"}}),
              Optional(0.0));
  EXPECT_THAT(FindSample(samples, "specverify_queue_delay_seconds_bucket", {{"le", "0.0003"}}),
              Optional(2.0));
  EXPECT_THAT(FindSample(samples, "specverify_queue_delay_seconds_count"), Optional(2.0));
}

TEST(PrometheusServerMetricsTest, MaxQueueDelayOnAFixedBoundaryIsNotDuplicated) {
  auto at_fixed = StartUnserved(absl::Microseconds(200));  // 200e-6 is a fixed boundary
  auto off_fixed = StartUnserved(absl::Microseconds(250));
  EXPECT_EQ(at_fixed->queue_delay_buckets_seconds().size() + 1,
            off_fixed->queue_delay_buckets_seconds().size());
  const auto samples = Scrape(*at_fixed);
  EXPECT_THAT(FindSample(samples, "specverify_queue_delay_seconds_bucket", {{"le", "0.0002"}}),
              Optional(0.0));
}

TEST(PrometheusServerMetricsTest, EveryBucketBoundaryPrintsInShortForm) {
  // prometheus-cpp prints 16 significant digits; a boundary such as 75e-6
  // would read "7.499999999999999e-05" and no PromQL le="..." would match it.
  auto metrics = StartUnserved();
  ExerciseEveryEvent(*metrics);
  int bucket_samples = 0;
  for (const Sample& s : Scrape(*metrics)) {
    auto le = s.labels.find("le");
    if (le == s.labels.end()) continue;
    ++bucket_samples;
    EXPECT_LE(le->second.size(), 10u) << s.name << " le=" << le->second;
    EXPECT_EQ(le->second.find("999"), std::string::npos) << s.name << " le=" << le->second;
  }
  EXPECT_GT(bucket_samples, 100);
}

TEST(PrometheusServerMetricsTest, BatchesFeedTokensPathsSizesAndExactness) {
  auto metrics = StartUnserved();
  BatchReport fused;
  fused.path = ExecutionPathLabel::kFused;
  fused.sequences = 32;
  fused.requests = 5;
  fused.input_bytes = 3000;
  fused.draft_tokens = 256;
  fused.accepted_tokens = 200;
  fused.packed_kv_bytes = 200 * 4096;
  fused.device_time = absl::Microseconds(5);
  metrics->OnBatchExecuted(fused);
  BatchReport sigmoid;
  sigmoid.path = ExecutionPathLabel::kSampling;
  sigmoid.sequences = 3;
  sigmoid.requests = 1;
  sigmoid.input_bytes = 2'000'000;
  sigmoid.draft_tokens = 24;
  sigmoid.accepted_tokens = 10;
  sigmoid.device_time = absl::Microseconds(40);
  sigmoid.exact = false;
  metrics->OnBatchExecuted(sigmoid);

  const auto samples = Scrape(*metrics);
  EXPECT_THAT(FindSample(samples, "specverify_draft_tokens_total"), Optional(280.0));
  EXPECT_THAT(FindSample(samples, "specverify_accepted_tokens_total"), Optional(210.0));
  EXPECT_THAT(FindSample(samples, "specverify_sequences_verified_total"), Optional(35.0));
  EXPECT_THAT(FindSample(samples, "specverify_non_exact_sequences_total"), Optional(3.0));
  EXPECT_THAT(FindSample(samples, "specverify_packed_kv_bytes_total"), Optional(819200.0));
  EXPECT_THAT(FindSample(samples, "specverify_batches_total", {{"device", "cuda:0"}, {"path", "fused"}}), Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_batches_total", {{"device", "cuda:0"}, {"path", "sampling"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_batches_total", {{"device", "cuda:0"}, {"path", "two_step"}}),
              Optional(0.0));
  EXPECT_THAT(FindSample(samples, "specverify_batches_total",
                         {{"device", "cuda:0"}, {"path", "host_decided"}}),
              Optional(0.0));
  EXPECT_THAT(FindSample(samples, "specverify_batch_device_seconds_bucket",
                         {{"device", "cuda:0"}, {"path", "fused"}, {"le", "6e-06"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_batch_device_seconds_bucket",
                         {{"device", "cuda:0"}, {"path", "sampling"}, {"le", "3e-05"}}),
              Optional(0.0));
  EXPECT_THAT(FindSample(samples, "specverify_batch_device_seconds_count", {{"device", "cuda:0"}, {"path", "sampling"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_batch_size_sequences_bucket", {{"le", "32"}}),
              Optional(2.0));
  EXPECT_THAT(FindSample(samples, "specverify_batch_size_sequences_bucket", {{"le", "16"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_batch_size_sequences_sum"), Optional(35.0));
  EXPECT_THAT(FindSample(samples, "specverify_batch_size_requests_sum"), Optional(6.0));
  EXPECT_THAT(FindSample(samples, "specverify_batch_size_bytes_sum"), Optional(2'003'000.0));
  EXPECT_THAT(FindSample(samples, "specverify_batch_size_bytes_bucket", {{"le", "4096"}}),
              Optional(1.0));
}

TEST(PrometheusServerMetricsTest, RejectionsAreCountedByReason) {
  auto metrics = StartUnserved();
  metrics->OnRequestRejected(RejectReason::kQueueFull);
  metrics->OnRequestRejected(RejectReason::kQueueFull);
  metrics->OnRequestRejected(RejectReason::kArenaFull);
  metrics->OnRequestRejected(RejectReason::kShutdown);
  metrics->OnRequestRejected(RejectReason::kBatchTooLarge);
  metrics->OnRequestRejected(RejectReason::kClientQueueLimit);
  metrics->OnRequestRejected(RejectReason::kClientArenaQuota);
  metrics->OnRequestRejected(RejectReason::kClientArenaQuota);
  const auto samples = Scrape(*metrics);
  EXPECT_THAT(FindSample(samples, "specverify_requests_rejected_total", {{"reason", "queue_full"}}),
              Optional(2.0));
  EXPECT_THAT(FindSample(samples, "specverify_requests_rejected_total", {{"reason", "arena_full"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_requests_rejected_total", {{"reason", "shutdown"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_requests_rejected_total", {{"reason", "invalid"}}),
              Optional(0.0));
  EXPECT_THAT(FindSample(samples, "specverify_requests_rejected_total",
                         {{"reason", "batch_too_large"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_requests_rejected_total",
                         {{"reason", "client_queue_limit"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_requests_rejected_total",
                         {{"reason", "client_arena_quota"}}),
              Optional(2.0));
  // One series per reason, never per client.
  EXPECT_EQ(SamplesNamed(samples, "specverify_requests_rejected_total").size(), 9u);
}

TEST(PrometheusServerMetricsTest, ArenaLargestFreeExtentIsAGauge) {
  auto metrics = StartUnserved();
  metrics->SetArenaLargestFreeExtent(0, 35840);
  metrics->SetArenaLargestFreeExtent(0, 1 << 20);
  EXPECT_THAT(FindSample(Scrape(*metrics), "specverify_kv_arena_largest_free_extent_bytes",
                         {{"device", "cuda:0"}}),
              Optional(1048576.0));
}

TEST(PrometheusServerMetricsTest, PayloadHostCopiesAreCountedByDirection) {
  auto metrics = StartUnserved();
  metrics->OnPayloadHostCopy(HostCopyDirection::kIn, 4096);
  metrics->OnPayloadHostCopy(HostCopyDirection::kIn, 100);
  metrics->OnPayloadHostCopy(HostCopyDirection::kOut, 512);
  metrics->OnPayloadHostCopy(HostCopyDirection::kOut, 0);
  const auto samples = Scrape(*metrics);
  EXPECT_THAT(FindSample(samples, "specverify_payload_host_copy_bytes_total",
                         {{"direction", "in"}}),
              Optional(4196.0));
  EXPECT_THAT(FindSample(samples, "specverify_payload_host_copy_bytes_total",
                         {{"direction", "out"}}),
              Optional(512.0));
}

TEST(PrometheusServerMetricsTest, GaugesHoldTheLastValueAndCountersAccumulate) {
  auto metrics = StartUnserved();
  metrics->SetQueuedSequences(40);
  metrics->SetQueuedSequences(7);
  metrics->SetInFlightSequences(64);
  metrics->SetArenaUsage(0, 1 << 20, 1 << 30, 3);
  metrics->SetArenaUsage(0, 2 << 20, 1 << 30, 5);
  metrics->OnHandlesExpired(2);
  metrics->OnHandlesExpired(3);
  metrics->OnDeviceError(0);
  EXPECT_THAT(FindSample(Scrape(*metrics), "specverify_serving"), Optional(0.0));
  metrics->SetServing(true);
  EXPECT_THAT(FindSample(Scrape(*metrics), "specverify_serving"), Optional(1.0));
  metrics->SetServing(false);
  const auto samples = Scrape(*metrics);
  EXPECT_THAT(FindSample(samples, "specverify_serving"), Optional(0.0));
  EXPECT_THAT(FindSample(samples, "specverify_queued_sequences"), Optional(7.0));
  EXPECT_THAT(FindSample(samples, "specverify_in_flight_sequences"), Optional(64.0));
  EXPECT_THAT(FindSample(samples, "specverify_kv_arena_used_bytes", {{"device", "cuda:0"}}), Optional(2097152.0));
  EXPECT_THAT(FindSample(samples, "specverify_kv_arena_capacity_bytes", {{"device", "cuda:0"}}), Optional(1073741824.0));
  EXPECT_THAT(FindSample(samples, "specverify_kv_live_handles", {{"device", "cuda:0"}}), Optional(5.0));
  EXPECT_THAT(FindSample(samples, "specverify_kv_handles_expired_total"), Optional(5.0));
  EXPECT_THAT(FindSample(samples, "specverify_device_errors_total", {{"device", "cuda:0"}}),
              Optional(1.0));
}

TEST(PrometheusServerMetricsTest, PerDeviceSeriesCarryTheDeviceLabel) {
  auto metrics = StartUnserved();
  BatchReport batch;
  batch.device = 1;
  batch.path = ExecutionPathLabel::kFused;
  batch.sequences = 8;
  metrics->OnBatchExecuted(batch);
  metrics->OnBatchExecuted(batch);
  batch.device = 0;
  metrics->OnBatchExecuted(batch);
  metrics->SetArenaUsage(1, 4096, 1 << 20, 1);
  metrics->SetDeviceInFlightBatches(0, 2);
  metrics->OnDeviceError(1);
  metrics->SetDeviceInService(1, false);
  // An index SetDevices did not name is dropped, not a crash or a new series.
  batch.device = 7;
  metrics->OnBatchExecuted(batch);
  metrics->SetArenaUsage(7, 1, 1, 1);
  const auto samples = Scrape(*metrics);
  EXPECT_THAT(FindSample(samples, "specverify_batches_total",
                         {{"device", "cuda:1"}, {"path", "fused"}}),
              Optional(2.0));
  EXPECT_THAT(FindSample(samples, "specverify_batches_total",
                         {{"device", "cuda:0"}, {"path", "fused"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_kv_arena_used_bytes", {{"device", "cuda:1"}}),
              Optional(4096.0));
  EXPECT_THAT(FindSample(samples, "specverify_device_in_flight_batches", {{"device", "cuda:0"}}),
              Optional(2.0));
  EXPECT_THAT(FindSample(samples, "specverify_device_errors_total", {{"device", "cuda:1"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(samples, "specverify_device_in_service", {{"device", "cuda:1"}}),
              Optional(0.0));
  EXPECT_THAT(FindSample(samples, "specverify_device_in_service", {{"device", "cuda:0"}}),
              Optional(1.0));
  // Bounded: paths x devices, nothing for the unnamed index.
  EXPECT_EQ(SamplesNamed(samples, "specverify_batches_total").size(), 12u);
  EXPECT_EQ(SamplesNamed(samples, "specverify_kv_arena_used_bytes").size(), 2u);
}

TEST(PrometheusServerMetricsTest, BuildInfoIsOneSeriesAndFollowsTheLatestIdentity) {
  auto metrics = StartUnserved();
  EXPECT_TRUE(SamplesNamed(Scrape(*metrics), "specverify_build_info").empty());
  metrics->SetIdentity({"0.1.0", "cpu", "host"});
  metrics->SetIdentity({"0.1.0", "cuda", "NVIDIA H100 80GB HBM3"});
  const auto info = SamplesNamed(Scrape(*metrics), "specverify_build_info");
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].labels.at("backend"), "cuda");
  EXPECT_EQ(info[0].labels.at("device"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(info[0].labels.at("version"), "0.1.0");
  EXPECT_EQ(info[0].value, 1.0);
}

TEST(PrometheusServerMetricsTest, ConcurrentEventsAreNeitherLostNorTorn) {
  auto metrics = StartUnserved();
  constexpr int kThreads = 4;
  constexpr int kRequestsPerThread = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics] {
      for (int i = 0; i < kRequestsPerThread; ++i) {
        metrics->OnQueueDelay(absl::Microseconds(10));
        metrics->OnRequestFinished(RpcMethod::kVerify, absl::StatusCode::kOk,
                                   absl::Microseconds(100));
        BatchReport report;
        report.sequences = 1;
        report.draft_tokens = 8;
        report.accepted_tokens = 3;
        metrics->OnBatchExecuted(report);
      }
    });
  }
  for (auto& t : threads) t.join();
  constexpr double kTotal = kThreads * kRequestsPerThread;
  const auto samples = Scrape(*metrics);
  EXPECT_THAT(FindSample(samples, "specverify_requests_total", {{"rpc", "Verify"}, {"code", "OK"}}),
              Optional(kTotal));
  EXPECT_THAT(FindSample(samples, "specverify_request_duration_seconds_count", {{"rpc", "Verify"}}),
              Optional(kTotal));
  EXPECT_THAT(FindSample(samples, "specverify_queue_delay_seconds_count"), Optional(kTotal));
  EXPECT_THAT(FindSample(samples, "specverify_draft_tokens_total"), Optional(8 * kTotal));
  EXPECT_THAT(FindSample(samples, "specverify_accepted_tokens_total"), Optional(3 * kTotal));
}

TEST(PrometheusServerMetricsStartTest, RejectsMalformedAddressNamingIt) {
  PrometheusMetricsOptions options;
  options.listen_address = "localhost";
  EXPECT_THAT(PrometheusServerMetrics::Start(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'localhost'")));
  options.listen_address = "127.0.0.1:70000";
  EXPECT_THAT(PrometheusServerMetrics::Start(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[0, 65535]")));
  options.listen_address = ":9401";
  EXPECT_THAT(PrometheusServerMetrics::Start(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("host:port")));
}

TEST(PrometheusServerMetricsStartTest, RejectsNegativeQueueDelayAndNoHttpThreads) {
  PrometheusMetricsOptions options;
  options.listen_address = "";
  options.max_queue_delay = absl::Microseconds(-1);
  EXPECT_THAT(PrometheusServerMetrics::Start(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_queue_delay")));
  options.max_queue_delay = absl::Microseconds(100);
  options.http_threads = 0;
  EXPECT_THAT(PrometheusServerMetrics::Start(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("http_threads")));
}

TEST(PrometheusServerMetricsStartTest, PortInUseIsAStatusNamingTheAddressNotAnException) {
  PrometheusMetricsOptions options;
  options.listen_address = "127.0.0.1:0";
  auto first = PrometheusServerMetrics::Start(options);
  ASSERT_THAT(first, IsOk());
  const std::string taken = absl::StrCat("127.0.0.1:", (*first)->bound_port());
  options.listen_address = taken;
  EXPECT_THAT(PrometheusServerMetrics::Start(options),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("'" + taken + "'")));
}

TEST(PrometheusServerMetricsStartTest, EmptyAddressListensNowhereButStillRecords) {
  auto metrics = StartUnserved();
  EXPECT_EQ(metrics->bound_port(), 0);
  metrics->OnDeviceError(0);
  EXPECT_THAT(
      FindSample(Scrape(*metrics), "specverify_device_errors_total", {{"device", "cuda:0"}}),
      Optional(1.0));
}

TEST(PrometheusServerMetricsStartTest, ServesTheExpositionOverHttp) {
  PrometheusMetricsOptions options;
  options.listen_address = "127.0.0.1:0";
  auto metrics = PrometheusServerMetrics::Start(options);
  ASSERT_THAT(metrics, IsOk());
  ASSERT_GT((*metrics)->bound_port(), 0);
  (*metrics)->OnRequestFinished(RpcMethod::kVerify, absl::StatusCode::kOk,
                                absl::Microseconds(50));
  auto response = ::specverify::testing::HttpGet((*metrics)->bound_port(), "/metrics");
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->status, 200);
  const auto samples = ParseExposition(response->body);
  EXPECT_THAT(FindSample(samples, "specverify_requests_total", {{"rpc", "Verify"}, {"code", "OK"}}),
              Optional(1.0));
  // The scrape serves every series of ExpositionText() (plus prometheus-cpp's
  // own exposer_* series about scrapes).
  for (const Sample& s : Scrape(**metrics)) {
    EXPECT_TRUE(FindSample(samples, s.name, s.labels).has_value()) << s.name;
  }
}

TEST(PrometheusServerMetricsPromtoolTest, ExpositionPassesPromtoolCheckMetrics) {
  const std::string promtool = SPECVERIFY_PROMTOOL;
  if (promtool.empty()) GTEST_SKIP() << "promtool not found at configure time (Debian: prometheus)";
  auto metrics = StartUnserved();
  ExerciseEveryEvent(*metrics);
  EXPECT_THAT(::specverify::testing::PromtoolCheckMetrics(promtool, metrics->ExpositionText()),
              IsOk());
}

}  // namespace
}  // namespace specverify::server
