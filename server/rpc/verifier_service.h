// The thin RPC layer: the Verifier service on gRPC's callback (reactor) API.
// No thread blocks per request and nothing blocks inside a handler: Verify
// validates, hands the request to the batcher and returns its reactor; the
// batcher's completion (a backend thread) calls Finish. Streaming reactors
// drive themselves and delete themselves in OnDone().
//
// Thread safety: all methods are called by gRPC from its threads.
#ifndef SPECVERIFY_SERVER_RPC_VERIFIER_SERVICE_H_
#define SPECVERIFY_SERVER_RPC_VERIFIER_SERVICE_H_

#include <atomic>
#include <cstdint>

#include "server/arena/kv_arena.h"
#include "server/batcher/batcher.h"
#include "server/common/clock.h"
#include "server/metrics/server_metrics.h"
#include "server/rpc/validation.h"
#include "specverify/v1/verifier.grpc.pb.h"

namespace specverify::server {

struct VerifierServiceOptions {
  RequestLimits limits;
  // Default FetchKv chunk; requests may ask for other sizes, clamped to
  // max_chunk_bytes (below the max message size).
  int64_t default_chunk_bytes = int64_t{1} << 20;
  int64_t max_chunk_bytes = (int64_t{64} << 20) - 4096;
  v1::ServerInfo info;  // what GetServerInfo answers
  Batcher* batcher = nullptr;
  KvArena* arena = nullptr;
  ServerMetrics* metrics = nullptr;
  Clock* clock = nullptr;  // RealClock when null
};

class VerifierService final : public v1::Verifier::CallbackService {
 public:
  explicit VerifierService(const VerifierServiceOptions& options);

  // New requests answer UNAVAILABLE from now on (graceful shutdown).
  void StartDraining() { draining_.store(true, std::memory_order_release); }
  bool draining() const { return draining_.load(std::memory_order_acquire); }

  grpc::ServerUnaryReactor* Verify(grpc::CallbackServerContext* context,
                                   const v1::VerifyRequest* request,
                                   v1::VerifyResponse* response) override;
  grpc::ServerBidiReactor<v1::VerifyRequest, v1::VerifyStreamResponse>* VerifyStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerWriteReactor<v1::FetchKvChunk>* FetchKv(
      grpc::CallbackServerContext* context, const v1::FetchKvRequest* request) override;
  grpc::ServerUnaryReactor* ReleaseKv(grpc::CallbackServerContext* context,
                                      const v1::ReleaseKvRequest* request,
                                      v1::ReleaseKvResponse* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::GetServerInfoRequest* request,
                                          v1::ServerInfo* response) override;
  // The raw-gRPC ceiling (verifier.proto): answered here on the RPC thread.
  grpc::ServerUnaryReactor* VerifyCeiling(grpc::CallbackServerContext* context,
                                          const v1::VerifyRequest* request,
                                          v1::VerifyResponse* response) override;

  // Admission of one verify request: draining, validation, then the batcher.
  // On error nothing was queued and `pending->done` was not called.
  absl::Status Admit(std::unique_ptr<PendingRequest> pending);

  const VerifierServiceOptions& options() const { return options_; }
  Clock* clock() const { return clock_; }

 private:
  const VerifierServiceOptions options_;
  Clock* const clock_;
  std::atomic<bool> draining_{false};
};

grpc::Status ToGrpcStatus(const absl::Status& status);

// VerifyCeiling's answer: what Verify would send for `request` in size (k =
// gamma for every sequence, the draft rows echoed inline, a placeholder
// handle), verified = false. No validation: the ceiling measures transport.
void FillCeilingResponse(const v1::VerifyRequest& request, v1::VerifyResponse* response);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_RPC_VERIFIER_SERVICE_H_
