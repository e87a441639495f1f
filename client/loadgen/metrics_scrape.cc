#include "client/loadgen/metrics_scrape.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace specverify::loadgen {
namespace {

bool ParseSampleValue(absl::string_view text, double* value) {
  if (text == "NaN") { *value = std::numeric_limits<double>::quiet_NaN(); return true; }
  if (text == "+Inf" || text == "Inf") { *value = std::numeric_limits<double>::infinity(); return true; }
  if (text == "-Inf") { *value = -std::numeric_limits<double>::infinity(); return true; }
  return absl::SimpleAtod(text, value);
}

// Closes a file descriptor when it goes out of scope.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { if (fd_ >= 0) close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
 private:
  int fd_;
};

}  // namespace

absl::StatusOr<MetricSamples> ParsePrometheusText(absl::string_view text) {
  MetricSamples samples;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    // The series ends after the closing brace of its labels (label values may
    // contain spaces) or at the first space when it has none.
    size_t series_end;
    const size_t brace = line.find('{');
    const size_t space = line.find_first_of(" \t");
    if (brace != absl::string_view::npos && (space == absl::string_view::npos || brace < space)) {
      // Find the closing brace outside quoted label values.
      bool in_quotes = false;
      series_end = absl::string_view::npos;
      for (size_t i = brace + 1; i < line.size(); ++i) {
        const char ch = line[i];
        if (in_quotes && ch == '\\') { ++i; continue; }
        if (ch == '"') in_quotes = !in_quotes;
        if (!in_quotes && ch == '}') { series_end = i + 1; break; }
      }
      if (series_end == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("metrics line ", line_number, ": unterminated label set"));
      }
    } else {
      series_end = space;
    }
    if (series_end == absl::string_view::npos || series_end == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics line ", line_number, ": expected 'name value', got '", line, "'"));
    }
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(line.substr(series_end));
    std::vector<absl::string_view> fields =
        absl::StrSplit(rest, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    double value = 0;
    if (fields.empty() || fields.size() > 2 || !ParseSampleValue(fields[0], &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics line ", line_number, ": bad sample value in '", line, "'"));
    }
    samples[std::string(line.substr(0, series_end))] = value;
  }
  return samples;
}

double SumSeries(const MetricSamples& samples, absl::string_view name, bool* found) {
  double sum = 0;
  bool any = false;
  for (auto it = samples.lower_bound(name); it != samples.end(); ++it) {
    absl::string_view series = it->first;
    if (!absl::StartsWith(series, name)) break;
    if (series.size() != name.size() && series[name.size()] != '{') continue;
    sum += it->second;
    any = true;
  }
  if (found != nullptr) *found = any;
  return sum;
}

HistogramDelta DeltaOfHistogram(const MetricSamples& before, const MetricSamples& after,
                                absl::string_view name) {
  HistogramDelta delta;
  bool found_sum = false, found_count = false;
  const std::string sum_name = absl::StrCat(name, "_sum");
  const std::string count_name = absl::StrCat(name, "_count");
  const double sum = SumSeries(after, sum_name, &found_sum) - SumSeries(before, sum_name);
  const double count = SumSeries(after, count_name, &found_count) - SumSeries(before, count_name);
  delta.found = found_sum && found_count;
  delta.count = count;
  delta.mean = count > 0 ? sum / count : 0;
  return delta;
}

double DeltaOfCounter(const MetricSamples& before, const MetricSamples& after,
                      absl::string_view name, bool* found) {
  return SumSeries(after, name, found) - SumSeries(before, name);
}

absl::StatusOr<std::string> HttpGet(absl::string_view url, std::chrono::milliseconds timeout) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("metrics URL must start with http://: ", url));
  }
  const size_t slash = rest.find('/');
  absl::string_view host_port = rest.substr(0, slash);
  const std::string path = slash == absl::string_view::npos ? "/" : std::string(rest.substr(slash));
  const size_t colon = host_port.rfind(':');
  std::string host(host_port.substr(0, colon));
  const std::string port = colon == absl::string_view::npos ? "80" : std::string(host_port.substr(colon + 1));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return absl::InvalidArgumentError(absl::StrCat("no host in metrics URL ", url));

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &addresses); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(addresses);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", host_port, ": ", std::strerror(errno)));
  }
  FdCloser closer(fd);

  // HTTP/1.0: the server closes the connection after the body, so no chunked
  // encoding and no Content-Length bookkeeping are needed.
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host_port, "\r\nAccept: text/plain\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return absl::UnavailableError(absl::StrCat("send to ", host_port, " failed"));
    sent += static_cast<size_t>(n);
  }
  std::string response;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[16384];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return absl::DeadlineExceededError(absl::StrCat("GET ", url, " timed out"));
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0) return absl::UnavailableError(absl::StrCat("recv from ", host_port, " failed"));
    if (n == 0) break;
    response.append(buffer, static_cast<size_t>(n));
  }
  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    return absl::UnavailableError(absl::StrCat("no HTTP header in the answer from ", url));
  }
  absl::string_view status_line = absl::string_view(response).substr(0, response.find("\r\n"));
  std::vector<absl::string_view> status_fields = absl::StrSplit(status_line, ' ');
  if (status_fields.size() < 2 || status_fields[1] != "200") {
    return absl::UnavailableError(absl::StrCat("GET ", url, " answered '", status_line, "'"));
  }
  return response.substr(header_end + 4);
}

}  // namespace specverify::loadgen
