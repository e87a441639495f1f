// Rate-limited protobuf logging (issue #15). libprotobuf logs one ERROR line
// per message it cannot parse because a `string` field is not valid UTF-8
// ("String field 'specverify.v1.VerifyRequest.request_id' contains invalid
// UTF-8 data when parsing ..."): a client sending such requests in a loop
// floods the server's log. The server installs a handler that prints at most
// one line per call site (file:line) per interval; the next line printed from
// that site says how many were suppressed. FATAL lines always pass.
//
// Why not `bytes` on the wire: request_id and handle are text in every
// client's generated API (str/string, JSON, grpcurl); changing them to bytes
// would change those APIs for every language to silence one log line. An
// invalid UTF-8 string is a malformed message and is answered
// INVALID_ARGUMENT (server/rpc/wire.h).
#ifndef SPECVERIFY_SERVER_RPC_PROTOBUF_LOG_H_
#define SPECVERIFY_SERVER_RPC_PROTOBUF_LOG_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace specverify::server {

// How often one protobuf call site may print.
inline constexpr absl::Duration kProtobufLogInterval = absl::Seconds(10);

// Per-site rate limit. Thread-safe.
class LogRateLimiter {
 public:
  explicit LogRateLimiter(absl::Duration interval) : interval_(interval) {}

  // True if a line from `site` at `now` is printed; then `*suppressed` is
  // the number of lines from `site` dropped since the last printed one.
  bool Admit(absl::string_view site, absl::Time now, int64_t* suppressed);

 private:
  struct Site {
    absl::Time last_printed = absl::InfinitePast();
    int64_t suppressed = 0;
  };
  const absl::Duration interval_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Site> sites_ ABSL_GUARDED_BY(mu_);
};

// Replaces protobuf's log handler (once per process; later calls do
// nothing) with one writing to stderr through a LogRateLimiter of
// kProtobufLogInterval. Called by VerifierServer::Start.
void InstallRateLimitedProtobufLogging();

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_RPC_PROTOBUF_LOG_H_
