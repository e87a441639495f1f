// What one specverify-loadgen run does: the target, the load shape (closed
// loop over a concurrency sweep, or open loop over a rate sweep), the RPC
// flavour, the workload and the outputs. Built from flags by main.cc; the
// parsing helpers live here so that tests can reach them.
#ifndef SPECVERIFY_CLIENT_LOADGEN_CONFIG_H_
#define SPECVERIFY_CLIENT_LOADGEN_CONFIG_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/loadgen/schedule.h"
#include "kernels/sampling/rejection_params.h"

namespace specverify::loadgen {

enum class LoopMode { kClosed, kOpen };
enum class RpcKind { kUnary, kStream };
// How the accepted KV rows come back (VerifyRequest.kv_return).
enum class KvReturnMode { kHandle, kInline, kNone, kRegion };
// Where the payload travels (docs/DATA_PLANE.md): in the messages, or in a
// region the loadgen registers as a co-located worker would.
enum class Transport { kInline, kShm, kCuda };
// What the drafts ask for: greedy (target tokens) or sampled (distribution
// rows, rejection sampling, checked by recomputing the CPU reference).
enum class WorkloadMode { kGreedy, kSampled };

struct TransportOptions {
  bool tls = false;
  std::string tls_ca_file;      // PEM roots; empty = system roots
  std::string tls_cert_file;    // client certificate for mutual TLS (optional)
  std::string tls_key_file;
  std::string tls_server_name;  // overrides the name checked in the certificate
  int64_t deadline_ms = 10000;  // per-RPC deadline; 0 = none
  int64_t max_message_bytes = 64 << 20;  // send and receive limit
};

struct WorkloadConfig {
  WorkloadMode mode = WorkloadMode::kGreedy;
  // Sampled only (kernels/workload/sampling_workload.h); --vocab is the rows'
  // width, --alpha does not apply (acceptance follows the distributions).
  SampleDtype dtype = SampleDtype::kFloat32;
  SampleValueKind kind = SampleValueKind::kProbabilities;
  SampleMethod method = SampleMethod::kExact;
  bool draft_probs = true;
  int32_t gamma_min = 8;
  int32_t gamma_max = 8;
  double alpha = 0.6;
  int32_t sequences_per_request = 4;
  int64_t row_bytes = 512;
  int32_t vocab_size = 32000;
  uint64_t seed = 1;
  // Distinct requests generated up front and cycled through; request i uses
  // pool entry i % pool_requests. Generation is not on the timed path.
  int32_t pool_requests = 1024;
  KvReturnMode kv_return = KvReturnMode::kHandle;
  Transport transport = Transport::kInline;
  // Token trees (docs/TREES.md): "" = chains; "WIDTHxDEPTH" (a full tree),
  // "random:N" (random trees of N nodes, 1-4 children per node), "medusa",
  // "eagle", or "file:PATH" (a Medusa-style path list). --alpha is then the
  // acceptance per level.
  std::string tree;
  int32_t cuda_device = 0;  // --transport=cuda: where the loadgen's region lives
  // --transport=shm|cuda: the region holds the pool's tensors this many
  // times and request i reads copy (i / pool_requests) % region_copies, so
  // requests in flight read different memory (as a worker's do) without
  // generating more of them; with --kv_return=region each copy has its own
  // output rows.
  int32_t region_copies = 1;
  // Fetch (and release) the KV rows of this fraction of the answers and
  // compare them byte for byte with the oracle. 0 = never.
  double fetch_kv_fraction = 0.0;
  // False: handles not fetched are never released, and expire by TTL (a
  // handle leaker, for soak tests: scripts/soak.sh).
  bool release_kv = true;
};

struct LoadgenConfig {
  std::string address;          // host:port of the server under test
  std::string ceiling_address;  // optional: a --device=noop server, same workload
  // Each step also runs VerifyCeiling (the raw-gRPC ceiling: answered on the
  // server's RPC thread, same response size, nothing verified) against the
  // ceiling server, else the server under test. Unary always.
  bool raw_ceiling = false;
  // More verifying servers run through every step beside the server under
  // test, labelled (e.g. {"cpu", "127.0.0.1:50053"}): answers checked alike.
  std::vector<std::pair<std::string, std::string>> compare_addresses;
  TransportOptions transport;
  LoopMode mode = LoopMode::kClosed;
  std::vector<int32_t> concurrency = {1, 8, 64};  // closed-loop sweep
  std::vector<double> rates;                      // open-loop sweep, requests/s
  ArrivalProcess arrival = ArrivalProcess::kConstant;
  RpcKind rpc = RpcKind::kUnary;
  // Stream RPCs: a VerifyStream call that ends UNAVAILABLE (a draining or
  // restarting server) is replaced by one that waits for the server, and
  // what it left unanswered is sent again; at most this many new calls in a
  // row without an answer. 0: the stream's end fails what it left
  // unanswered and stops those slots.
  int32_t resend_unanswered = 0;
  int32_t channels = 1;         // separate gRPC channels (TCP connections)
  double connect_timeout_s = 10.0;  // to reach the server before the first step
  // > 0: before the first step, poll grpc.health.v1 Check on every server
  // until it answers SERVING, for at most this long.
  double wait_for_serving_s = 0.0;
  double duration_s = 5.0;      // measured time per step (when requests == 0)
  int64_t requests = 0;         // measured requests per step; > 0 overrides duration
  double warmup_s = 1.0;        // per step, excluded from results
  // > 0: the first step starts at this wall-clock time (seconds since the
  // Unix epoch) once set-up is done, so that loadgens started together
  // (workloads of different set-up times) measure the same window. Set-up
  // that ends later starts at once, with a warning.
  double start_at_unix_s = 0.0;
  // Open loop: requests in flight beyond this wait in the client (their
  // latency still counts from their intended send time).
  int64_t max_outstanding = 100000;
  WorkloadConfig workload;
  std::string metrics_url;      // optional: http://host:port/metrics
  std::string json_path;
  std::string csv_path;
  bool progress = false;        // live progress on stderr
  // Exit non-zero when more than this fraction of requests failed with an
  // RPC error (1 = never on errors; wrong answers always fail the run).
  double max_error_fraction = 1.0;
};

absl::StatusOr<Transport> ParseTransport(absl::string_view text);
absl::string_view TransportName(Transport transport);

// Checks ranges and combinations; the message names the flag.
absl::Status ValidateConfig(const LoadgenConfig& config);

// "1,8,64" -> {1, 8, 64}; every element > 0.
absl::StatusOr<std::vector<int32_t>> ParsePositiveIntList(absl::string_view text,
                                                          absl::string_view flag);
absl::StatusOr<std::vector<double>> ParsePositiveDoubleList(absl::string_view text,
                                                            absl::string_view flag);
// "8" -> {8, 8}; "4:16" -> {4, 16} (uniform per sequence), 1 <= lo <= hi.
absl::StatusOr<std::pair<int32_t, int32_t>> ParseGammaRange(absl::string_view text);
absl::StatusOr<RpcKind> ParseRpcKind(absl::string_view text);
// "cpu=127.0.0.1:50053,gpu2=host:port" -> {{"cpu", ...}, {"gpu2", ...}}: labels
// of letters, digits, '-' and '_', unique, none of server/noop/raw.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseLabeledAddresses(
    absl::string_view text);
absl::StatusOr<ArrivalProcess> ParseArrivalProcess(absl::string_view text);
absl::StatusOr<KvReturnMode> ParseKvReturnMode(absl::string_view text);
absl::StatusOr<WorkloadMode> ParseWorkloadMode(absl::string_view text);     // greedy | sampled
absl::StatusOr<SampleDtype> ParseSampleDtype(absl::string_view text);       // fp32 | fp16 | bf16
absl::StatusOr<SampleValueKind> ParseSampleKind(absl::string_view text);    // probs | logits | logprobs
absl::StatusOr<SampleMethod> ParseSampleMethod(absl::string_view text);     // exact | sigmoid

absl::string_view LoopModeName(LoopMode mode);
absl::string_view RpcKindName(RpcKind kind);
absl::string_view ArrivalProcessName(ArrivalProcess process);
absl::string_view KvReturnModeName(KvReturnMode mode);
absl::string_view WorkloadModeName(WorkloadMode mode);
absl::string_view SampleDtypeName(SampleDtype dtype);
absl::string_view SampleKindName(SampleValueKind kind);
absl::string_view SampleMethodName(SampleMethod method);

}  // namespace specverify::loadgen

#endif  // SPECVERIFY_CLIENT_LOADGEN_CONFIG_H_
