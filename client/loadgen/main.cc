// specverify-loadgen: the load-test client of the specverify Verifier service.
// See docs/LOADGEN.md for what each number means.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "client/loadgen/config.h"
#include "client/loadgen/loadgen.h"
#include "proto/runtime/version.h"

ABSL_FLAG(std::string, address, "", "Server under test: host:port, or unix:PATH on this host");
ABSL_FLAG(std::string, ceiling_address, "",
          "A --device=noop server: every step is repeated against it and the ratio reported");
ABSL_FLAG(std::string, compare_noop, "", "Alias of --ceiling_address");
ABSL_FLAG(bool, raw_ceiling, false,
          "Also run every step with VerifyCeiling, the raw-gRPC ceiling (answered on the "
          "server's RPC thread, same response size, nothing verified), against the ceiling "
          "server, else the server under test; unary");
ABSL_FLAG(std::string, compare_address, "",
          "More verifying servers run through every step beside the server under test, "
          "LABEL=host:port[,LABEL=host:port...] (e.g. cpu=127.0.0.1:50053)");
ABSL_FLAG(std::string, concurrency, "1,8,64",
          "Closed loop: comma-separated requests in flight per step");
ABSL_FLAG(std::string, rate, "",
          "Open loop: comma-separated requests/s per step (overrides --concurrency)");
ABSL_FLAG(std::string, arrival, "constant", "Open loop arrivals: constant or poisson");
ABSL_FLAG(std::string, rpc, "unary", "unary (Verify) or stream (VerifyStream, one per channel)");
ABSL_FLAG(int32_t, resend_unanswered, 0,
          "--rpc=stream: reopen a stream that a draining or restarting server ends and send again what it "
          "left unanswered, at most this many times in a row without an answer (0: the stream's end fails "
          "those requests and stops their slots)");
ABSL_FLAG(int32_t, channels, 1,
          "gRPC channels, each its own connection (and client id on a unix socket)");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(10),
          "How long to wait for the servers to accept connections");
ABSL_FLAG(absl::Duration, wait_for_serving, absl::ZeroDuration(),
          "Before the first step, wait up to this long for grpc.health.v1 to answer SERVING");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(5), "Measured time per step");
ABSL_FLAG(int64_t, requests, 0, "Measured requests per step; > 0 overrides --duration");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(1), "Warm-up per step, excluded from results");
ABSL_FLAG(double, start_at_unix, 0,
          "Start the first step at this wall-clock time (seconds since the Unix epoch, e.g. "
          "$(($(date +%s) + 30))) once set-up is done: loadgens started together then measure "
          "the same window. 0: at once");
ABSL_FLAG(int64_t, max_outstanding, 100000,
          "Open loop: most requests in flight; later ones wait (latency still counts from "
          "their intended send time)");
ABSL_FLAG(std::string, mode, "greedy",
          "greedy (target tokens) or sampled (distribution rows, rejection sampling, answers "
          "checked by recomputing the CPU reference for the fixed seeds)");
ABSL_FLAG(std::string, dtype, "fp32", "Sampled: dtype of the distribution rows, fp32, fp16 or bf16");
ABSL_FLAG(std::string, kind, "probs", "Sampled: probs, logits or logprobs (log-probabilities)");
ABSL_FLAG(std::string, method, "exact", "Sampled: exact or sigmoid (logits only; not exact)");
ABSL_FLAG(bool, draft_probs, true,
          "Sampled: send the draft's distribution rows (false: a deterministic drafter)");
ABSL_FLAG(std::string, gamma, "8", "Draft tokens per sequence: N, or LO:HI drawn uniformly");
ABSL_FLAG(double, alpha, 0.6, "Per-position acceptance probability of the synthetic drafts");
ABSL_FLAG(int32_t, sequences_per_request, 4, "Sequence drafts per request");
ABSL_FLAG(int64_t, row_bytes, 512, "KV bytes per draft position (0: no KV rows)");
ABSL_FLAG(int32_t, vocab, 32000, "Vocabulary size of the synthetic tokens");
ABSL_FLAG(uint64_t, seed, 1, "Workload, Poisson schedule and fetch-sample seed");
ABSL_FLAG(int32_t, pool_requests, 1024, "Distinct requests generated and cycled through");
ABSL_FLAG(std::string, kv_return, "handle",
          "How KV rows come back: handle, inline, none, or region (into the loadgen's region; "
          "needs --transport=shm|cuda)");
ABSL_FLAG(std::string, transport, "inline",
          "Where payload travels: inline (in the messages), shm (a POSIX shared-memory region the "
          "loadgen registers) or cuda (CUDA memory exported by IPC; a CUDA build and a GPU)");
