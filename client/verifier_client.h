// Client library of the specverify.v1 Verifier service: unary Verify (blocking
// and callback-based), a VerifyStream session, FetchKv, ReleaseKv,
// GetServerInfo and the standard health check. Every call returns absl::Status
// (grpc::Status is converted here, at the edge).
//
// Thread safety: a VerifierClient may be used from any number of threads at
// once (the gRPC channel and stub are thread-safe). A VerifyStreamSession may
// be fed from any thread; its callback runs on a gRPC thread and must not
// block.
#ifndef SPECVERIFY_CLIENT_VERIFIER_CLIENT_H_
#define SPECVERIFY_CLIENT_VERIFIER_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "specverify/v1/verifier.grpc.pb.h"

namespace grpc {
class Channel;
class Status;
}  // namespace grpc

namespace specverify::client {

struct VerifierClientOptions {
  // host:port, e.g. "localhost:50051" or "unix:/tmp/sv.sock"; for several
  // replicas, "dns:///specverify.<ns>.svc.cluster.local:50051" (a headless
  // Service) with load_balancing_policy "round_robin" (docs/DEPLOY.md).
  std::string address;
  // gRPC's client-side load-balancing policy: "" (gRPC's default,
  // pick_first: one replica) or "round_robin" (every address the name
  // resolves to). KV handles live on one replica: with round_robin take rows
  // inline or into a region, not by handle.
  std::string load_balancing_policy;
  bool use_tls = false;
  // PEM root certificates for TLS; empty means the system's roots.
  std::string tls_root_cert_file;
  // Mutual TLS: this client's PEM certificate chain and private key.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Overrides the name checked against the server's certificate.
  std::string tls_server_name;
  // Largest message sent or received (KV rows travel inline or in chunks).
  int64_t max_message_bytes = 64 << 20;
  // A TCP connection of this client's own. gRPC otherwise shares one
  // connection among the channels of a process that have the same target and
  // arguments; a server without mutual TLS counts per-client limits per
  // connection (docs/SERVER.md), so separate clients in one process want it.
  bool own_connection = false;
  // On a unix socket, where every client is the same peer to gRPC, the name
  // this client's calls carry (the `specverify-client-id` header): the
  // server's account for its per-client limits and batch turns. 1-128 of
  // [A-Za-z0-9._:-]; empty: "<host>-<pid>-<n>", one of its own for every
  // VerifierClient. Clients that should share an account share the name.
  // Unused over TCP, where the connection is the account; under mutual TLS
  // the certificate is.
  std::string client_id;
  // Deadline of each call that does not pass its own; zero or infinite means
  // none.
  absl::Duration default_deadline = absl::Seconds(30);
  // Attempts per Verify call (gRPC's retries, within its deadline) when a
  // replica refuses it before running it: UNAVAILABLE (draining, gone) or
  // CANCELLED, which gRPC's own shutdown gives calls that never reached a
  // handler (grpc/grpc#41785). Verification is deterministic, so a resent
  // request gets the same answer; with round_robin the retry goes to another
  // replica, so a rolling restart loses no call (docs/DEPLOY.md). 1: no
  // retries; gRPC allows at most 5. VerifyStream, FetchKv and the region
  // calls are never retried.
  int verify_max_attempts = 4;
  // Calls wait, within their deadline, for a server to connect to instead
  // of failing UNAVAILABLE at once while none can be reached (gRPC's
  // waitForReady): a worker beside a single server rides through its
  // restart (systemd, a rollout of one replica) rather than failing the
  // requests of those seconds. Off: a worker that falls back to verifying
  // locally wants the fast failure.
  bool wait_for_ready = false;
};

// The default service config VerifierClient::Create gives its channel: the
// Verify retry policy above, waitForReady for every method when asked and,
// under round_robin, client-side health checking of specverify.v1.Verifier
// (a draining replica turns NOT_SERVING and gets no new calls). Exposed for
// tests and for clients in other languages to copy.
std::string DefaultServiceConfigJson(const VerifierClientOptions& options);

// gRPC status to absl::Status (the codes are the same numbers).
absl::Status FromGrpcStatus(const grpc::Status& status);

// Result of a request on a VerifyStream session: the server's response, or
// the request's own error (the stream goes on), keyed by request_id.
using StreamCallback = std::function<void(const v1::VerifyStreamResponse&)>;

// One VerifyStream call. Send() many requests; each response or per-request
// error arrives at the callback (completion order, not request order).
// Finish() half-closes the stream, waits for every response and returns the
// stream's final status.
class VerifyStreamSession {
 public:
  virtual ~VerifyStreamSession() = default;
  // Queues `request` for sending (one write in flight at a time). Fails
  // FAILED_PRECONDITION after Finish(); once the server has ended the stream,
  // with its status (UNAVAILABLE when it drains: reopen the stream, ideally
  // on another replica, and send again what got no answer).
  virtual absl::Status Send(v1::VerifyRequest request) = 0;
  // Half-closes and blocks until the server ends the stream.
  virtual absl::Status Finish() = 0;
  // Cancels the call; Finish() then returns CANCELLED (or the server's status).
  virtual void Cancel() = 0;
};

class VerifierClient {
 public:
  static absl::StatusOr<std::unique_ptr<VerifierClient>> Create(
      const VerifierClientOptions& options);

