// What one load step measured. Counting invariants (tests assert them):
//   sent == ok + rpc_errors        (every measured request is accounted for)
//   latency.count() == ok          (one latency per successful answer)
//   wrong_answers + unverified <= ok, except that a VerifyStream answer to a
//   request id never sent also counts as a wrong answer
// A request is "measured" when its intended send time falls inside the
// measurement window (after warm-up); warm-up requests are not counted at all.
#ifndef SPECVERIFY_CLIENT_LOADGEN_STEP_RESULT_H_
#define SPECVERIFY_CLIENT_LOADGEN_STEP_RESULT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "client/loadgen/config.h"
#include "client/loadgen/histogram.h"

namespace specverify::loadgen {

struct StepSpec {
  LoopMode mode = LoopMode::kClosed;
  int32_t concurrency = 1;      // closed loop
  double rate = 0;              // open loop, requests/s
  ArrivalProcess arrival = ArrivalProcess::kConstant;
  RpcKind rpc = RpcKind::kUnary;
  int32_t channels = 1;
};

// The server's own view of the step, from /metrics scraped around it.
struct ServerMetricsDelta {
  bool scraped = false;
  std::string error;               // why not, when scraped is false
  bool has_queue_delay = false;
  double queue_delay_mean_s = 0;
  bool has_device_time = false;
  double device_time_mean_s = 0;   // per batch
  double batches = 0;
};

struct StepResult {
  // "server", "ceiling" (the no-op server), "raw" (VerifyCeiling) or a
  // --compare_address label.
  std::string target = "server";
  std::string backend;            // from GetServerInfo, e.g. "cpu", "cuda", "noop"
  StepSpec spec;

  int64_t sent = 0;
  int64_t ok = 0;
  int64_t rpc_errors = 0;
  std::map<std::string, int64_t> errors_by_code;  // e.g. "RESOURCE_EXHAUSTED" -> n
  int64_t wrong_answers = 0;    // ok answers that disagree with the oracle
  int64_t unverified = 0;       // ok answers with verified=false (no-op server)
  std::vector<std::string> wrong_answer_examples;  // the first few, for humans
  std::vector<std::string> error_examples;         // the first few RPC errors

  int64_t sequences = 0;        // in ok answers
  int64_t draft_tokens = 0;     // sum of gamma over those sequences
  int64_t accepted_tokens = 0;  // sum of k reported by the server
  int64_t emitted_tokens = 0;   // sum of k + 1 (kept drafts plus the next token)

  int64_t kv_fetches = 0;       // FetchKv calls completed successfully
  int64_t kv_fetch_errors = 0;  // FetchKv/ReleaseKv RPC failures
  int64_t kv_mismatches = 0;    // fetched or inline rows that differ from the oracle
  int64_t kv_released = 0;      // handles released without fetching

  // From the first measured intended send to the last measured completion.
  double window_s = 0;
  // When that window began, in seconds since the Unix epoch: lines up steps
  // of loadgens run side by side (they measure one load only if their
  // windows overlap) and joins them with other logs.
  double window_start_unix_s = 0;
  // Open loop: achieved offered rate (measured sends / send window).
  double offered_rate = 0;
  // CPU the load generator itself used during the step (warm-up included),
  // in cores: near the machine's core count means the client, not the
  // server, may be what limits the numbers.
  double client_cpu_cores = 0;

  LatencyHistogram latency;       // ns, from the intended send time (ok only)
  LatencyHistogram service_time;  // ns, from the actual send time (ok only)
  LatencyHistogram send_lag;      // ns, actual minus intended send time (all sent)
  LatencyHistogram kv_fetch_latency;   // ns per FetchKv stream
  LatencyHistogram server_queue;  // ns, ServerTiming.queue_ns of ok answers
  LatencyHistogram server_time;   // ns, ServerTiming.server_ns of ok answers
  // ns, ServerTiming.submit_ns (arrival to the batch handed to the backend:
  // queue, staging, launch calls) and complete_ns (to the backend reporting
  // it done: device work, copies back, completion hand-off) of ok answers.
  LatencyHistogram server_submit;
  LatencyHistogram server_complete;
  // Ok answers by the executor that ran them (ServerTiming.device): how a
  // multi-GPU server spread the load (issue #16).
  std::map<int32_t, int64_t> answers_by_device;

  ServerMetricsDelta metrics;

  double requests_per_s() const { return window_s > 0 ? ok / window_s : 0; }
  double sequences_per_s() const { return window_s > 0 ? sequences / window_s : 0; }
  double tokens_per_s() const { return window_s > 0 ? emitted_tokens / window_s : 0; }
  double acceptance() const {
    return draft_tokens > 0 ? static_cast<double>(accepted_tokens) / draft_tokens : 0;
  }
  bool failed_correctness() const { return wrong_answers > 0 || kv_mismatches > 0; }
};

// A step against the server under test and, optionally, the same step against
// the no-op (transport ceiling) server.
struct StepPair {
  StepResult server;
  bool has_ceiling = false;
  StepResult ceiling;
  // VerifyCeiling, the raw-gRPC ceiling (--raw_ceiling): target "raw".
  bool has_raw = false;
  StepResult raw;
  // --compare_address servers, in flag order: target = their label.
  std::vector<StepResult> compare;
};

}  // namespace specverify::loadgen

#endif  // SPECVERIFY_CLIENT_LOADGEN_STEP_RESULT_H_