ABSL_FLAG(int32_t, cuda_device, 0, "--transport=cuda: the GPU of the loadgen's region");
ABSL_FLAG(int32_t, region_copies, 1,
          "--transport=shm|cuda: copies of the pool's tensors in the region; request i reads "
          "copy (i / --pool_requests) % N, so requests in flight read different memory");
ABSL_FLAG(std::string, tree, "",
          "Token-tree drafts instead of chains: WIDTHxDEPTH (full tree), random:N, medusa, eagle, "
          "or file:PATH (Medusa-style path list); --alpha is the acceptance per level. Sampled "
          "trees take fp32/fp16/bf16 probabilities");
ABSL_FLAG(bool, fetch_kv, false, "Fetch (and release) every answer's KV rows and check them");
ABSL_FLAG(bool, release_kv, true,
          "Release KV handles that are not fetched; false leaves them to expire by TTL "
          "(a handle leaker, for soak tests)");
ABSL_FLAG(double, fetch_kv_fraction, 0.0,
          "Fetch and check this fraction of answers' KV rows (the rest are released)");
ABSL_FLAG(bool, tls, false, "Use TLS");
ABSL_FLAG(std::string, tls_ca, "", "PEM root certificates (default: the system's)");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate (mutual TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM client key (mutual TLS)");
ABSL_FLAG(std::string, tls_server_name, "", "Name to check in the server certificate");
ABSL_FLAG(absl::Duration, deadline, absl::Seconds(10),
          "Per-RPC deadline of Verify, FetchKv, ReleaseKv (0: none)");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20, "Largest gRPC message sent or received");
ABSL_FLAG(std::string, metrics_url, "",
          "The server's Prometheus endpoint, http://host:port/metrics, scraped around each step");
ABSL_FLAG(std::string, json, "", "Write the report as JSON to this file");
ABSL_FLAG(std::string, csv, "", "Write one CSV row per step to this file");
ABSL_FLAG(bool, progress, false, "Live progress on stderr (default: only when it is a terminal)");
ABSL_FLAG(bool, quiet, false, "No live progress even on a terminal");
ABSL_FLAG(double, max_error_fraction, 1.0,
          "Exit 3 when more than this fraction of requests fail with an RPC error");

namespace {

using specverify::loadgen::LoadgenConfig;

// absl flag names are identifiers; accept the dashed spelling too
// (--fetch-kv, --kv-return, --metrics-url, ...).
std::vector<std::string> NormalizeFlagNames(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (a.size() < 3 || a[0] != '-' || a[1] != '-') continue;
    const size_t name_end = std::min(a.find('='), a.size());
    for (size_t j = 2; j < name_end; ++j) {
      if (a[j] == '-') a[j] = '_';
    }
  }
  return args;
}

int Fail(const absl::Status& status) {
  std::cerr << "specverify-loadgen: " << status.message() << "\n";
  return specverify::loadgen::kExitSetupError;
}

}  // namespace

