// A small in-process Verifier service for the load generator's tests: it
// answers greedy requests correctly (computed from the request itself, not
// from the workload's oracle), keeps KV rows behind handles, and can be told
// to lie (a wrong next_token, corrupted KV bytes) or to act as a no-op server,
// so the tests can prove that the load generator notices.
#ifndef SPECVERIFY_TESTS_CLIENT_LOADGEN_FAKE_VERIFIER_H_
#define SPECVERIFY_TESTS_CLIENT_LOADGEN_FAKE_VERIFIER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "grpcpp/grpcpp.h"
#include "specverify/v1/verifier.grpc.pb.h"

namespace specverify::testing {

struct FakeVerifierOptions {
  // Every n-th request (1-based count, 0 = never) gets its first sequence's
  // next_token changed.
  int64_t wrong_next_token_every = 0;
  // Every n-th FetchKv (0 = never) returns one flipped byte.
  int64_t corrupt_fetch_every = 0;
  // Answer like the no-op backend: verified=false, k = gamma, no KV.
  bool noop = false;
  // GetServerInfo.backend; empty: "noop" or "fake" following `noop`.
  std::string backend{};
  // Extra service time per Verify request.
  int64_t delay_us = 0;
  // Each VerifyStream call ends UNAVAILABLE when it reads its n-th request
  // (0 = never), leaving that request and any sent after it unanswered, as
  // a server that goes away mid-stream does.
  int64_t end_stream_after = 0;
};

class FakeVerifier final : public v1::Verifier::Service {
 public:
  explicit FakeVerifier(FakeVerifierOptions options) : options_(options) {}

  grpc::Status Verify(grpc::ServerContext* context, const v1::VerifyRequest* request,
                      v1::VerifyResponse* response) override;
  grpc::Status VerifyStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::VerifyStreamResponse, v1::VerifyRequest>* stream) override;
  grpc::Status FetchKv(grpc::ServerContext* context, const v1::FetchKvRequest* request,
                       grpc::ServerWriter<v1::FetchKvChunk>* writer) override;
  grpc::Status ReleaseKv(grpc::ServerContext* context, const v1::ReleaseKvRequest* request,
                         v1::ReleaseKvResponse* response) override;
  grpc::Status GetServerInfo(grpc::ServerContext* context, const v1::GetServerInfoRequest* request,
                             v1::ServerInfo* response) override;

  int64_t verify_requests() const { return verify_requests_.load(); }
  int64_t stream_calls() const { return stream_calls_.load(); }
  int64_t live_handles() const;
  int64_t released_handles() const { return released_handles_.load(); }

 private:
  grpc::Status Answer(const v1::VerifyRequest& request, v1::VerifyResponse* response);

  const FakeVerifierOptions options_;
  std::atomic<int64_t> verify_requests_{0};
  std::atomic<int64_t> stream_calls_{0};
  std::atomic<int64_t> fetches_{0};
  std::atomic<int64_t> released_handles_{0};
  std::atomic<int64_t> next_handle_{1};
  mutable std::mutex mu_;
  std::map<std::string, std::string> handles_;  // id -> packed rows; guarded by mu_
};

// A started gRPC server on a free loopback port around any service.
class LoopbackServer {
 public:
  explicit LoopbackServer(grpc::Service* service);
  ~LoopbackServer();
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_CLIENT_LOADGEN_FAKE_VERIFIER_H_
