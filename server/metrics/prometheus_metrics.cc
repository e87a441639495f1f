#include "server/metrics/prometheus_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <iterator>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "prometheus/exposer.h"
#include "prometheus/text_serializer.h"

namespace specverify::server {
namespace {

constexpr const char* kRpcNames[] = {"Verify",    "VerifyStream",  "FetchKv",
                                     "ReleaseKv", "GetServerInfo", "VerifyCeiling",
                                     "RegisterRegion", "UnregisterRegion", "ListRegions"};
constexpr const char* kRejectReasonNames[] = {"invalid",   "queue_full", "arena_full",
                                              "deadline",  "cancelled",  "shutdown",
                                              "batch_too_large", "client_queue_limit",
                                              "client_arena_quota"};
constexpr const char* kPathNames[] = {"fused", "two_step", "cpu", "noop", "sampling",
                                      "host_decided"};

// Every boundary prints exactly in the exposition (prometheus-cpp prints 16
// significant digits: 75e-6 would read 7.499999999999999e-05; tested).
// Sub-millisecond resolution where the service lives (a CPU-backend verify
// is tens of microseconds, a GPU batch a few), then coarse steps to 10 s so
// that a stalled request still lands in a finite bucket.
const std::vector<double> kLatencySeconds = {
    10e-6, 25e-6, 50e-6, 100e-6, 150e-6, 200e-6, 300e-6, 400e-6, 500e-6, 750e-6,
    1e-3,  1.5e-3, 2e-3, 3e-3,  5e-3,   7.5e-3, 10e-3,  25e-3,  50e-3,  100e-3, 250e-3,
    500e-3, 1.0,  2.5,   5.0,   10.0};
const std::vector<double> kQueueDelaySeconds = {
    1e-6,  2e-6,  5e-6,   10e-6, 20e-6, 50e-6, 100e-6, 150e-6, 200e-6, 300e-6, 500e-6,
    1e-3,  2e-3,  5e-3,   10e-3, 20e-3, 50e-3, 100e-3, 1.0};
// A greedy batch of the production regime runs in ~6 us on an H100 (DESIGN.md);
// the stress regime and the CPU backend take up to milliseconds.
const std::vector<double> kDeviceSeconds = {
    1e-6,   2e-6,  4e-6,  6e-6,  8e-6, 10e-6, 15e-6, 20e-6, 30e-6, 50e-6, 100e-6,
    200e-6, 500e-6, 1e-3, 2e-3,  5e-3, 10e-3, 50e-3, 100e-3, 1.0};
// Powers of two up to the largest batch the design allows (4096 sequences).
const std::vector<double> kBatchSequences = {1,   2,   4,    8,    16,   32,  64,
                                             128, 256, 512, 1024, 2048, 4096};
const std::vector<double> kBatchRequests = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
// Powers of four from 1 KiB to 1 GiB (a stress batch packs ~15 MB).
const std::vector<double> kBatchBytes = {
    1024.0,        4096.0,        16384.0,        65536.0,         262144.0,      1048576.0,
    4194304.0,     16777216.0,    67108864.0,     268435456.0,     1073741824.0};

// Adds `boundary` to sorted `buckets`. A fixed boundary within rounding of it
// (200e-6 against absl's 200 us in seconds) is replaced, not duplicated.
std::vector<double> WithBoundary(std::vector<double> buckets, double boundary) {
  if (boundary <= 0) return buckets;  // no batching delay configured
  buckets.erase(std::remove_if(buckets.begin(), buckets.end(),
                               [boundary](double b) {
                                 return std::abs(b - boundary) <= 1e-12 * std::abs(boundary);
                               }),
                buckets.end());
  buckets.push_back(boundary);
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  return buckets;
}

double Seconds(absl::Duration d) {
  // A clock step can make a measured span negative; it belongs in the first
  // bucket, not below it.
  return std::max(0.0, absl::ToDoubleSeconds(d));
}

// absl::StatusCode's values are 0..16; anything else is reported as UNKNOWN,
// keeping the code label's values bounded.
int StatusCodeIndex(absl::StatusCode code, int status_codes) {
  const int index = static_cast<int>(code);
  return (index >= 0 && index < status_codes) ? index
                                              : static_cast<int>(absl::StatusCode::kUnknown);
}

// "host:port" with a non-empty host and a port in [0, 65535]. civetweb would
// also fail on a malformed address, but with a message that names nothing.
absl::Status ValidateListenAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(address).substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics listen address '", address,
        "' is not host:port with a port in [0, 65535] (e.g. 0.0.0.0:9401; empty disables)"));
  }
  return absl::OkStatus();
}

