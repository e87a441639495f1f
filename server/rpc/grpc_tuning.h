// gRPC server settings for small-message latency, and the --grpc_args flag
// that overrides or extends them (docs/SERVER.md "gRPC settings" says what
// each one does and what it measured on the H100).
#ifndef SPECVERIFY_SERVER_RPC_GRPC_TUNING_H_
#define SPECVERIFY_SERVER_RPC_GRPC_TUNING_H_

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grpc {
class ServerBuilder;
}  // namespace grpc

namespace specverify::server {

using GrpcArgValue = std::variant<int, std::string>;
using GrpcArgs = std::vector<std::pair<std::string, GrpcArgValue>>;

// "name=value,name=value": integers become integer arguments, anything else
// a string. INVALID_ARGUMENT naming --grpc_args and the item otherwise.
absl::StatusOr<GrpcArgs> ParseGrpcArgs(absl::string_view text);

// The server's own defaults (see the .cc for why each), then `overrides`
// (same name: the override wins).
GrpcArgs EffectiveGrpcArgs(const GrpcArgs& overrides);

void ApplyGrpcArgs(const GrpcArgs& args, grpc::ServerBuilder& builder);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_RPC_GRPC_TUNING_H_