int main(int argc, char** argv) {
  namespace lg = specverify::loadgen;
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "client/loadgen/");
  };
  usage_config.contains_helpshort_flags = usage_config.contains_help_flags;
  // --version: the same string the server reports (absl's default names the
  // binary and whether NDEBUG was defined, not the release).
  usage_config.version_string = [] { return "specverify-loadgen " + specverify::VersionString() + "\n"; };
  absl::SetFlagsUsageConfig(usage_config);
  absl::SetProgramUsageMessage(
      "Load-test client of the specverify Verifier service; checks every answer.\n"
      "  closed loop: specverify-loadgen --address=HOST:PORT --concurrency=1,8,64\n"
      "  open loop:   specverify-loadgen --address=HOST:PORT --rate=1000,5000 --arrival=poisson");
  std::vector<std::string> args = NormalizeFlagNames(argc, argv);
  std::vector<char*> arg_pointers;
  for (std::string& a : args) arg_pointers.push_back(a.data());
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(arg_pointers.size()), arg_pointers.data());
  if (positional.size() > 1) {
    return Fail(absl::InvalidArgumentError(
        std::string("unexpected argument '") + positional[1] + "' (flags look like --name=value)"));
  }

  LoadgenConfig config;
  config.address = absl::GetFlag(FLAGS_address);
  config.ceiling_address = absl::GetFlag(FLAGS_ceiling_address);
  if (config.ceiling_address.empty()) config.ceiling_address = absl::GetFlag(FLAGS_compare_noop);
  config.raw_ceiling = absl::GetFlag(FLAGS_raw_ceiling);
  if (const std::string compare = absl::GetFlag(FLAGS_compare_address); !compare.empty()) {
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> parsed =
        lg::ParseLabeledAddresses(compare);
    if (!parsed.ok()) return Fail(parsed.status());
    config.compare_addresses = *std::move(parsed);
  }
  if (!absl::GetFlag(FLAGS_rate).empty()) {
    config.mode = lg::LoopMode::kOpen;
    auto rates = lg::ParsePositiveDoubleList(absl::GetFlag(FLAGS_rate), "rate");
    if (!rates.ok()) return Fail(rates.status());
    config.rates = *rates;
  } else {
    auto levels = lg::ParsePositiveIntList(absl::GetFlag(FLAGS_concurrency), "concurrency");
    if (!levels.ok()) return Fail(levels.status());
    config.concurrency = *levels;
  }
  auto arrival = lg::ParseArrivalProcess(absl::GetFlag(FLAGS_arrival));
  if (!arrival.ok()) return Fail(arrival.status());
  config.arrival = *arrival;
  auto rpc = lg::ParseRpcKind(absl::GetFlag(FLAGS_rpc));
  if (!rpc.ok()) return Fail(rpc.status());
  config.rpc = *rpc;
  config.resend_unanswered = absl::GetFlag(FLAGS_resend_unanswered);
  config.channels = absl::GetFlag(FLAGS_channels);
  config.connect_timeout_s = absl::ToDoubleSeconds(absl::GetFlag(FLAGS_connect_timeout));
  config.wait_for_serving_s = absl::ToDoubleSeconds(absl::GetFlag(FLAGS_wait_for_serving));
  config.duration_s = absl::ToDoubleSeconds(absl::GetFlag(FLAGS_duration));
  config.requests = absl::GetFlag(FLAGS_requests);
  config.warmup_s = absl::ToDoubleSeconds(absl::GetFlag(FLAGS_warmup));
  config.start_at_unix_s = absl::GetFlag(FLAGS_start_at_unix);
  config.max_outstanding = absl::GetFlag(FLAGS_max_outstanding);

  auto gamma = lg::ParseGammaRange(absl::GetFlag(FLAGS_gamma));
  if (!gamma.ok()) return Fail(gamma.status());
  auto workload_mode = lg::ParseWorkloadMode(absl::GetFlag(FLAGS_mode));
  if (!workload_mode.ok()) return Fail(workload_mode.status());
  config.workload.mode = *workload_mode;
  auto dtype = lg::ParseSampleDtype(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return Fail(dtype.status());
  config.workload.dtype = *dtype;
  auto kind = lg::ParseSampleKind(absl::GetFlag(FLAGS_kind));
  if (!kind.ok()) return Fail(kind.status());
  config.workload.kind = *kind;
  auto method = lg::ParseSampleMethod(absl::GetFlag(FLAGS_method));
  if (!method.ok()) return Fail(method.status());
  config.workload.method = *method;
  config.workload.draft_probs = absl::GetFlag(FLAGS_draft_probs);
  config.workload.gamma_min = gamma->first;
  config.workload.gamma_max = gamma->second;
  config.workload.alpha = absl::GetFlag(FLAGS_alpha);
  config.workload.sequences_per_request = absl::GetFlag(FLAGS_sequences_per_request);
  config.workload.row_bytes = absl::GetFlag(FLAGS_row_bytes);
  config.workload.vocab_size = absl::GetFlag(FLAGS_vocab);
  config.workload.seed = absl::GetFlag(FLAGS_seed);
  config.workload.pool_requests = absl::GetFlag(FLAGS_pool_requests);
  auto kv_return = lg::ParseKvReturnMode(absl::GetFlag(FLAGS_kv_return));
  if (!kv_return.ok()) return Fail(kv_return.status());
  config.workload.kv_return = *kv_return;
  auto transport = lg::ParseTransport(absl::GetFlag(FLAGS_transport));
  if (!transport.ok()) return Fail(transport.status());
  config.workload.transport = *transport;
  config.workload.cuda_device = absl::GetFlag(FLAGS_cuda_device);
  config.workload.region_copies = absl::GetFlag(FLAGS_region_copies);
  config.workload.tree = absl::GetFlag(FLAGS_tree);
  config.workload.release_kv = absl::GetFlag(FLAGS_release_kv);
  config.workload.fetch_kv_fraction =
      absl::GetFlag(FLAGS_fetch_kv) ? 1.0 : absl::GetFlag(FLAGS_fetch_kv_fraction);

  config.transport.tls = absl::GetFlag(FLAGS_tls);
  config.transport.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  config.transport.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  config.transport.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  config.transport.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  config.transport.deadline_ms = absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_deadline));
  config.transport.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);

  config.metrics_url = absl::GetFlag(FLAGS_metrics_url);
  config.json_path = absl::GetFlag(FLAGS_json);
  config.csv_path = absl::GetFlag(FLAGS_csv);
  config.progress = !absl::GetFlag(FLAGS_quiet) &&
                    (absl::GetFlag(FLAGS_progress) || isatty(STDERR_FILENO) == 1);
  config.max_error_fraction = absl::GetFlag(FLAGS_max_error_fraction);

  return lg::RunLoadgenMain(config, std::cout, std::cerr);
}
