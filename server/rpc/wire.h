// Requests and responses of the Verifier service as raw gRPC byte buffers.
//
// The service registers its methods as raw callback methods (ByteBuffer in,
// ByteBuffer out) and parses each request itself, so that a message that
// does not parse is answered INVALID_ARGUMENT saying so. gRPC 1.51's typed
// callback handlers (grpcpp/impl/codegen/server_callback_handlers.h) drop the
// parse error: a unary or server-streaming request that does not parse is
// answered UNIMPLEMENTED with an empty message, and a streamed message that
// does not parse reaches the reactor as OnReadDone(false), which is
// indistinguishable from the client's half-close (issue #15).
#ifndef SPECVERIFY_SERVER_RPC_WIRE_H_
#define SPECVERIFY_SERVER_RPC_WIRE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"

namespace specverify::server {

// Parses `raw` into `message` (cleared first). INVALID_ARGUMENT when the
// bytes are not a valid encoding of the message type: "<what> could not be
// parsed as specverify.v1.VerifyRequest (N bytes): ...". `raw` is unchanged.
absl::Status ParseMessage(const grpc::ByteBuffer& raw, absl::string_view what,
                          google::protobuf::MessageLite* message);

// Serializes `message` into `out` (replacing its contents), as gRPC's typed
// handlers would. INTERNAL if protobuf cannot serialize it (over 2 GiB).
absl::Status SerializeMessage(const google::protobuf::MessageLite& message,
                              grpc::ByteBuffer* out);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_RPC_WIRE_H_