// The IPv4 address a local client reaches the listener on: the address's
// host, or loopback for a wildcard or non-literal host.
std::string LocalConnectHost(const std::string& listen_address) {
  const std::string host = listen_address.substr(0, listen_address.rfind(':'));
  in_addr parsed{};
  if (host == "0.0.0.0" || ::inet_pton(AF_INET, host.c_str(), &parsed) != 1) return "127.0.0.1";
  return host;
}

void WakeListener(const std::string& host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) {
    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  ::close(fd);
}

}  // namespace

PrometheusServerMetrics::PrometheusServerMetrics(const PrometheusMetricsOptions& options)
    : latency_buckets_(
          WithBoundary(kLatencySeconds, absl::ToDoubleSeconds(options.max_queue_delay))),
      queue_delay_buckets_(
          WithBoundary(kQueueDelaySeconds, absl::ToDoubleSeconds(options.max_queue_delay))),
      registry_(std::make_shared<prometheus::Registry>()) {}

PrometheusServerMetrics::~PrometheusServerMetrics() {
  if (exposer_ == nullptr) return;
  // civetweb's listener thread polls its sockets with a fixed 2 s timeout and
  // only then sees the stop flag, so stopping the exposer would add up to 2 s
  // to every server shutdown. Connecting to the port wakes that poll; keep
  // doing so until the exposer is gone (a refused or failed connect costs
  // nothing but the 2 s we would have waited anyway).
  std::atomic<bool> stopped{false};
  std::thread waker([this, &stopped] {
    while (!stopped.load(std::memory_order_acquire)) {
      WakeListener(wake_host_, bound_port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  exposer_.reset();
  stopped.store(true, std::memory_order_release);
  waker.join();
}

absl::StatusOr<std::unique_ptr<PrometheusServerMetrics>> PrometheusServerMetrics::Start(
    const PrometheusMetricsOptions& options) {
  if (options.max_queue_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics max_queue_delay must be >= 0, got ", absl::FormatDuration(options.max_queue_delay)));
  }
  if (options.http_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics http_threads must be >= 1, got ", options.http_threads));
  }
  if (!options.listen_address.empty()) {
    if (absl::Status s = ValidateListenAddress(options.listen_address); !s.ok()) return s;
  }
  std::unique_ptr<PrometheusServerMetrics> metrics(new PrometheusServerMetrics(options));
  // prometheus-cpp reports errors by exception (invalid names, civetweb's
  // failed bind); none may cross into the server.
  try {
    metrics->BuildSeries();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("building the metric registry failed: ", e.what()));
  }
  if (options.listen_address.empty()) return metrics;
  try {
    metrics->exposer_ = std::make_unique<prometheus::Exposer>(
        options.listen_address, static_cast<std::size_t>(options.http_threads));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("metrics exporter cannot listen on '",
                                               options.listen_address, "': ", e.what()));
  }
  metrics->exposer_->RegisterCollectable(metrics->registry_);
  const std::vector<int> ports = metrics->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("metrics exporter on '", options.listen_address,
                                               "' reports no listening port"));
  }
  metrics->bound_port_ = ports.front();
  metrics->wake_host_ = LocalConnectHost(options.listen_address);
  return metrics;
}

