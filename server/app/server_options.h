// Server configuration and its command-line flags. Each flag is
// --name=value or --name value; an unknown flag or an invalid value is an
// error naming it (start-up stops with a non-zero exit).
#ifndef SPECVERIFY_SERVER_APP_SERVER_OPTIONS_H_
#define SPECVERIFY_SERVER_APP_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace specverify::server {

struct ServerOptions {
  std::string listen_address = "0.0.0.0:50051";
  int32_t max_batch_sequences = 256;
  int64_t max_batch_bytes = int64_t{64} << 20;
  // Latency first: a free backend slot takes whatever is queued. A batch
  // below preferred_batch_sequences (0 = none) waits up to max_queue_delay_us.
  int32_t preferred_batch_sequences = 0;
  int64_t max_queue_delay_us = 0;
  int32_t max_queue_sequences = 16384;
  // Per client (mTLS identity, else one connection; issue #15): queued
  // sequences, and KV arena bytes held (handles + rows of queued and running
  // requests). 0 = no per-client limit.
  int32_t max_queued_sequences_per_client = 0;
  int64_t max_arena_bytes_per_client = 0;
  int32_t max_sequences_per_request = 256;
  int32_t max_draft_tokens = 256;
  int64_t kv_arena_bytes = int64_t{256} << 20;
  int64_t kv_handle_ttl_ms = 30000;
  int64_t max_message_bytes = int64_t{64} << 20;
  int64_t fetch_chunk_bytes = int64_t{1} << 20;
  // Answers one VerifyStream may owe (requests admitted and not yet answered
  // plus answers not yet written to the client) before the server stops
  // reading that stream until one has been written; bounds the memory a
  // client that does not read its answers can hold. [1, 65536].
  int32_t max_stream_buffered_answers = 64;
  // Data plane (docs/DATA_PLANE.md): registered regions, all clients together.
  int32_t max_regions = 64;
  // Nodes of one token tree (docs/TREES.md), [1, kMaxTreeNodes].
  int32_t max_tree_nodes = 256;
  int64_t max_region_bytes = int64_t{1} << 40;
  // One executor per entry (issue #16): cuda:0,1 or cuda:all drive several
  // GPUs; a fault takes only its device out of service unless
  // stop_on_device_failure, which stops the server at the first one.
  std::string device = "auto";
  bool stop_on_device_failure = false;
  // Prometheus exporter address; empty disables it.
  std::string metrics_address = "0.0.0.0:9401";
  // Extra gRPC channel arguments, "name=value,..." (server/rpc/grpc_tuning.h).
  std::string grpc_args;
  // TLS (PEM files): server certificate chain and key; with a client CA,
  // mutual TLS (clients must present a certificate that CA signed).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // Re-read the three TLS files this often (seconds) and use what was read
  // for new connections; 0 = read them once at start-up.
  int32_t tls_reload_interval_s = 0;
  int64_t drain_timeout_ms = 10000;
  int32_t cpu_threads = 4;
  // CUDA executor: fused-vs-two-step threshold tau in bytes (-1: calibrate at
  // start-up), forced calibration, and batches staged/executing at once.
  int64_t dispatch_threshold_bytes = -1;
  bool calibrate_dispatch = false;
  // CUDA: greedy chain batches of at most this many draft tokens are decided
  // on the host (the device only copies the accepted rows); larger ones, and
  // every one when 0, on the device (the dispatcher's fused or two-step path).
  int64_t cuda_host_decision_max_rows = 32768;
  int32_t cuda_slots = 2;
  int64_t cuda_mapped_inputs_max_bytes = 65536;
  int64_t cuda_completion_spin_us = 2000;
  bool help = false;  // --help: print FlagsHelp() and exit 0
  bool version = false;  // --version: print the version string and exit 0
};

// Parses argv[1..]. INVALID_ARGUMENT naming the flag and the accepted values.
absl::StatusOr<ServerOptions> ParseServerFlags(const std::vector<std::string>& args);

// Cross-field and range checks (also run by ParseServerFlags), naming the flag.
absl::Status ValidateServerOptions(const ServerOptions& options);

// One line per flag with its default.
std::string FlagsHelp();

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_APP_SERVER_OPTIONS_H_
