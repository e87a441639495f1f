#include "server/app/server_options.h"

#include "kernels/tree/tree_params.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/rpc/grpc_tuning.h"
#include "absl/strings/str_split.h"
#include "kernels/common/status_macros.h"
#include "kernels/layout/ragged_batch.h"
#include "server/app/listen_address.h"
#include "server/backend/backend_factory.h"
#include "server/rpc/validation.h"

namespace specverify::server {
namespace {

struct Flag {
  std::string help;
  std::function<std::string(const ServerOptions&)> show;
  // Returns an error message (without the flag name) or "".
  std::function<std::string(absl::string_view, ServerOptions&)> set;
  // A bare --name means true (the gflags/absl convention) instead of taking
  // the next argument as its value.
  bool is_bool = false;
};

template <typename T>
Flag IntFlag(T ServerOptions::*field, std::string help) {
  Flag f;
  f.help = std::move(help);
  f.show = [field](const ServerOptions& o) { return absl::StrCat(o.*field); };
  f.set = [field](absl::string_view v, ServerOptions& o) -> std::string {
    T parsed;
    if (!absl::SimpleAtoi(v, &parsed)) return "is not an integer";
    o.*field = parsed;
    return "";
  };
  return f;
}

Flag StringFlag(std::string ServerOptions::*field, std::string help) {
  Flag f;
  f.help = std::move(help);
  f.show = [field](const ServerOptions& o) { return o.*field; };
  f.set = [field](absl::string_view v, ServerOptions& o) -> std::string {
    o.*field = std::string(v);
    return "";
  };
  return f;
}

Flag BoolFlag(bool ServerOptions::*field, std::string help) {
  Flag f;
  f.help = std::move(help);
  f.show = [field](const ServerOptions& o) { return std::string(o.*field ? "true" : "false"); };
  f.set = [field](absl::string_view v, ServerOptions& o) -> std::string {
    bool parsed;
    if (!absl::SimpleAtob(v, &parsed)) return "is not a boolean (true or false)";
    o.*field = parsed;
    return "";
  };
  f.is_bool = true;
  return f;
}

const std::map<std::string, Flag>& Flags() {
  static const auto* flags = new std::map<std::string, Flag>{
      {"listen_address",
       StringFlag(&ServerOptions::listen_address,
                  "gRPC listen addresses, comma-separated: host:port (port 0 picks a free "
                  "one) and/or unix:PATH for workers on this host")},
      {"max_batch_sequences", IntFlag(&ServerOptions::max_batch_sequences,
                                      "flush a batch at this many sequences, [1, 4096]")},
      {"max_batch_bytes", IntFlag(&ServerOptions::max_batch_bytes,
                                  "flush a batch at this many payload bytes, >= 1")},
      {"preferred_batch_sequences",
       IntFlag(&ServerOptions::preferred_batch_sequences,
               "a batch below this many sequences waits up to max_queue_delay_us for more; "
               "0 = never wait (a free slot takes whatever is queued), [0, max_batch_sequences]")},
      {"max_queue_delay_us", IntFlag(&ServerOptions::max_queue_delay_us,
                                     "longest wait of a batch below preferred_batch_sequences, >= 0")},
      {"max_queue_sequences", IntFlag(&ServerOptions::max_queue_sequences,
                                      "queued sequences beyond which requests get RESOURCE_EXHAUSTED, >= max_batch_sequences")},
      {"max_queued_sequences_per_client",
       IntFlag(&ServerOptions::max_queued_sequences_per_client,
               "sequences one client (mTLS identity, else one connection) may have queued; "
               "0 = no per-client limit, else [max_sequences_per_request, max_queue_sequences]")},
      {"max_arena_bytes_per_client",
       IntFlag(&ServerOptions::max_arena_bytes_per_client,
               "KV arena bytes one client may hold (live handles + the row upper bound of its "
               "queued and running requests); 0 = no quota, >= 0")},
      {"max_sequences_per_request", IntFlag(&ServerOptions::max_sequences_per_request,
                                            "sequences per request, [1, max_batch_sequences]")},
      {"max_draft_tokens", IntFlag(&ServerOptions::max_draft_tokens,
                                   "gamma limit per sequence, [1, 256]")},
      {"kv_arena_bytes", IntFlag(&ServerOptions::kv_arena_bytes,
                                 "KV arena reserved at start-up, >= 0")},
      {"kv_handle_ttl_ms", IntFlag(&ServerOptions::kv_handle_ttl_ms,
                                   "KV handle time to live, > 0")},
      {"max_message_bytes", IntFlag(&ServerOptions::max_message_bytes,
                                    "largest gRPC message received or sent, [8192, 2^31)")},
      {"fetch_chunk_bytes", IntFlag(&ServerOptions::fetch_chunk_bytes,
                                    "default FetchKv chunk, [4096, max_message_bytes - 4096]; "
                                    "requests asking for less get 4096")},
      {"max_stream_buffered_answers",
       IntFlag(&ServerOptions::max_stream_buffered_answers,
               "answers one VerifyStream may owe (in flight + unwritten) before the server "
               "stops reading it until one is written, [1, 65536]")},
      {"max_tree_nodes", IntFlag(&ServerOptions::max_tree_nodes,
                                 "nodes of one token-tree draft (SequenceDraft.parent_indices), "
                                 "[1, 1024]")},
      {"max_regions", IntFlag(&ServerOptions::max_regions,
                              "registered data-plane regions, all clients together, [0, 65536]")},
      {"max_region_bytes",
       IntFlag(&ServerOptions::max_region_bytes,
               "bytes of all registered regions together (mapped, not allocated), >= 0")},
      {"device", StringFlag(&ServerOptions::device,
                            "auto | cpu | cpu:N,M,... | cuda:N | cuda:N,M,... | cuda:all | noop: "
                            "one executor per entry (its own streams, staging, KV arena); "
                            "batches go to the least-loaded one")},
      {"stop_on_device_failure",
       BoolFlag(&ServerOptions::stop_on_device_failure,
                "stop serving at the first device fault; by default a fault takes only its "
                "device out of service and the server stops when none is left")},
      {"tls_cert_file", StringFlag(&ServerOptions::tls_cert_file,
                                   "PEM certificate chain: serve gRPC over TLS (with --tls_key_file)")},
      {"tls_key_file", StringFlag(&ServerOptions::tls_key_file,
                                  "PEM private key of --tls_cert_file")},
      {"tls_client_ca_file",
       StringFlag(&ServerOptions::tls_client_ca_file,
                  "PEM CA certificates: require and verify client certificates (mutual TLS)")},
      {"tls_reload_interval_s",
       IntFlag(&ServerOptions::tls_reload_interval_s,
               "re-read the --tls_* files every this many seconds, new connections get what "
               "was read (rotation without restart); 0 = read once at start-up, [0, 86400]")},
      {"grpc_args", StringFlag(&ServerOptions::grpc_args,
                               "extra gRPC server channel arguments, name=value[,name=value...] "
                               "(integers as integers); override the server's own settings")},
      {"metrics_address", StringFlag(&ServerOptions::metrics_address,
                                     "Prometheus /metrics host:port; empty disables")},
      {"drain_timeout_ms", IntFlag(&ServerOptions::drain_timeout_ms,
                                   "on SIGTERM/SIGINT, time for queued and in-flight work, >= 0")},
      {"cpu_threads", IntFlag(&ServerOptions::cpu_threads,
                              "threads of the CPU backend, [1, 256]")},
      {"dispatch_threshold_bytes", IntFlag(&ServerOptions::dispatch_threshold_bytes,
                                           "CUDA: fused path below this many estimated pack bytes, "
                                           "two-step from it, >= 0; -1 calibrates at start-up")},
      {"calibrate_dispatch", BoolFlag(&ServerOptions::calibrate_dispatch,
                                      "CUDA: time both paths at start-up to pick the threshold "
                                      "(the default when --dispatch_threshold_bytes is -1)")},
      {"cuda_host_decision_max_rows",
       IntFlag(&ServerOptions::cuda_host_decision_max_rows,
               "CUDA: a greedy chain batch of at most this many draft tokens is decided on "
               "the host from its tokens, the GPU copying only the accepted KV rows (one "
               "launch, no results copied back); larger ones, and all when 0, are verified "
               "and packed on the GPU (fused or two-step by --dispatch_threshold_bytes), "
               "[0, 1048576]")},
      {"cuda_mapped_inputs_max_bytes",
       IntFlag(&ServerOptions::cuda_mapped_inputs_max_bytes,
               "CUDA: a greedy batch with at most this many staged input bytes is read by the "
               "kernel in place from pinned memory, results written back in place (no H2D/D2H "
               "copies), and a sampled batch without KV rows with at most this many result "
               "bytes stores them in place (no D2H copy); 0 = always copy, >= 0")},
      {"cuda_completion_spin_us",
       IntFlag(&ServerOptions::cuda_completion_spin_us,
               "CUDA: after a batch the completion thread polls this long for the next "
               "before sleeping (a wake-up costs more than a small batch; one core busy "
               "while batches come closer than this), [0, 1000000]")},
      {"cuda_slots", IntFlag(&ServerOptions::cuda_slots,
                             "CUDA: batches staged or executing at once, [1, 16]")},
  };
  return *flags;
}

bool IsBoolFlag(std::string name) {
  for (char& c : name) c = c == '-' ? '_' : c;
  auto it = Flags().find(name);
  return it != Flags().end() && it->second.is_bool;
}

absl::Status Bad(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", message));
}

absl::Status ValidateHostPort(absl::string_view flag, absl::string_view value,
                              bool unix_allowed = false) {
  if (absl::StartsWith(value, "unix:")) {
    if (unix_allowed) return absl::OkStatus();
    return Bad(flag, absl::StrCat("is \"", value, "\"; serves TCP only: must be host:port"));
  }
  const size_t colon = value.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return Bad(flag, absl::StrCat("is \"", value, "\"; must be host:port"));
  }
  int port;
  if (!absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return Bad(flag, absl::StrCat("is \"", value, "\"; the port must be an integer in [0, 65535]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateServerOptions(const ServerOptions& o) {
  const std::vector<std::string> listen = ListenAddresses(o.listen_address);
  if (listen.empty()) return Bad("listen_address", "is empty; must name host:port or unix:PATH");
  for (size_t i = 0; i < listen.size(); ++i) {
    if (absl::Status s = ValidateHostPort("listen_address", listen[i], true); !s.ok()) return s;
    if (std::find(listen.begin(), listen.begin() + i, listen[i]) != listen.begin() + i) {
      return Bad("listen_address", absl::StrCat("lists \"", listen[i], "\" twice"));
    }
  }
  if (!o.metrics_address.empty()) {
    if (absl::Status s = ValidateHostPort("metrics_address", o.metrics_address); !s.ok()) return s;
  }
  if (o.max_batch_sequences < 1 || o.max_batch_sequences > kMaxBatchSequences) {
    return Bad("max_batch_sequences", absl::StrCat("is ", o.max_batch_sequences,
                                                   "; must lie in [1, ", kMaxBatchSequences, "]"));
  }
  if (o.max_batch_bytes < 1) {
    return Bad("max_batch_bytes", absl::StrCat("is ", o.max_batch_bytes, "; must be >= 1"));
  }
  if (o.max_queue_delay_us < 0 || o.max_queue_delay_us > int64_t{60} * 1000 * 1000) {
    return Bad("max_queue_delay_us", absl::StrCat("is ", o.max_queue_delay_us,
                                                  "; must lie in [0, 60000000]"));
  }
  if (o.preferred_batch_sequences < 0 || o.preferred_batch_sequences > o.max_batch_sequences) {
    return Bad("preferred_batch_sequences",
               absl::StrCat("is ", o.preferred_batch_sequences,
                            "; must lie in [0, max_batch_sequences=", o.max_batch_sequences, "]"));
  }
  if (o.max_queue_sequences < o.max_batch_sequences) {
    return Bad("max_queue_sequences",
               absl::StrCat("is ", o.max_queue_sequences,
                            "; must be >= max_batch_sequences=", o.max_batch_sequences));
  }
  if (o.max_sequences_per_request < 1 ||
      o.max_sequences_per_request > o.max_batch_sequences) {
    return Bad("max_sequences_per_request",
               absl::StrCat("is ", o.max_sequences_per_request,
                            "; must lie in [1, max_batch_sequences=", o.max_batch_sequences,
                            "] (a request is never split across batches)"));
  }
  if (o.max_queued_sequences_per_client != 0 &&
      (o.max_queued_sequences_per_client < o.max_sequences_per_request ||
       o.max_queued_sequences_per_client > o.max_queue_sequences)) {
    return Bad("max_queued_sequences_per_client",
               absl::StrCat("is ", o.max_queued_sequences_per_client,
                            "; must be 0 (no limit) or lie in [max_sequences_per_request=",
                            o.max_sequences_per_request, ", max_queue_sequences=",
                            o.max_queue_sequences, "] (a largest request must fit)"));
  }
  if (o.max_arena_bytes_per_client < 0) {
    return Bad("max_arena_bytes_per_client",
               absl::StrCat("is ", o.max_arena_bytes_per_client, "; must be >= 0 (0: no quota)"));
  }
  if (o.max_draft_tokens < 1 || o.max_draft_tokens > kMaxDraftTokens) {
    return Bad("max_draft_tokens", absl::StrCat("is ", o.max_draft_tokens,
                                                "; must lie in [1, ", kMaxDraftTokens, "]"));
  }
  if (o.kv_arena_bytes < 0) {
    return Bad("kv_arena_bytes", absl::StrCat("is ", o.kv_arena_bytes, "; must be >= 0"));
  }
  if (o.kv_handle_ttl_ms < 1) {
    return Bad("kv_handle_ttl_ms", absl::StrCat("is ", o.kv_handle_ttl_ms, "; must be > 0"));
  }
  // A message holds at least one minimum FetchKv chunk plus 4096 bytes of framing.
  constexpr int64_t kMinMessageBytes = kMinFetchChunkBytes + 4096;
  if (o.max_message_bytes < kMinMessageBytes || o.max_message_bytes > INT32_MAX) {
    return Bad("max_message_bytes", absl::StrCat("is ", o.max_message_bytes, "; must lie in [",
                                                 kMinMessageBytes, ", ", INT32_MAX, "]"));
  }
  if (o.fetch_chunk_bytes < kMinFetchChunkBytes ||
      o.fetch_chunk_bytes > o.max_message_bytes - 4096) {
    return Bad("fetch_chunk_bytes",
               absl::StrCat("is ", o.fetch_chunk_bytes, "; must lie in [", kMinFetchChunkBytes,
                            ", max_message_bytes - 4096 = ", o.max_message_bytes - 4096, "]"));
  }
  if (o.max_stream_buffered_answers < 1 || o.max_stream_buffered_answers > 65536) {
    return Bad("max_stream_buffered_answers",
               absl::StrCat("is ", o.max_stream_buffered_answers, "; must lie in [1, 65536]"));
  }
  if (o.max_tree_nodes < 1 || o.max_tree_nodes > kMaxTreeNodes) {
    return Bad("max_tree_nodes",
               absl::StrCat("is ", o.max_tree_nodes, "; must lie in [1, ", kMaxTreeNodes, "]"));
  }
  if (o.max_regions < 0 || o.max_regions > 65536) {
    return Bad("max_regions", absl::StrCat("is ", o.max_regions, "; must lie in [0, 65536]"));
  }
  if (o.max_region_bytes < 0) {
    return Bad("max_region_bytes", absl::StrCat("is ", o.max_region_bytes, "; must be >= 0"));
  }
  if (absl::StatusOr<DeviceSpec> d = ParseDeviceSpec(o.device); !d.ok()) {
    return Bad("device", absl::StrCat("is \"", o.device, "\"; ", d.status().message()));
  }
  if (o.drain_timeout_ms < 0) {
    return Bad("drain_timeout_ms", absl::StrCat("is ", o.drain_timeout_ms, "; must be >= 0"));
  }
  if (o.cpu_threads < 1 || o.cpu_threads > 256) {
    return Bad("cpu_threads", absl::StrCat("is ", o.cpu_threads, "; must lie in [1, 256]"));
  }
  if (o.dispatch_threshold_bytes < -1) {
    return Bad("dispatch_threshold_bytes", absl::StrCat("is ", o.dispatch_threshold_bytes,
                                                        "; must be >= 0, or -1 to calibrate"));
  }
  if (o.calibrate_dispatch && o.dispatch_threshold_bytes >= 0) {
    return Bad("calibrate_dispatch", absl::StrCat("is true but --dispatch_threshold_bytes=",
                                                  o.dispatch_threshold_bytes,
                                                  " is set; give one or the other"));
  }
  if (o.cuda_host_decision_max_rows < 0 || o.cuda_host_decision_max_rows > (int64_t{1} << 20)) {
    return Bad("cuda_host_decision_max_rows", absl::StrCat("is ", o.cuda_host_decision_max_rows,
                                                           "; must lie in [0, 1048576]"));
  }
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return Bad(o.tls_cert_file.empty() ? "tls_cert_file" : "tls_key_file",
               "is missing: --tls_cert_file and --tls_key_file go together");
  }
  if (!o.tls_client_ca_file.empty() && o.tls_cert_file.empty()) {
    return Bad("tls_client_ca_file",
               "needs --tls_cert_file and --tls_key_file: mutual TLS is TLS first");
  }
  if (o.tls_reload_interval_s < 0 || o.tls_reload_interval_s > 86400) {
    return Bad("tls_reload_interval_s",
               absl::StrCat("is ", o.tls_reload_interval_s, "; must lie in [0, 86400]"));
  }
  if (o.tls_reload_interval_s > 0 && o.tls_cert_file.empty()) {
    return Bad("tls_reload_interval_s",
               "needs --tls_cert_file and --tls_key_file: there is nothing to reload");
  }
  if (absl::StatusOr<GrpcArgs> args = ParseGrpcArgs(o.grpc_args); !args.ok()) {
    return Bad("grpc_args", std::string(args.status().message()));
  }
  if (o.cuda_mapped_inputs_max_bytes < 0) {
    return Bad("cuda_mapped_inputs_max_bytes",
               absl::StrCat("is ", o.cuda_mapped_inputs_max_bytes, "; must be >= 0"));
  }
  if (o.cuda_completion_spin_us < 0 || o.cuda_completion_spin_us > 1000000) {
    return Bad("cuda_completion_spin_us",
               absl::StrCat("is ", o.cuda_completion_spin_us, "; must lie in [0, 1000000]"));
  }
  if (o.cuda_slots < 1 || o.cuda_slots > 16) {
    return Bad("cuda_slots", absl::StrCat("is ", o.cuda_slots, "; must lie in [1, 16]"));
  }
  return absl::OkStatus();
}

namespace {

// Sets one flag; `where` prefixes errors from a config file ("file:line: ").
absl::Status SetFlag(std::string name, const std::string& value, ServerOptions& options,
                     const std::string& where) {
  // Accept dashes for underscores (--max-queue-delay-us).
  for (char& c : name) c = c == '-' ? '_' : c;
  auto it = Flags().find(name);
  if (it == Flags().end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "unknown flag --", name, " (see --help)"));
  }
  if (std::string error = it->second.set(value, options); !error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "--", name, " is \"", value, "\"; ", error));
  }
  return absl::OkStatus();
}

