#include "server/rpc/wire.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/impl/codegen/proto_utils.h"  // SerializationTraits for protobuf
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"

namespace specverify::server {

absl::Status ParseMessage(const grpc::ByteBuffer& raw, absl::string_view what,
                          google::protobuf::MessageLite* message) {
  message->Clear();
  // A copy shares the slices (a reference count), it does not copy bytes.
  grpc::ByteBuffer copy(raw);
  bool parsed = false;
  if (copy.Valid()) {
    grpc::ProtoBufferReader reader(&copy);
    parsed = reader.status().ok() && message->ParseFromZeroCopyStream(&reader);
  }
  if (parsed) return absl::OkStatus();
  message->Clear();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " could not be parsed as ", message->GetTypeName(), " (", raw.Length(),
      " bytes): it is not a valid protobuf encoding of that message, or one of "
      "its string fields (request_id, handle) is not valid UTF-8"));
}

absl::Status SerializeMessage(const google::protobuf::MessageLite& message,
                              grpc::ByteBuffer* out) {
  out->Clear();  // gRPC's writer requires an empty buffer
  bool own_buffer = false;
  grpc::Status status =
      grpc::SerializationTraits<google::protobuf::MessageLite>::Serialize(message, out,
                                                                           &own_buffer);
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cannot serialize ", message.GetTypeName(), ": ",
                                          status.error_message()));
}

}  // namespace specverify::server
