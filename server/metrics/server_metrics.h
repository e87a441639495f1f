// The events the server reports for observability. The server calls this
// interface (injected, never #ifdef'd); server/metrics/ implements it with
// prometheus-cpp. Every call is per request or per batch, never per token, so
// an implementation may take a lock per call.
//
// Thread safety: implementations must be safe to call from any thread.
#ifndef SPECVERIFY_SERVER_METRICS_SERVER_METRICS_H_
#define SPECVERIFY_SERVER_METRICS_SERVER_METRICS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace specverify::server {

enum class RpcMethod {
  kVerify,
  kVerifyStream,
  kFetchKv,
  kReleaseKv,
  kGetServerInfo,
  kVerifyCeiling,
  kRegisterRegion,
  kUnregisterRegion,
  kListRegions
};

// Payload copies on the host: into the backend's staging, or out of the
// arena / pinned results into a response (inline KV, FetchKv chunks).
enum class HostCopyDirection { kIn, kOut };

// Why a request was answered without being executed.
enum class RejectReason {
  kInvalid,
  kQueueFull,
  kArenaFull,
  kDeadline,
  kCancelled,
  kShutdown,
  // The formed batch does not fit the backend's staging (its slot limits).
  kBatchTooLarge,
  // Per-client limits (issue #15): --max_queued_sequences_per_client,
  // --max_arena_bytes_per_client. By reason only: no client label.
  kClientQueueLimit,
  kClientArenaQuota
};

// Which implementation ran a batch (on CUDA: decided on the host, or the
// dispatcher's fused / two-step choice, or the sampling kernels).
enum class ExecutionPathLabel { kFused, kTwoStep, kCpu, kNoop, kSampling, kHostDecided };

struct BatchReport {
  int device = 0;  // index into SetDevices' names
  ExecutionPathLabel path = ExecutionPathLabel::kCpu;
  int32_t sequences = 0;
  int32_t requests = 0;
  int64_t input_bytes = 0;       // bytes staged for the batch (tokens, KV, distributions)
  int64_t draft_tokens = 0;      // sum of gamma
  int64_t accepted_tokens = 0;   // sum of k
  int64_t packed_kv_bytes = 0;   // accepted rows * row_bytes
  absl::Duration device_time;    // kernels (or CPU backend) time of the batch
  bool exact = true;             // false when the sigmoid approximation ran
  // Token trees (a tree batch's sequences, chains riding in it included):
  // accepted nodes over sequences is the mean accepted path length.
  int64_t tree_sequences = 0;
  int64_t tree_accepted_nodes = 0;
};

// Registered regions of the data plane, by kind (client-chosen names are
// not labels: unbounded cardinality).
struct RegionUsage {
  int64_t system_regions = 0;
  int64_t system_bytes = 0;
  int64_t cuda_regions = 0;
  int64_t cuda_bytes = 0;
};

struct ServerIdentity {
  std::string version;
  std::string backend;      // "cpu", "cuda", "noop"
  std::string device_name;
};

class ServerMetrics {
 public:
  virtual ~ServerMetrics() = default;

  virtual void SetIdentity(const ServerIdentity& identity) = 0;
  // The server's devices (executors), by index: "cuda:0", "cuda:1", "cpu".
  // Their names are the `device` label of the per-device series (low
  // cardinality: one per executor). Called once at start-up, before any
  // per-device event; events for an index it did not name are dropped.
  virtual void SetDevices(const std::vector<std::string>& names) = 0;
  // One finished call: unary RPCs once, VerifyStream once per request on it.
  // `latency` is server-side, arrival to response handed to gRPC.
  virtual void OnRequestFinished(RpcMethod method, absl::StatusCode code,
                                 absl::Duration latency) = 0;
  // A request answered without execution, by reason.
  virtual void OnRequestRejected(RejectReason reason) = 0;
  // Per dispatched request: arrival at the batcher to its batch's dispatch.
  virtual void OnQueueDelay(absl::Duration delay) = 0;
  virtual void OnBatchExecuted(const BatchReport& report) = 0;
  virtual void SetQueuedSequences(int64_t sequences) = 0;
  virtual void SetInFlightSequences(int64_t sequences) = 0;
  // Per device (its KV arena).
  virtual void SetArenaUsage(int device, int64_t used_bytes, int64_t capacity_bytes,
                             int64_t live_handles) = 0;
  virtual void OnHandlesExpired(int64_t count) = 0;
  // The largest request the arena could still take in one piece
  // (fragmentation: free bytes may be many times this). Reported every reap
  // interval and whenever a reservation fails, not per batch: it walks the
  // free list.
  virtual void SetArenaLargestFreeExtent(int device, int64_t bytes) = 0;
  // Payload bytes copied on the host (per batch, or per FetchKv chunk): the
  // data plane's copy count, one each way by design.
  virtual void OnPayloadHostCopy(HostCopyDirection direction, int64_t bytes) = 0;
  // A device (CUDA) error: the device is out of service after this (and the
  // server stops serving when it was the last one, or by flag).
  virtual void OnDeviceError(int device) = 0;
  // True while the device takes batches; false once a fault took it out.
  virtual void SetDeviceInService(int device, bool in_service) = 0;
  // Batches submitted to the device and not yet completed, on every change.
  virtual void SetDeviceInFlightBatches(int device, int64_t batches) = 0;
  // On every register / unregister.
  virtual void SetRegionUsage(const RegionUsage& usage) = 0;
  // Requests holding a region (queued or running), on every change: per
  // request, never per token.
  virtual void SetRegionRequestsInFlight(int64_t requests) = 0;
  // Mirrors the gRPC health status: true once the backend is ready, false
  // while draining or after a device fault.
  virtual void SetServing(bool serving) = 0;
};

// Reports nothing; the default until a real exporter is injected. Tests
// derive their recording doubles from it and override only what they record.
class NoopServerMetrics : public ServerMetrics {
 public:
  void SetIdentity(const ServerIdentity&) override {}
  void SetDevices(const std::vector<std::string>&) override {}
  void OnRequestFinished(RpcMethod, absl::StatusCode, absl::Duration) override {}
  void OnRequestRejected(RejectReason) override {}
  void OnQueueDelay(absl::Duration) override {}
  void OnBatchExecuted(const BatchReport&) override {}
  void SetQueuedSequences(int64_t) override {}
  void SetInFlightSequences(int64_t) override {}
  void SetArenaUsage(int, int64_t, int64_t, int64_t) override {}
  void OnHandlesExpired(int64_t) override {}
  void SetArenaLargestFreeExtent(int, int64_t) override {}
  void OnPayloadHostCopy(HostCopyDirection, int64_t) override {}
  void OnDeviceError(int) override {}
  void SetDeviceInService(int, bool) override {}
  void SetDeviceInFlightBatches(int, int64_t) override {}
  void SetRegionUsage(const RegionUsage&) override {}
  void SetRegionRequestsInFlight(int64_t) override {}
  void SetServing(bool) override {}
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_METRICS_SERVER_METRICS_H_