  // Blocking unary Verify. `deadline` overrides the default when non-zero.
  absl::StatusOr<v1::VerifyResponse> Verify(
      const v1::VerifyRequest& request,
      absl::Duration deadline = absl::ZeroDuration());

  // The raw-gRPC ceiling (VerifyCeiling): a response of Verify's size,
  // answered without verification (verified = false). For measurements.
  absl::StatusOr<v1::VerifyResponse> VerifyCeiling(
      const v1::VerifyRequest& request,
      absl::Duration deadline = absl::ZeroDuration());

  // Asynchronous unary Verify on the callback stub: `done` runs once, on a
  // gRPC thread, with the response or the error. `request` is copied.
  void VerifyAsync(
      const v1::VerifyRequest& request,
      std::function<void(absl::StatusOr<v1::VerifyResponse>)> done,
      absl::Duration deadline = absl::ZeroDuration());

  // Opens a VerifyStream. `deadline` (if non-zero) bounds the whole stream.
  // With `resend_unanswered` = N > 0 the session rides through a restart or
  // drain of its server: when the stream ends UNAVAILABLE (a draining server
  // ends it so after answering what it read; a lost connection does too) or
  // CANCELLED not by Cancel() (gRPC's shutdown, to a stream that never
  // reached the server), it opens a new one that waits for the server, after a backoff of 50 ms
  // doubling up to 1 s, and sends on it, in the order first sent, every
  // request without an answer or refused UNAVAILABLE (a drain that began
  // after the stream read it: not run); at most N new streams in a row
  // without an answer between them. Every request then needs a request_id
  // unique among those in flight. Verification is deterministic, so a resent
  // request gets the answer the first would have; a KV handle made by a
  // first attempt whose answer was lost expires by its TTL.
  absl::StatusOr<std::unique_ptr<VerifyStreamSession>> OpenStream(
      StreamCallback on_response, absl::Duration deadline = absl::ZeroDuration(),
      int resend_unanswered = 0);

  struct FetchOptions {
    int64_t first_row = 0;
    int64_t num_rows = 0;     // 0: to the end of the handle
    int64_t chunk_bytes = 0;  // 0: the server's default
    bool release_after = false;
  };
  // Reads the rows behind a KV handle; every chunk is checked to continue the
  // previous one and the total to match the server's total_bytes.
  absl::StatusOr<std::string> FetchKv(const std::string& handle,
                                      const FetchOptions& options);
  absl::StatusOr<std::string> FetchKv(const std::string& handle) {
    return FetchKv(handle, FetchOptions{});
  }

  // Frees a handle; returns the bytes returned to the server's arena.
  absl::StatusOr<int64_t> ReleaseKv(const std::string& handle);

  absl::StatusOr<v1::ServerInfo> GetServerInfo();

  // The co-located data plane (docs/DATA_PLANE.md; client/region.h makes the
  // memory): register once, reference from many requests, unregister.
  absl::Status RegisterRegion(const v1::RegisterRegionRequest& request);
  // The requests that still held the region (its memory stays mapped on the
  // server until they finish).
  absl::StatusOr<int32_t> UnregisterRegion(const std::string& name);
  absl::StatusOr<v1::ListRegionsResponse> ListRegions();

  // grpc.health.v1 Check: true when SERVING. `service` "" is the whole server.
  absl::StatusOr<bool> CheckHealth(const std::string& service = "");

  const VerifierClientOptions& options() const { return options_; }

 private:
  VerifierClient(VerifierClientOptions options,
                 std::shared_ptr<grpc::Channel> channel);
  void ApplyDeadline(grpc::ClientContext& context, absl::Duration deadline) const;

  VerifierClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Verifier::Stub> stub_;
};

}  // namespace specverify::client

#endif  // SPECVERIFY_CLIENT_VERIFIER_CLIENT_H_
