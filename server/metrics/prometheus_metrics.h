// ServerMetrics exported to Prometheus with prometheus-cpp: a registry of
// counters, gauges and histograms named by Prometheus conventions (prefix
// `specverify_`, base units, `_total` counters, bounded labels), served as the
// text exposition on http://<listen_address>/metrics by civetweb.
//
// Cost model: every labelled series is created once, at Start(), and kept as
// a plain pointer indexed by enum, so an event is one or a few atomic adds
// (counters, gauges) or one mutex-guarded bucket increment (histograms); no
// label hashing or family lookup happens on the request path. The cost per
// request is measured by bench/server/metrics_bench.cc (docs/METRICS.md).
//
// Thread safety: every method may be called from any thread.
#ifndef SPECVERIFY_SERVER_METRICS_PROMETHEUS_METRICS_H_
#define SPECVERIFY_SERVER_METRICS_PROMETHEUS_METRICS_H_

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/metrics/server_metrics.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace specverify::server {

struct PrometheusMetricsOptions {
  // "host:port" the exporter listens on (the server's --metrics-address).
  // Port 0 picks a free port (see PrometheusServerMetrics::bound_port()).
  // Empty: nothing listens; the metrics are still recorded and can be read
  // with ExpositionText().
  std::string listen_address = "0.0.0.0:9401";
  // The batcher's max_queue_delay. The queue-delay and request-latency
  // histograms get a bucket boundary exactly here, so that "delayed by the
  // batching budget or less" is one bucket, not an interpolation.
  absl::Duration max_queue_delay = absl::Microseconds(200);
  // civetweb worker threads answering scrapes (a scrape takes microseconds;
  // two let a slow scraper not block another).
  int http_threads = 2;
};

class PrometheusServerMetrics final : public ServerMetrics {
 public:
  // Builds the registry and, unless options.listen_address is empty, starts
  // listening. Errors: INVALID_ARGUMENT for a malformed address, a negative
  // max_queue_delay or http_threads < 1; UNAVAILABLE naming the address when
  // it cannot be bound (in use, not local); INTERNAL if prometheus-cpp rejects
  // a metric definition. Never throws.
  static absl::StatusOr<std::unique_ptr<PrometheusServerMetrics>> Start(
      const PrometheusMetricsOptions& options);

  ~PrometheusServerMetrics() override;
  PrometheusServerMetrics(const PrometheusServerMetrics&) = delete;
  PrometheusServerMetrics& operator=(const PrometheusServerMetrics&) = delete;

  // The port actually listened on (the chosen one when the address asked for
  // port 0); 0 when nothing listens.
  int bound_port() const { return bound_port_; }

  // The text exposition format (version 0.0.4) of every series, exactly what
  // a scrape of /metrics returns, without HTTP.
  std::string ExpositionText() const;

  // The histogram bucket boundaries in seconds, as Start() built them
  // (exposed for tests and the bucket documentation).
  const std::vector<double>& latency_buckets_seconds() const { return latency_buckets_; }
  const std::vector<double>& queue_delay_buckets_seconds() const {
    return queue_delay_buckets_;
  }

  // ServerMetrics.
  void SetIdentity(const ServerIdentity& identity) override;
  void SetDevices(const std::vector<std::string>& names) override;
  void OnRequestFinished(RpcMethod method, absl::StatusCode code,
                         absl::Duration latency) override;
  void OnRequestRejected(RejectReason reason) override;
  void OnQueueDelay(absl::Duration delay) override;
  void OnBatchExecuted(const BatchReport& report) override;
  void SetQueuedSequences(int64_t sequences) override;
  void SetInFlightSequences(int64_t sequences) override;
  void SetArenaUsage(int device, int64_t used_bytes, int64_t capacity_bytes,
                     int64_t live_handles) override;
  void OnHandlesExpired(int64_t count) override;
  void OnPayloadHostCopy(HostCopyDirection direction, int64_t bytes) override;
  void SetArenaLargestFreeExtent(int device, int64_t bytes) override;
  void OnDeviceError(int device) override;
  void SetDeviceInService(int device, bool in_service) override;
  void SetDeviceInFlightBatches(int device, int64_t batches) override;
  void SetServing(bool serving) override;
  void SetRegionUsage(const RegionUsage& usage) override;
  void SetRegionRequestsInFlight(int64_t requests) override;

 private:
  static constexpr int kRpcMethods = 9;       // RpcMethod's enumerators
  static constexpr int kStatusCodes = 17;     // absl::StatusCode 0..16
  static constexpr int kRejectReasons = 9;    // RejectReason's enumerators
  static constexpr int kExecutionPaths = 6;   // ExecutionPathLabel's enumerators
  // Executors one server may drive (server/devices/device_set.h's limit).
  static constexpr int kMaxDevices = 16;

  // The series labelled by device, created by SetDevices.
  struct DeviceSeries {
    std::array<prometheus::Counter*, kExecutionPaths> batches{};
    std::array<prometheus::Histogram*, kExecutionPaths> device_time{};
    prometheus::Gauge* arena_used_bytes = nullptr;
    prometheus::Gauge* arena_capacity_bytes = nullptr;
    prometheus::Gauge* arena_largest_free_extent_bytes = nullptr;
    prometheus::Gauge* live_handles = nullptr;
    prometheus::Counter* device_errors = nullptr;
    prometheus::Gauge* in_service = nullptr;
    prometheus::Gauge* in_flight_batches = nullptr;
  };
  // The device's series, or null for an index SetDevices did not name.
  const DeviceSeries* Device(int device) const;

  explicit PrometheusServerMetrics(const PrometheusMetricsOptions& options);

  // Creates every family and series; throws what prometheus-cpp throws
  // (Start() catches it at the boundary).
  void BuildSeries();

  const std::vector<double> latency_buckets_;
  const std::vector<double> queue_delay_buckets_;
  std::shared_ptr<prometheus::Registry> registry_;

  // Series pointers are owned by registry_'s families and stay valid for the
  // registry's lifetime (no family or series is ever removed, except the
  // build_info series, which only SetIdentity touches, under identity_mu_).
  std::array<std::array<prometheus::Counter*, kStatusCodes>, kRpcMethods> requests_{};
  std::array<prometheus::Histogram*, kRpcMethods> request_latency_{};
  std::array<prometheus::Counter*, kRejectReasons> rejected_{};
  prometheus::Histogram* queue_delay_ = nullptr;
  prometheus::Family<prometheus::Counter>* batches_family_ = nullptr;
  prometheus::Family<prometheus::Histogram>* device_time_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* arena_used_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* arena_capacity_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* arena_largest_free_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* live_handles_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* device_errors_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* device_in_service_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* device_in_flight_family_ = nullptr;
  // Filled once by SetDevices, then published by device_count_ (release):
  // an event reads its entry without a lock.
  std::array<DeviceSeries, kMaxDevices> devices_{};
  std::atomic<int> device_count_{0};
  absl::Mutex devices_mu_;  // serializes SetDevices
  prometheus::Histogram* batch_sequences_ = nullptr;
  prometheus::Histogram* batch_requests_ = nullptr;
  prometheus::Histogram* batch_bytes_ = nullptr;
  prometheus::Counter* sequences_verified_ = nullptr;
  prometheus::Counter* non_exact_sequences_ = nullptr;
  prometheus::Counter* draft_tokens_ = nullptr;
  prometheus::Counter* accepted_tokens_ = nullptr;
  prometheus::Counter* packed_kv_bytes_ = nullptr;
  prometheus::Counter* tree_sequences_ = nullptr;
  prometheus::Counter* tree_accepted_nodes_ = nullptr;
  std::array<prometheus::Counter*, 2> host_copy_bytes_{};  // HostCopyDirection
  prometheus::Gauge* queued_sequences_ = nullptr;
  prometheus::Gauge* in_flight_sequences_ = nullptr;
  prometheus::Counter* handles_expired_ = nullptr;
  prometheus::Gauge* serving_ = nullptr;
  // By kind: [0] system, [1] cuda.
  std::array<prometheus::Gauge*, 2> regions_{};
  std::array<prometheus::Gauge*, 2> region_bytes_{};
  prometheus::Gauge* region_requests_in_flight_ = nullptr;
  prometheus::Family<prometheus::Gauge>* build_info_family_ = nullptr;

  absl::Mutex identity_mu_;
  prometheus::Gauge* build_info_ ABSL_GUARDED_BY(identity_mu_) = nullptr;

  // Declared last: destroyed first, so no scrape runs against a registry
  // being torn down.
  std::unique_ptr<prometheus::Exposer> exposer_;
  int bound_port_ = 0;
  std::string wake_host_;  // where the destructor connects to wake civetweb
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_METRICS_PROMETHEUS_METRICS_H_
