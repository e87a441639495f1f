// The load generator's outputs: a table for people, JSON and CSV for machines.
// Latencies are reported in microseconds in the table and CSV and in
// nanoseconds in JSON (no rounding there).
#ifndef SPECVERIFY_CLIENT_LOADGEN_REPORT_H_
#define SPECVERIFY_CLIENT_LOADGEN_REPORT_H_

#include <string>
#include <vector>

#include "client/loadgen/config.h"
#include "client/loadgen/step_result.h"

namespace specverify::loadgen {

struct ServerDescription {
  std::string address;
  std::string backend;      // "cpu", "cuda", "noop", or "unknown"
  std::string device_name;
  std::string version;
  int64_t max_queue_delay_us = -1;  // ServerLimits; -1 when unknown
};

struct RunReport {
  LoadgenConfig config;
  // Mean serialized VerifyRequest of the pool: the payload on the wire per
  // request (tensors in regions travel as references).
  int64_t request_wire_bytes = 0;
  ServerDescription server;
  bool has_ceiling = false;
  ServerDescription ceiling;
  // --compare_address servers, in flag order (StepPair::compare matches).
  std::vector<std::pair<std::string, ServerDescription>> compare;
  std::vector<StepPair> steps;

  int64_t total_wrong_answers() const;
  int64_t total_kv_mismatches() const;
  int64_t total_sent() const;
  int64_t total_rpc_errors() const;
};

// Throughput and p99 of the server relative to the no-op server in the same
// step: throughput_ratio = server / ceiling (1 = at the transport ceiling),
// p99_ratio = server p99 / ceiling p99. 0 where the ceiling measured nothing.
struct CeilingRatio {
  double throughput_ratio = 0;
  double p99_ratio = 0;
  int64_t p99_added_ns = 0;  // server p99 minus ceiling p99
};
CeilingRatio ComputeCeilingRatio(const StepPair& pair);

// The service target under load (issue #12): throughput at least 90% of the
// no-op server's, and p99 at most the no-op p99 plus max_queue_delay plus
// 300 us. Needs the server's max_queue_delay_us.
inline constexpr double kTargetThroughputRatio = 0.9;
inline constexpr int64_t kTargetP99SlackNs = 300'000;
bool MeetsServiceTarget(const CeilingRatio& ratio, int64_t max_queue_delay_us);

// The overhead of the service beyond a plain gRPC round trip (issue #12):
// server p50 minus VerifyCeiling p50 in the same step, and the target at
// concurrency 1: <= 40 us without KV rows returned, <= 60 us with rows
// (inline or handle). Needs StepPair::has_raw.
inline constexpr int64_t kTargetAddedP50NoKvNs = 40'000;
inline constexpr int64_t kTargetAddedP50WithKvNs = 60'000;
int64_t AddedOverRawP50Ns(const StepPair& pair);
int64_t AddedOverRawTargetNs(const WorkloadConfig& workload);

std::string FormatTable(const RunReport& report);
std::string FormatJson(const RunReport& report);
std::string FormatCsv(const RunReport& report);

// Escapes a string for a JSON string literal (without the quotes).
std::string JsonEscape(absl::string_view text);

}  // namespace specverify::loadgen

#endif  // SPECVERIFY_CLIENT_LOADGEN_REPORT_H_
