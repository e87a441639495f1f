// Prints the exposition of a PrometheusServerMetrics after every event ran
// once: the reference list of exported series for tests/deploy (the dashboard
// and the alert rules may only name metrics that appear here).
#include <iostream>

#include "server/metrics/prometheus_metrics.h"
#include "tests/metrics/exercise_events.h"

int main() {
  specverify::server::PrometheusMetricsOptions options;
  options.listen_address = "";  // nothing listens; the text is printed
  auto metrics = specverify::server::PrometheusServerMetrics::Start(options);
  if (!metrics.ok()) {
    std::cerr << metrics.status() << "\n";
    return 1;
  }
  specverify::testing::ExerciseEveryEvent(**metrics);
  std::cout << (*metrics)->ExpositionText();
  return 0;
}
