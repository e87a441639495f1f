#include "proto/runtime/callback_queue_pin.h"

#include <memory>
#include <string>

#include "absl/base/call_once.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/channel_arguments.h"

namespace specverify::grpc_runtime {
namespace {

// Never deleted: it holds the queue until exit (and stays reachable, so leak
// checkers do not count it).
std::shared_ptr<grpc::Channel>* pinned_channel = nullptr;

void Pin() {
  // Null credentials make gRPC build a lame channel: no resolver, no
  // connection, every call answered INVALID_ARGUMENT locally.
  pinned_channel = new std::shared_ptr<grpc::Channel>(grpc::CreateCustomChannel(
      "specverify-callback-queue-pin", nullptr, grpc::ChannelArguments()));
  // A channel joins the callback queue on its first callback call, not when
  // it is created. The call's outcome does not matter; it has to finish
  // before its context and buffers go away.
  grpc::GenericStub stub(*pinned_channel);
  grpc::ClientContext context;
  grpc::Slice empty{std::string()};
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  absl::Notification finished;
  stub.UnaryCall(&context, "/specverify.v1.Verifier/GetServerInfo", grpc::StubOptions(),
                 &request, &response, [&finished](grpc::Status) { finished.Notify(); });
  finished.WaitForNotification();
}

}  // namespace

void PinCallbackQueue() {
  static absl::once_flag once;
  absl::call_once(once, Pin);
}

}  // namespace specverify::grpc_runtime