void PrometheusServerMetrics::BuildSeries() {
  prometheus::Registry& r = *registry_;

  auto& requests = prometheus::BuildCounter()
                       .Name("specverify_requests_total")
                       .Help("Finished RPCs (VerifyStream: per request on the stream), by "
                             "method and gRPC status code.")
                       .Register(r);
  auto& latency = prometheus::BuildHistogram()
                      .Name("specverify_request_duration_seconds")
                      .Help("Server-side latency of a finished RPC, from arrival to the "
                            "response handed to gRPC, by method.")
                      .Register(r);
  for (int m = 0; m < kRpcMethods; ++m) {
    for (int c = 0; c < kStatusCodes; ++c) {
      requests_[m][c] = &requests.Add(
          {{"rpc", kRpcNames[m]},
           {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(c))}});
    }
    request_latency_[m] = &latency.Add({{"rpc", kRpcNames[m]}}, latency_buckets_);
  }

  auto& rejected = prometheus::BuildCounter()
                       .Name("specverify_requests_rejected_total")
                       .Help("Requests answered without being executed, by reason.")
                       .Register(r);
  static_assert(std::size(kRejectReasonNames) == kRejectReasons,
                "one label per RejectReason enumerator");
  for (int i = 0; i < kRejectReasons; ++i) {
    rejected_[i] = &rejected.Add({{"reason", kRejectReasonNames[i]}});
  }

  queue_delay_ = &prometheus::BuildHistogram()
                      .Name("specverify_queue_delay_seconds")
                      .Help("Per dispatched request: arrival at the batcher to its batch's "
                            "dispatch. One bucket boundary is exactly max_queue_delay.")
                      .Register(r)
                      .Add({}, queue_delay_buckets_);

  batches_family_ = &prometheus::BuildCounter()
                        .Name("specverify_batches_total")
                        .Help("Batches executed, by device and by the execution path the "
                              "dispatcher chose.")
                        .Register(r);
  device_time_family_ = &prometheus::BuildHistogram()
                             .Name("specverify_batch_device_seconds")
                             .Help("Device (kernel, or CPU backend) time of one batch, by "
                                   "device and execution path.")
                             .Register(r);
  batch_sequences_ = &prometheus::BuildHistogram()
                          .Name("specverify_batch_size_sequences")
                          .Help("Sequences per executed batch.")
                          .Register(r)
                          .Add({}, kBatchSequences);
  batch_requests_ = &prometheus::BuildHistogram()
                         .Name("specverify_batch_size_requests")
                         .Help("Requests whose sequences an executed batch merged.")
                         .Register(r)
                         .Add({}, kBatchRequests);
  batch_bytes_ = &prometheus::BuildHistogram()
                      .Name("specverify_batch_size_bytes")
                      .Help("Input bytes staged for one batch (tokens, KV rows, "
                            "distributions).")
                      .Register(r)
                      .Add({}, kBatchBytes);

  sequences_verified_ = &prometheus::BuildCounter()
                             .Name("specverify_sequences_verified_total")
                             .Help("Sequence drafts verified (exact and non-exact).")
                             .Register(r)
                             .Add({});
  non_exact_sequences_ = &prometheus::BuildCounter()
                              .Name("specverify_non_exact_sequences_total")
                              .Help("Sequence drafts verified with the non-exact sigmoid "
                                    "approximation (included in sequences_verified).")
                              .Register(r)
                              .Add({});
  draft_tokens_ = &prometheus::BuildCounter()
                       .Name("specverify_draft_tokens_total")
                       .Help("Draft tokens proposed (sum of gamma over verified sequences).")
                       .Register(r)
                       .Add({});
  accepted_tokens_ = &prometheus::BuildCounter()
                          .Name("specverify_accepted_tokens_total")
                          .Help("Draft tokens accepted (sum of k); acceptance rate = "
                                "accepted / draft.")
                          .Register(r)
                          .Add({});
  packed_kv_bytes_ = &prometheus::BuildCounter()
                          .Name("specverify_packed_kv_bytes_total")
                          .Help("KV bytes packed (accepted rows times row bytes).")
                          .Register(r)
                          .Add({});
  auto& host_copy = prometheus::BuildCounter()
                        .Name("specverify_payload_host_copy_bytes_total")
                        .Help("Payload bytes (tokens, KV rows, distribution rows) copied on the "
                              "host by the server: in = received message to staging, out = "
                              "arena or pinned results to a response. One copy each way by "
                              "design; gRPC's own serialization is not counted.")
                        .Register(r);
  host_copy_bytes_[static_cast<int>(HostCopyDirection::kIn)] = &host_copy.Add({{"direction", "in"}});
  host_copy_bytes_[static_cast<int>(HostCopyDirection::kOut)] =
      &host_copy.Add({{"direction", "out"}});

  queued_sequences_ = &prometheus::BuildGauge()
                           .Name("specverify_queued_sequences")
                           .Help("Sequences waiting in the batcher.")
                           .Register(r)
                           .Add({});
  in_flight_sequences_ = &prometheus::BuildGauge()
                              .Name("specverify_in_flight_sequences")
                              .Help("Sequences dispatched to the executor and not yet "
                                    "answered.")
                              .Register(r)
                              .Add({});
  arena_largest_free_family_ = &prometheus::BuildGauge()
                                   .Name("specverify_kv_arena_largest_free_extent_bytes")
                                   .Help("Largest KV arena reservation that would still "
                                         "succeed in one piece, per device; far below the "
                                         "free bytes means fragmentation.")
                                   .Register(r);
  arena_used_family_ = &prometheus::BuildGauge()
                            .Name("specverify_kv_arena_used_bytes")
                            .Help("KV arena bytes held by live handles and running batches, "
                                  "per device.")
                            .Register(r);
  arena_capacity_family_ = &prometheus::BuildGauge()
                                .Name("specverify_kv_arena_capacity_bytes")
                                .Help("KV arena bytes reserved at start-up, per device.")
                                .Register(r);
  live_handles_family_ = &prometheus::BuildGauge()
                              .Name("specverify_kv_live_handles")
                              .Help("KV handles neither released nor expired, per device.")
                              .Register(r);
  handles_expired_ = &prometheus::BuildCounter()
                          .Name("specverify_kv_handles_expired_total")
                          .Help("KV handles freed by their TTL (not by ReleaseKv).")
                          .Register(r)
                          .Add({});
  device_errors_family_ = &prometheus::BuildCounter()
                               .Name("specverify_device_errors_total")
                               .Help("Device (CUDA) errors, per device; the device is out of "
                                     "service after one.")
                               .Register(r);
  device_in_service_family_ = &prometheus::BuildGauge()
                                   .Name("specverify_device_in_service")
                                   .Help("1 while the device takes batches; 0 once a fault "
                                         "took it out of service.")
                                   .Register(r);
  device_in_flight_family_ = &prometheus::BuildGauge()
                                  .Name("specverify_device_in_flight_batches")
                                  .Help("Batches submitted to the device and not yet "
                                        "completed.")
                                  .Register(r);
  serving_ = &prometheus::BuildGauge()
                  .Name("specverify_serving")
                  .Help("1 while the gRPC health status is SERVING; 0 while starting, "
                        "draining for shutdown or after a device fault.")
                  .Register(r)
                  .Add({});
  tree_sequences_ = &prometheus::BuildCounter()
                         .Name("specverify_tree_sequences_verified_total")
                         .Help("Token-tree drafts verified (docs/TREES.md).")
                         .Register(r)
                         .Add({});
  tree_accepted_nodes_ = &prometheus::BuildCounter()
                              .Name("specverify_tree_accepted_nodes_total")
                              .Help("Nodes on the accepted paths of token trees; over "
                                    "specverify_tree_sequences_verified_total, the mean "
                                    "accepted path length.")
                              .Register(r)
                              .Add({});
  auto& regions = prometheus::BuildGauge()
                      .Name("specverify_regions")
                      .Help("Registered data-plane regions (RegisterRegion), by kind.")
                      .Register(r);
  auto& region_bytes = prometheus::BuildGauge()
                           .Name("specverify_region_bytes")
                           .Help("Bytes of the registered data-plane regions, by kind.")
                           .Register(r);
  regions_[0] = &regions.Add({{"kind", "system"}});
  regions_[1] = &regions.Add({{"kind", "cuda"}});
  region_bytes_[0] = &region_bytes.Add({{"kind", "system"}});
  region_bytes_[1] = &region_bytes.Add({{"kind", "cuda"}});
  region_requests_in_flight_ = &prometheus::BuildGauge()
                                    .Name("specverify_region_requests_in_flight")
                                    .Help("Requests (queued or running) that hold a region: "
                                          "an unregistered region is unmapped once its "
                                          "requests are done.")
                                    .Register(r)
                                    .Add({});
  build_info_family_ = &prometheus::BuildGauge()
                            .Name("specverify_build_info")
                            .Help("Constant 1, labelled with the server's version, backend "
                                  "(cpu, cuda, noop) and device.")
                            .Register(r);
}

