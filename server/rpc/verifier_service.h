// The thin RPC layer: the Verifier service on gRPC's callback (reactor) API.
// No thread blocks per request and nothing blocks inside a handler: Verify
// validates, hands the request to the batcher and returns its reactor; the
// batcher's completion (a backend thread) calls Finish. Streaming reactors
// drive themselves and delete themselves in OnDone().
//
// Every method is registered raw (grpc::ByteBuffer in and out) and parses
// its request itself (server/rpc/wire.h): a message that does not parse is
// answered INVALID_ARGUMENT saying so, where gRPC's typed handlers answer
// UNIMPLEMENTED with no message (unary) or end a stream as if half-closed.
//
// Thread safety: all methods are called by gRPC from its threads.
#ifndef SPECVERIFY_SERVER_RPC_VERIFIER_SERVICE_H_
#define SPECVERIFY_SERVER_RPC_VERIFIER_SERVICE_H_

#include <atomic>
#include <cstdint>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/arena/kv_arena.h"
#include "server/devices/device_set.h"
#include "server/batcher/batcher.h"
#include "server/regions/region_registry.h"
#include "server/common/clock.h"
#include "server/metrics/server_metrics.h"
#include "server/rpc/validation.h"
#include "specverify/v1/verifier.grpc.pb.h"
#include "specverify/v1/verifier.pb.h"

namespace specverify::server {

struct VerifierServiceOptions {
  RequestLimits limits;
  // Default FetchKv chunk; requests may ask for other sizes, clamped to
  // max_chunk_bytes (below the max message size).
  int64_t default_chunk_bytes = int64_t{1} << 20;
  int64_t max_chunk_bytes = (int64_t{64} << 20) - 4096;
  // Answers one VerifyStream may owe (admitted and unanswered, or not yet
  // written) before it stops reading requests until one has been written.
  int64_t max_stream_buffered_answers = 64;
  v1::ServerInfo info;  // what GetServerInfo answers
  Batcher* batcher = nullptr;
  // The executors: FetchKv and ReleaseKv find a handle's arena here,
  // GetServerInfo reports which are in service.
  DeviceSet* devices = nullptr;
  RegionRegistry* regions = nullptr;  // the data plane's registered regions
  ServerMetrics* metrics = nullptr;
  Clock* clock = nullptr;  // RealClock when null
  // Clients present verified certificates (--tls_client_ca_file): KV handles
  // belong to the peer identity. Off, no per-request identity lookup.
  bool mutual_tls = false;
};

// The generated service with every method switched to a raw callback method
// (byte buffers in and out). Built on the plain Service, not CallbackService:
// a typed and a raw VerifyStream(CallbackServerContext*) differ only in
// their return type and cannot both be declared. A method added to the proto
// later answers UNIMPLEMENTED until it is added here.
using RawVerifierServiceBase = v1::Verifier::WithRawCallbackMethod_Verify<
    v1::Verifier::WithRawCallbackMethod_VerifyStream<
        v1::Verifier::WithRawCallbackMethod_FetchKv<v1::Verifier::WithRawCallbackMethod_ReleaseKv<
            v1::Verifier::WithRawCallbackMethod_GetServerInfo<
                v1::Verifier::WithRawCallbackMethod_VerifyCeiling<
                    v1::Verifier::WithRawCallbackMethod_RegisterRegion<
                        v1::Verifier::WithRawCallbackMethod_UnregisterRegion<
                            v1::Verifier::WithRawCallbackMethod_ListRegions<
                                v1::Verifier::Service>>>>>>>>>;

// An open VerifyStream call, as the service's drain sees it.
class DrainableStream {
 public:
  // Stops reading; the stream ends UNAVAILABLE once every request it read
  // has been answered and written.
  virtual void Drain() = 0;

 protected:
  ~DrainableStream() = default;
};

class VerifierService final : public RawVerifierServiceBase {
 public:
  explicit VerifierService(const VerifierServiceOptions& options);

  // Graceful shutdown: new requests answer UNAVAILABLE from now on, and every
  // open VerifyStream stops reading and ends UNAVAILABLE once it owes no
  // answer, so a client holding a stream open neither keeps the server up to
  // its drain timeout nor waits that long to reopen it elsewhere.
  void StartDraining();
  bool draining() const { return draining_.load(std::memory_order_acquire); }

  // A VerifyStream reactor registers at its start and leaves in OnDone.
  // OpenStream returns true when the service is draining already (the stream
  // then ends at once, reading nothing).
  bool OpenStream(DrainableStream* stream);
  void CloseStream(DrainableStream* stream);

  // Raw methods: `request` holds a serialized v1::<Method>Request, the
  // response is written serialized into `response` (or streamed as bytes).
  grpc::ServerUnaryReactor* Verify(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* VerifyStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* FetchKv(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* ReleaseKv(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  // The raw-gRPC ceiling (verifier.proto): answered here on the RPC thread.
  grpc::ServerUnaryReactor* VerifyCeiling(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;

  // The data plane (docs/DATA_PLANE.md): regions belong to CallerIdentity.
  grpc::ServerUnaryReactor* RegisterRegion(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* UnregisterRegion(grpc::CallbackServerContext* context,
                                             const grpc::ByteBuffer* request,
                                             grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListRegions(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;

  // Admission of one verify request: draining, validation, then the batcher.
  // On error nothing was queued and `pending->done` was not called.
  absl::Status Admit(std::unique_ptr<PendingRequest> pending);

  const VerifierServiceOptions& options() const { return options_; }
  // The client identity that owns the KV handles a call creates or uses:
  // the verified peer certificate's identity under mutual TLS, else empty
  // (a handle is then a bearer token).
  std::string CallerIdentity(grpc::CallbackServerContext* context) const;
  // The account of per-client limits and fair batching (issue #15):
  // `caller_identity` (CallerIdentity's answer) under mutual TLS, else the
  // peer address with its port, "ipv4:10.0.0.7:54321": one connection, so a
  // client without a certificate that opens N connections counts as N
  // clients; on a unix socket, where every peer is "unix:", the client's
  // `specverify-client-id` header, "unix:client-id=worker-3"
  // (proto/runtime/client_id.h; docs/SERVER.md "Per-client limits and
  // fairness"). INVALID_ARGUMENT for a malformed header.
  absl::StatusOr<std::string> ClientKey(grpc::CallbackServerContext* context,
                                        const std::string& caller_identity) const;
  Clock* clock() const { return clock_; }

 private:
  template <typename Request, typename Act>
  grpc::ServerUnaryReactor* UnaryRegionCall(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* raw_request,
                                            grpc::ByteBuffer* raw_response, RpcMethod method,
                                            Act act);

  const VerifierServiceOptions options_;
  Clock* const clock_;
  std::atomic<bool> draining_{false};
  // Held while StartDraining drains the streams, so a stream's OnDone
  // (CloseStream) waits and no stream is drained after it was deleted.
  absl::Mutex streams_mu_;
  absl::flat_hash_set<DrainableStream*> open_streams_ ABSL_GUARDED_BY(streams_mu_);
};

grpc::Status ToGrpcStatus(const absl::Status& status);

// VerifyCeiling's answer: what Verify would send for `request` in size (k =
// gamma for every sequence, the draft rows echoed inline, a placeholder
// handle), verified = false. No validation: the ceiling measures transport.
void FillCeilingResponse(const v1::VerifyRequest& request, v1::VerifyResponse* response);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_RPC_VERIFIER_SERVICE_H_
