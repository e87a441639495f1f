// Keeps gRPC's process-wide callback completion queue alive until the
// process exits.
//
// gRPC 1.51 (Debian bookworm's) serves the callback API of every client
// channel and server from one process-global completion queue whose polling
// ("nexting") threads start with its first user and are shut down and joined
// when its last user — a grpc::Channel or grpc::Server that made or served a
// callback call — is destroyed. That teardown races those threads still
// finishing a call and aborts the whole process with
//     ref_counted.h:183]  assertion failed: prior > 0
// (seen in CI: a test's client and server destroyed right after their last
// asynchronous Verify). A server shutting down, or a worker closing its last
// VerifierClient, runs the same teardown.
//
// PinCallbackQueue() makes one more, never-destroyed user: a lame channel
// (no socket, every call fails at once) that made one callback call. The
// queue then lives, and its threads poll, until the process exits, so no
// channel or server destruction ever tears it down. It is idempotent and
// thread-safe; the server and the client library call it before their first
// callback call.
#ifndef SPECVERIFY_PROTO_RUNTIME_CALLBACK_QUEUE_PIN_H_
#define SPECVERIFY_PROTO_RUNTIME_CALLBACK_QUEUE_PIN_H_

#include <memory>

namespace grpc {
class Channel;
}  // namespace grpc

namespace specverify::grpc_runtime {

void PinCallbackQueue();

// Makes one callback call on `channel` (to a method nobody serves; its
// outcome is ignored) and waits for it to finish: how a channel joins the
// callback queue, which it does on its first callback call, not when made.
void JoinCallbackQueue(const std::shared_ptr<grpc::Channel>& channel);

}  // namespace specverify::grpc_runtime

#endif  // SPECVERIFY_PROTO_RUNTIME_CALLBACK_QUEUE_PIN_H_