std::string PrometheusServerMetrics::ExpositionText() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

void PrometheusServerMetrics::SetIdentity(const ServerIdentity& identity) {
  absl::MutexLock lock(&identity_mu_);
  // One series only: a changed identity replaces the old one instead of
  // leaving two build_info series at 1.
  if (build_info_ != nullptr) build_info_family_->Remove(build_info_);
  build_info_ = &build_info_family_->Add({{"version", identity.version},
                                          {"backend", identity.backend},
                                          {"device", identity.device_name}});
  build_info_->Set(1);
}

void PrometheusServerMetrics::SetDevices(const std::vector<std::string>& names) {
  absl::MutexLock lock(&devices_mu_);
  if (device_count_.load(std::memory_order_relaxed) > 0) return;  // once
  const int n = std::min<int>(static_cast<int>(names.size()), kMaxDevices);
  for (int d = 0; d < n; ++d) {
    const prometheus::Labels device = {{"device", names[d]}};
    DeviceSeries& series = devices_[d];
    for (int i = 0; i < kExecutionPaths; ++i) {
      prometheus::Labels labels = device;
      labels.emplace("path", kPathNames[i]);
      series.batches[i] = &batches_family_->Add(labels);
      series.device_time[i] = &device_time_family_->Add(labels, kDeviceSeconds);
    }
    series.arena_used_bytes = &arena_used_family_->Add(device);
    series.arena_capacity_bytes = &arena_capacity_family_->Add(device);
    series.arena_largest_free_extent_bytes = &arena_largest_free_family_->Add(device);
    series.live_handles = &live_handles_family_->Add(device);
    series.device_errors = &device_errors_family_->Add(device);
    series.in_service = &device_in_service_family_->Add(device);
    series.in_service->Set(1);
    series.in_flight_batches = &device_in_flight_family_->Add(device);
  }
  device_count_.store(n, std::memory_order_release);
}

