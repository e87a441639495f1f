// Channels that name their client to the server where the transport cannot:
// on a unix socket every peer is "unix:" to gRPC, so the server keys its
// per-client accounts (limits, fair batch turns) by the
// `specverify-client-id` header each call carries (proto/runtime/client_id.h,
// docs/SERVER.md "Per-client limits and fairness"). Over TCP the connection
// names the client and the calls carry nothing extra.
#ifndef SPECVERIFY_CLIENT_CLIENT_ID_CHANNEL_H_
#define SPECVERIFY_CLIENT_CLIENT_ID_CHANNEL_H_

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"

namespace specverify::client {

// True for "unix:PATH" and "unix-abstract:NAME" targets.
bool IsUnixSocketTarget(const std::string& target);

// grpc::CreateCustomChannel, plus, on a unix-socket target, the
// `specverify-client-id: client_id` header on every call. `client_id` must
// pass grpc_runtime::ValidateClientId.
std::shared_ptr<grpc::Channel> CreateChannelNamingClient(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, const std::string& client_id);

}  // namespace specverify::client

#endif  // SPECVERIFY_CLIENT_CLIENT_ID_CHANNEL_H_
