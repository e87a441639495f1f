// Drives every ServerMetrics event once with fixed values, so that an
// exposition carries every series a running server can export (used by the
// promtool lint and by the deploy checks that compare PromQL to it).
#ifndef SPECVERIFY_TESTS_METRICS_EXERCISE_EVENTS_H_
#define SPECVERIFY_TESTS_METRICS_EXERCISE_EVENTS_H_

#include "absl/time/time.h"
#include "server/metrics/server_metrics.h"

namespace specverify::testing {

inline void ExerciseEveryEvent(server::ServerMetrics& metrics) {
  using server::ExecutionPathLabel;
  metrics.SetIdentity({"0.1.0", "cpu", "CPU reference backend"});
  metrics.SetDevices({"cpu:0", "cpu:1"});
  for (server::RpcMethod method :
       {server::RpcMethod::kVerify, server::RpcMethod::kVerifyStream, server::RpcMethod::kFetchKv,
        server::RpcMethod::kReleaseKv, server::RpcMethod::kGetServerInfo}) {
    metrics.OnRequestFinished(method, absl::StatusCode::kOk, absl::Microseconds(180));
  }
  metrics.OnRequestFinished(server::RpcMethod::kVerify, absl::StatusCode::kResourceExhausted,
                            absl::Microseconds(20));
  for (server::RejectReason reason :
       {server::RejectReason::kInvalid, server::RejectReason::kQueueFull,
        server::RejectReason::kArenaFull, server::RejectReason::kDeadline,
        server::RejectReason::kCancelled, server::RejectReason::kShutdown,
        server::RejectReason::kBatchTooLarge, server::RejectReason::kClientQueueLimit,
        server::RejectReason::kClientArenaQuota}) {
    metrics.OnRequestRejected(reason);
  }
  metrics.OnQueueDelay(absl::Microseconds(90));
  for (ExecutionPathLabel path :
       {ExecutionPathLabel::kFused, ExecutionPathLabel::kTwoStep, ExecutionPathLabel::kCpu,
        ExecutionPathLabel::kNoop, ExecutionPathLabel::kSampling}) {
    server::BatchReport report;
    report.path = path;
    report.sequences = 32;
    report.requests = 4;
    report.input_bytes = 32 * 8 * 4096;
    report.draft_tokens = 32 * 8;
    report.accepted_tokens = 200;
    report.packed_kv_bytes = 200 * 4096;
    report.device_time = absl::Microseconds(6);
    report.exact = path != ExecutionPathLabel::kSampling;
    for (int device : {0, 1}) {
      report.device = device;
      metrics.OnBatchExecuted(report);
    }
  }
  metrics.SetQueuedSequences(12);
  metrics.SetInFlightSequences(32);
  for (int device : {0, 1}) {
    metrics.SetArenaUsage(device, 200 * 4096, int64_t{1} << 30, 4);
    metrics.SetArenaLargestFreeExtent(device, int64_t{1} << 29);
    metrics.SetDeviceInFlightBatches(device, 1);
  }
  metrics.OnHandlesExpired(2);
  metrics.OnDeviceError(1);
  metrics.SetDeviceInService(1, false);
  metrics.SetServing(true);
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_METRICS_EXERCISE_EVENTS_H_