const PrometheusServerMetrics::DeviceSeries* PrometheusServerMetrics::Device(int device) const {
  if (device < 0 || device >= device_count_.load(std::memory_order_acquire)) return nullptr;
  return &devices_[device];
}

void PrometheusServerMetrics::OnRequestFinished(RpcMethod method, absl::StatusCode code,
                                                absl::Duration latency) {
  const int m = static_cast<int>(method);
  if (m < 0 || m >= kRpcMethods) return;
  requests_[m][StatusCodeIndex(code, kStatusCodes)]->Increment();
  request_latency_[m]->Observe(Seconds(latency));
}

void PrometheusServerMetrics::OnRequestRejected(RejectReason reason) {
  const int i = static_cast<int>(reason);
  if (i < 0 || i >= kRejectReasons) return;
  rejected_[i]->Increment();
}

void PrometheusServerMetrics::OnQueueDelay(absl::Duration delay) {
  queue_delay_->Observe(Seconds(delay));
}

void PrometheusServerMetrics::OnBatchExecuted(const BatchReport& report) {
  const int p = static_cast<int>(report.path);
  const DeviceSeries* d = Device(report.device);
  if (d != nullptr && p >= 0 && p < kExecutionPaths) {
    d->batches[p]->Increment();
    d->device_time[p]->Observe(Seconds(report.device_time));
  }
  batch_sequences_->Observe(static_cast<double>(report.sequences));
  batch_requests_->Observe(static_cast<double>(report.requests));
  batch_bytes_->Observe(static_cast<double>(report.input_bytes));
  sequences_verified_->Increment(static_cast<double>(report.sequences));
  if (!report.exact) non_exact_sequences_->Increment(static_cast<double>(report.sequences));
  draft_tokens_->Increment(static_cast<double>(report.draft_tokens));
  accepted_tokens_->Increment(static_cast<double>(report.accepted_tokens));
  packed_kv_bytes_->Increment(static_cast<double>(report.packed_kv_bytes));
  if (report.tree_sequences > 0) {
    tree_sequences_->Increment(static_cast<double>(report.tree_sequences));
    tree_accepted_nodes_->Increment(static_cast<double>(report.tree_accepted_nodes));
  }
}

