// Runs one load step (one concurrency level or one rate) against a target and
// measures it.
//
// Closed loop: `concurrency` independent slots, each sending its next request
// as soon as its previous one (and that answer's KV fetch or release) is done.
// Open loop: a pacing thread sends request i at start + schedule offset i,
// whether or not earlier requests were answered; latency counts from that
// intended time, and how late the client actually sent is reported as lag.
// Both: the first `warmup_s` are not counted; then `requests` requests (or
// `duration_s` seconds of sends) are measured and every one is waited for.
//
// Unary steps use the callback stub; stream steps multiplex every request of
// a channel over one VerifyStream call (with resend_unanswered, successive
// calls through a drain or restart of the server), matching answers by
// request_id.
#ifndef SPECVERIFY_CLIENT_LOADGEN_STEP_RUNNER_H_
#define SPECVERIFY_CLIENT_LOADGEN_STEP_RUNNER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/loadgen/load_workload.h"
#include "client/loadgen/step_result.h"
#include "client/loadgen/target.h"

namespace specverify::loadgen {

struct StepOptions {
  double duration_s = 5.0;
  int64_t requests = 0;       // > 0: measure this many requests instead of a duration
  double warmup_s = 1.0;
  int64_t max_outstanding = 100000;  // open loop only
  int64_t deadline_ms = 10000;       // per unary RPC and per FetchKv; 0 = none
  double fetch_kv_fraction = 0.0;
  bool release_kv = true;            // false: unfetched handles expire by TTL
  int32_t resend_unanswered = 0;     // stream steps: LoadgenConfig::resend_unanswered
  uint64_t seed = 1;                 // Poisson arrivals and the fetch sample
  bool progress = false;             // a live line on stderr
  std::string label;                 // shown in the progress line
  // Send VerifyCeiling (the raw-gRPC ceiling) instead of Verify, unary
  // whatever the step's rpc; its placeholder handles are never fetched.
  bool ceiling_rpc = false;
  // Examples of wrong answers kept for the report.
  int32_t max_wrong_examples = 5;
};

// Runs the step. Errors of individual RPCs are counted in the result; the
// returned status is an error only when the step could not run at all.
absl::StatusOr<StepResult> RunStep(Target& target, const LoadWorkload& workload,
                                   const StepSpec& spec, const StepOptions& options);

}  // namespace specverify::loadgen

#endif  // SPECVERIFY_CLIENT_LOADGEN_STEP_RUNNER_H_
