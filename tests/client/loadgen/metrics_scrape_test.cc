#include "client/loadgen/metrics_scrape.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace specverify::loadgen {
namespace {

using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kBefore[] = R"(# HELP specverify_queue_delay_seconds Queue delay.
# TYPE specverify_queue_delay_seconds histogram
specverify_queue_delay_seconds_bucket{le="0.0001"} 10
specverify_queue_delay_seconds_bucket{le="+Inf"} 12
specverify_queue_delay_seconds_sum 0.002
specverify_queue_delay_seconds_count 12
specverify_batch_device_seconds_sum{path="cpu"} 0.5
specverify_batch_device_seconds_count{path="cpu"} 100
specverify_batch_device_seconds_sum{path="fused"} 0
specverify_batch_device_seconds_count{path="fused"} 0
specverify_requests_total{method="Verify",code="OK"} 12 1700000000000
weird_label{msg="a } b, c=\"d\""} NaN
infinite_gauge +Inf
)";

constexpr char kAfter[] = R"(specverify_queue_delay_seconds_sum 0.012
specverify_queue_delay_seconds_count 112
specverify_batch_device_seconds_sum{path="cpu"} 0.9
specverify_batch_device_seconds_count{path="cpu"} 180
specverify_batch_device_seconds_sum{path="fused"} 0.1
specverify_batch_device_seconds_count{path="fused"} 20
specverify_requests_total{method="Verify",code="OK"} 112
specverify_requests_total_extra 5
)";

TEST(PrometheusTextTest, ParsesSamplesLabelsAndTimestamps) {
  auto samples = ParsePrometheusText(kBefore);
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(samples->at("specverify_queue_delay_seconds_count"), 12);
  EXPECT_EQ(samples->at("specverify_queue_delay_seconds_bucket{le=\"+Inf\"}"), 12);
  EXPECT_TRUE(std::isinf(samples->at("infinite_gauge")));
  EXPECT_EQ(samples->at("specverify_requests_total{method=\"Verify\",code=\"OK\"}"), 12);
  EXPECT_TRUE(std::isnan(samples->at("weird_label{msg=\"a } b, c=\\\"d\\\"\"}")));
  bool found = false;
  EXPECT_EQ(SumSeries(*samples, "specverify_batch_device_seconds_count", &found), 100);
  EXPECT_TRUE(found);
  SumSeries(*samples, "absent_metric", &found);
  EXPECT_FALSE(found);
}

TEST(PrometheusTextTest, SumSeriesMatchesTheWholeName) {
  auto samples = ParsePrometheusText(kAfter);
  ASSERT_TRUE(samples.ok());
  // specverify_requests_total_extra must not be summed into specverify_requests_total.
  EXPECT_EQ(SumSeries(*samples, "specverify_requests_total"), 112);
}

TEST(PrometheusTextTest, RejectsMalformedLinesByNumber) {
  EXPECT_THAT(ParsePrometheusText("a 1\nb\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 2")));
  EXPECT_THAT(ParsePrometheusText("a{x=\"1\" 2\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unterminated")));
  EXPECT_THAT(ParsePrometheusText("a one\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 1")));
}

TEST(PrometheusTextTest, HistogramAndCounterDeltas) {
  auto before = ParsePrometheusText(kBefore);
  auto after = ParsePrometheusText(kAfter);
  ASSERT_TRUE(before.ok() && after.ok());
  const HistogramDelta queue = DeltaOfHistogram(*before, *after, "specverify_queue_delay_seconds");
  EXPECT_TRUE(queue.found);
  EXPECT_DOUBLE_EQ(queue.count, 100);
  EXPECT_NEAR(queue.mean, 0.0001, 1e-12);
  const HistogramDelta device = DeltaOfHistogram(*before, *after, "specverify_batch_device_seconds");
  EXPECT_DOUBLE_EQ(device.count, 100);  // 80 cpu + 20 fused batches
  EXPECT_NEAR(device.mean, 0.005, 1e-12);
  EXPECT_FALSE(DeltaOfHistogram(*before, *after, "missing_seconds").found);
  EXPECT_EQ(DeltaOfCounter(*before, *after, "specverify_requests_total"), 100);
}

// Answers one HTTP connection with `response`, on a free loopback port.
class OneShotHttpServer {
 public:
  explicit OneShotHttpServer(std::string response) : response_(std::move(response)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    socklen_t length = sizeof(address);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    listen(fd_, 1);
    thread_ = std::thread([this] {
      const int client = accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      char buffer[4096];
      std::string request;
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = recv(client, buffer, sizeof(buffer), 0);
        if (n <= 0) break;
        request.append(buffer, static_cast<size_t>(n));
      }
      request_ = request;
      send(client, response_.data(), response_.size(), MSG_NOSIGNAL);
      close(client);
    });
  }
  ~OneShotHttpServer() {
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  const std::string& request() const { return request_; }

 private:
  std::string response_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string request_;
};

TEST(HttpGetTest, ReturnsTheBodyOfA200) {
  OneShotHttpServer server("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nmetric_a 1\n");
  auto body = HttpGet(absl::StrCat("http://127.0.0.1:", server.port(), "/metrics"),
                      std::chrono::milliseconds(5000));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "metric_a 1\n");
}

TEST(HttpGetTest, ReportsHttpErrorsAndBadUrls) {
  {
    OneShotHttpServer server("HTTP/1.1 404 Not Found\r\n\r\nnope");
    EXPECT_THAT(HttpGet(absl::StrCat("http://127.0.0.1:", server.port(), "/metrics"),
                        std::chrono::milliseconds(5000))
                    .status(),
                StatusIs(absl::StatusCode::kUnavailable, HasSubstr("404")));
  }
  EXPECT_THAT(HttpGet("https://127.0.0.1:1/metrics", std::chrono::milliseconds(100)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("http://")));
  // Port 1 on loopback: nothing listens there.
  EXPECT_THAT(HttpGet("http://127.0.0.1:1/metrics", std::chrono::milliseconds(1000)).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cannot connect")));
}

}  // namespace
}  // namespace specverify::loadgen
