// Cost of metrics on the request path: the sequence of ServerMetrics calls one
// Verify makes (a one-request batch, the worst case: batch events are not
// shared with other requests), on PrometheusServerMetrics against
// NoopServerMetrics, single-threaded and with threads contending for the same
// series. Results and the command: docs/METRICS.md.
#include <memory>

#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "server/metrics/prometheus_metrics.h"
#include "server/metrics/server_metrics.h"

namespace specverify::server {
namespace {

// One shared instance per implementation, as in the server; created once,
// before any benchmark thread touches it.
ServerMetrics& Noop() {
  static NoopServerMetrics* metrics = new NoopServerMetrics();
  return *metrics;
}

ServerMetrics& Prometheus() {
  static PrometheusServerMetrics* metrics = [] {
    PrometheusMetricsOptions options;
    options.listen_address = "";  // recording only; scrapes are not on the request path
    options.max_queue_delay = absl::Microseconds(200);
    PrometheusServerMetrics* metrics = PrometheusServerMetrics::Start(options).value().release();
    metrics->SetDevices({"cuda:0"});
    return metrics;
  }();
  return *metrics;
}

// What one Verify reports, in order: enqueue, dispatch (queue gauge, queue
// delay, in-flight gauge), the batch's execution, arena usage after the
// handle is stored, completion (in-flight gauge, the finished RPC).
void VerifyEvents(ServerMetrics& metrics, const BatchReport& batch) {
  metrics.SetQueuedSequences(1);
  metrics.SetQueuedSequences(0);
  metrics.OnQueueDelay(absl::Microseconds(35));
  metrics.SetInFlightSequences(1);
  metrics.OnBatchExecuted(batch);
  metrics.SetArenaUsage(0, 8 * 4096, int64_t{1} << 30, 1);
  metrics.SetInFlightSequences(0);
  metrics.OnRequestFinished(RpcMethod::kVerify, absl::StatusCode::kOk, absl::Microseconds(120));
}

BatchReport OneSequenceBatch() {
  BatchReport batch;
  batch.path = ExecutionPathLabel::kCpu;
  batch.sequences = 1;
  batch.requests = 1;
  batch.input_bytes = 8 * 4096 + 17 * 4;
  batch.draft_tokens = 8;
  batch.accepted_tokens = 6;
  batch.packed_kv_bytes = 6 * 4096;
  batch.device_time = absl::Microseconds(5);
  return batch;
}

template <ServerMetrics& (*Metrics)()>
void BM_VerifyEvents(benchmark::State& state) {
  ServerMetrics* metrics = &Metrics();
  benchmark::DoNotOptimize(metrics);  // keep the virtual calls virtual
  const BatchReport batch = OneSequenceBatch();
  for (auto _ : state) VerifyEvents(*metrics, batch);
  state.SetItemsProcessed(state.iterations());  // items = requests
}
BENCHMARK_TEMPLATE(BM_VerifyEvents, Noop)->ThreadRange(1, 4)->UseRealTime();
BENCHMARK_TEMPLATE(BM_VerifyEvents, Prometheus)->ThreadRange(1, 4)->UseRealTime();

// The two heaviest single events (histogram observations take a mutex).
void BM_OnRequestFinished(benchmark::State& state) {
  ServerMetrics& metrics = Prometheus();
  for (auto _ : state) {
    metrics.OnRequestFinished(RpcMethod::kVerify, absl::StatusCode::kOk, absl::Microseconds(120));
  }
}
BENCHMARK(BM_OnRequestFinished)->ThreadRange(1, 4)->UseRealTime();

void BM_OnBatchExecuted(benchmark::State& state) {
  ServerMetrics& metrics = Prometheus();
  const BatchReport batch = OneSequenceBatch();
  for (auto _ : state) metrics.OnBatchExecuted(batch);
}
BENCHMARK(BM_OnBatchExecuted)->ThreadRange(1, 4)->UseRealTime();

// A scrape (off the request path; Prometheus does this once per interval).
void BM_ExpositionText(benchmark::State& state) {
  auto& metrics = static_cast<PrometheusServerMetrics&>(Prometheus());
  for (auto _ : state) benchmark::DoNotOptimize(metrics.ExpositionText());
}
BENCHMARK(BM_ExpositionText);

}  // namespace
}  // namespace specverify::server

BENCHMARK_MAIN();
