// The `specverify-client-id` request header: a client's name for itself on
// a unix socket, where gRPC reports every peer as "unix:" and the server's
// per-client accounts (limits, fair batch turns) would otherwise be one
// account for every worker on the host (docs/SERVER.md, "Per-client limits
// and fairness"). Part of the wire API, like verifier.proto: the server
// reads it, the C++ and Python clients and the load generator send it.
#ifndef SPECVERIFY_PROTO_RUNTIME_CLIENT_ID_H_
#define SPECVERIFY_PROTO_RUNTIME_CLIENT_ID_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace specverify::grpc_runtime {

// gRPC metadata keys are lower case.
inline constexpr char kClientIdMetadataKey[] = "specverify-client-id";
inline constexpr int kMaxClientIdBytes = 128;

// OK for 1 to kMaxClientIdBytes characters of [A-Za-z0-9._:-]; otherwise
// INVALID_ARGUMENT naming the header, the offending character or length and
// the rule. The value is echoed in the server's error messages, hence the
// narrow alphabet.
absl::Status ValidateClientId(absl::string_view id);

// A default id for a client of this process: "<host>-<pid>-<n>", n counting
// the ids this process has made, the host name cut to the alphabet above.
// Distinct for every call within a process and across the host's live
// processes.
std::string NewProcessClientId();

}  // namespace specverify::grpc_runtime

#endif  // SPECVERIFY_PROTO_RUNTIME_CLIENT_ID_H_
