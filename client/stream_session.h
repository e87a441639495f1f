// The VerifyStreamSession implementations behind VerifierClient::OpenStream:
// one VerifyStream call, or a session that reopens the stream when it ends
// UNAVAILABLE and sends again what got no answer. Internal to the client
// library (verifier_client.h is the interface) and its load generator
// (client/loadgen/step_runner.cc), which multiplexes its stream steps on it.
#ifndef SPECVERIFY_CLIENT_STREAM_SESSION_H_
#define SPECVERIFY_CLIENT_STREAM_SESSION_H_

#include <functional>
#include <memory>

#include "absl/time/time.h"
#include "client/verifier_client.h"

namespace specverify::client::internal {

// StreamCallback's response, which the callee may take (swap out of): the
// session reuses or drops the message after the callback returns. The load
// generator takes each answer so without copying it.
using MutableStreamCallback = std::function<void(v1::VerifyStreamResponse&)>;
// The session's end, once, after its last response was delivered: Finish()'s
// status. What is still unanswered then never will be (a caller that waits
// for answers fails them here rather than at Finish()).
using StreamEndCallback = std::function<void(const absl::Status&)>;

// One VerifyStream call on `stub` (which must outlive the session), ending
// by `deadline` (InfiniteFuture: none). With `on_end`, the call half-closes
// by itself once the server has ended the stream.
std::unique_ptr<VerifyStreamSession> OpenStreamCall(v1::Verifier::Stub* stub,
                                                    MutableStreamCallback on_response,
                                                    absl::Time deadline,
                                                    StreamEndCallback on_end = nullptr);

// A session over successive calls: when one ends UNAVAILABLE (a draining
// server ends its streams so after answering what it read; a lost
// connection does too) or CANCELLED not by Cancel() (gRPC's own shutdown
// gives that to a call that never reached the server), a new call waits for the server to be ready and
// every request without an answer is sent on it again, in the order first
// sent; at most `resend_unanswered` new calls in a row without an answer
// between them, all within `deadline`. Finish() returns the last call's
// status.
std::unique_ptr<VerifyStreamSession> OpenResendingStream(v1::Verifier::Stub* stub,
                                                         MutableStreamCallback on_response,
                                                         absl::Time deadline,
                                                         int resend_unanswered,
                                                         StreamEndCallback on_end = nullptr);

}  // namespace specverify::client::internal

#endif  // SPECVERIFY_CLIENT_STREAM_SESSION_H_
