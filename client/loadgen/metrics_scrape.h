// Reads a server's Prometheus /metrics page so that a load step can be joined
// with what the server saw during it (queue delay, device time). A plain
// HTTP/1.0 GET over a socket and a parser of the text exposition format
// (https://prometheus.io/docs/instrumenting/exposition_formats/): enough for
// the numbers the report needs, no dependency on an HTTP library.
#ifndef SPECVERIFY_CLIENT_LOADGEN_METRICS_SCRAPE_H_
#define SPECVERIFY_CLIENT_LOADGEN_METRICS_SCRAPE_H_

#include <chrono>
#include <map>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace specverify::loadgen {

// Every sample of a scrape, keyed by its series: the metric name followed by
// its label set exactly as exposed, e.g. `x_bucket{le="0.001"}`.
using MetricSamples = std::map<std::string, double, std::less<>>;

// Parses the text exposition format: comments and blank lines skipped,
// optional timestamps ignored, NaN/+Inf/-Inf accepted. A malformed line is an
// INVALID_ARGUMENT naming its line number.
absl::StatusOr<MetricSamples> ParsePrometheusText(absl::string_view text);

// The sum over every label set of the metric `name` (exact name match; the
// labels may be anything). 0 when absent; `found` tells the difference.
double SumSeries(const MetricSamples& samples, absl::string_view name, bool* found = nullptr);

// GET http://host:port/path; returns the body of a 200 answer. UNAVAILABLE when
// the server cannot be reached, INVALID_ARGUMENT for a URL that is not plain http.
absl::StatusOr<std::string> HttpGet(absl::string_view url, std::chrono::milliseconds timeout);

// The mean of a Prometheus histogram (or summary) over an interval, from the
// change of its _sum and _count between two scrapes.
struct HistogramDelta {
  bool found = false;
  double count = 0;          // observations in the interval
  double mean = 0;           // sum / count, in the metric's unit (seconds)
};
HistogramDelta DeltaOfHistogram(const MetricSamples& before, const MetricSamples& after,
                                absl::string_view name);

// The change of a counter (summed over label sets) between two scrapes.
double DeltaOfCounter(const MetricSamples& before, const MetricSamples& after,
                      absl::string_view name, bool* found = nullptr);

}  // namespace specverify::loadgen

#endif  // SPECVERIFY_CLIENT_LOADGEN_METRICS_SCRAPE_H_