void PrometheusServerMetrics::SetQueuedSequences(int64_t sequences) {
  queued_sequences_->Set(static_cast<double>(sequences));
}

void PrometheusServerMetrics::SetInFlightSequences(int64_t sequences) {
  in_flight_sequences_->Set(static_cast<double>(sequences));
}

void PrometheusServerMetrics::SetArenaUsage(int device, int64_t used_bytes,
                                            int64_t capacity_bytes, int64_t live_handles) {
  const DeviceSeries* d = Device(device);
  if (d == nullptr) return;
  d->arena_used_bytes->Set(static_cast<double>(used_bytes));
  d->arena_capacity_bytes->Set(static_cast<double>(capacity_bytes));
  d->live_handles->Set(static_cast<double>(live_handles));
}

void PrometheusServerMetrics::OnHandlesExpired(int64_t count) {
  handles_expired_->Increment(static_cast<double>(count));
}

void PrometheusServerMetrics::OnPayloadHostCopy(HostCopyDirection direction, int64_t bytes) {
  if (bytes > 0) host_copy_bytes_[static_cast<int>(direction)]->Increment(static_cast<double>(bytes));
}

void PrometheusServerMetrics::SetArenaLargestFreeExtent(int device, int64_t bytes) {
  if (const DeviceSeries* d = Device(device); d != nullptr) {
    d->arena_largest_free_extent_bytes->Set(static_cast<double>(bytes));
  }
}

void PrometheusServerMetrics::OnDeviceError(int device) {
  if (const DeviceSeries* d = Device(device); d != nullptr) d->device_errors->Increment();
}

void PrometheusServerMetrics::SetDeviceInService(int device, bool in_service) {
  if (const DeviceSeries* d = Device(device); d != nullptr) d->in_service->Set(in_service ? 1 : 0);
}

void PrometheusServerMetrics::SetDeviceInFlightBatches(int device, int64_t batches) {
  if (const DeviceSeries* d = Device(device); d != nullptr) {
    d->in_flight_batches->Set(static_cast<double>(batches));
  }
}

void PrometheusServerMetrics::SetRegionUsage(const RegionUsage& usage) {
  regions_[0]->Set(static_cast<double>(usage.system_regions));
  regions_[1]->Set(static_cast<double>(usage.cuda_regions));
  region_bytes_[0]->Set(static_cast<double>(usage.system_bytes));
  region_bytes_[1]->Set(static_cast<double>(usage.cuda_bytes));
}

void PrometheusServerMetrics::SetRegionRequestsInFlight(int64_t requests) {
  region_requests_in_flight_->Set(static_cast<double>(requests));
}

void PrometheusServerMetrics::SetServing(bool serving) { serving_->Set(serving ? 1 : 0); }

}  // namespace specverify::server