// A config file: one `name=value` (or `--name=value`) per line; blank lines
// and lines starting with '#' are ignored. Applied where --config_file
// appears, so later command-line flags override it.
absl::Status ApplyConfigFile(const std::string& path, ServerOptions& options) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config_file is \"", path, "\"; cannot be opened"));
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    absl::ConsumePrefix(&text, "--");
    const size_t eq = text.find('=');
    const std::string where = absl::StrCat(path, ":", number, ": ");
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "\"", text, "\" is not name=value"));
    }
    SV_RETURN_IF_ERROR(SetFlag(std::string(absl::StripAsciiWhitespace(text.substr(0, eq))),
                               std::string(absl::StripAsciiWhitespace(text.substr(eq + 1))),
                               options, where));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerOptions> ParseServerFlags(const std::vector<std::string>& args) {
  ServerOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      return options;
    }
    if (arg == "--version") {
      options.version = true;
      return options;
    }
    if (!absl::ConsumePrefix(&arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument \"", args[i], "\"; flags look like --name=value"));
    }
    std::string name;
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != absl::string_view::npos) {
      name = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
    } else {
      name = std::string(arg);
      if (IsBoolFlag(name)) {
        value = "true";
      } else if (i + 1 >= args.size()) {
        return Bad(name, "needs a value (--name=value or --name value)");
      } else {
        value = args[++i];
      }
    }
    if (name == "config_file" || name == "config-file") {
      SV_RETURN_IF_ERROR(ApplyConfigFile(value, options));
      continue;
    }
    SV_RETURN_IF_ERROR(SetFlag(std::move(name), value, options, ""));
  }
  if (absl::Status s = ValidateServerOptions(options); !s.ok()) return s;
  return options;
}

std::string FlagsHelp() {
  const ServerOptions defaults;
  std::string out =
      "specverify-server flags:\n"
      "  --help, --version\n"
      "      print this text, or the version (\"<release>+<git commit>\"), and exit\n"
      "  --config_file (no default)\n"
      "      file of name=value lines ('#' comments), applied where it appears\n";
  for (const auto& [name, flag] : Flags()) {
    absl::StrAppend(&out, "  --", name, " (default \"", flag.show(defaults), "\")\n      ",
                    flag.help, "\n");
  }
  return out;
}

}  // namespace specverify::server
