#include "proto/runtime/callback_queue_pin.h"

#include <chrono>
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
  JoinCallbackQueue(*pinned_channel);
}

}  // namespace

void JoinCallbackQueue(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  // Bounded, for a channel that does connect somewhere.
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice empty{std::string()};
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  absl::Notification finished;
  stub.UnaryCall(&context, "/specverify.grpc_runtime.Unserved/Join", grpc::StubOptions(), &request,
                 &response, [&finished](grpc::Status) { finished.Notify(); });
  finished.WaitForNotification();
}

void PinCallbackQueue() {
  static absl::once_flag once;
  absl::call_once(once, Pin);
}

}  // namespace specverify::grpc_runtime
