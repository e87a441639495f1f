// The assembled server: backend (from --device), KV arena in the backend's
// memory, batcher, the Verifier service, gRPC health and reflection. Used by
// main and, in-process, by the integration tests.
//
// Shutdown order (graceful): health NOT_SERVING; new requests UNAVAILABLE;
// queued requests flush without their delay budget; wait up to the drain
// timeout for queued and in-flight work; answer what is left UNAVAILABLE;
// stop gRPC (open streams are cancelled at the deadline); stop the backend.
//
// Thread safety: every method is thread-safe.
#ifndef SPECVERIFY_SERVER_APP_VERIFIER_SERVER_H_
#define SPECVERIFY_SERVER_APP_VERIFIER_SERVER_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/app/server_options.h"
#include "server/arena/kv_arena.h"
#include "server/regions/region_registry.h"
#include "server/backend/backend.h"
#include "server/batcher/batcher.h"
#include "server/metrics/server_metrics.h"
#include "server/rpc/verifier_service.h"

namespace grpc {
class Server;
namespace experimental {
class CertificateProviderInterface;
}  // namespace experimental
}  // namespace grpc

namespace specverify::server {

inline constexpr char kVerifierServiceName[] = "specverify.v1.Verifier";

class VerifierServer {
 public:
  // Builds every component and starts serving. `backend` overrides --device
  // (tests inject controllable backends); `metrics` must outlive the server.
  static absl::StatusOr<std::unique_ptr<VerifierServer>> Start(
      const ServerOptions& options, ServerMetrics* metrics,
      std::unique_ptr<Backend> backend = nullptr);
  ~VerifierServer();  // Shutdown(zero drain) if not shut down yet

  int port() const { return port_; }
  // "127.0.0.1:<port>" style address clients on this host can dial.
  std::string local_address() const;
  const v1::ServerInfo& info() const { return info_; }
  const std::string& backend_reason() const { return backend_reason_; }

  // Asks WaitForStopRequest() to return (signal thread, backend failure).
  void RequestStop(const absl::Status& reason);
  // Blocks until RequestStop; returns its reason (OK for a signal).
  absl::Status WaitForStopRequest();

  // Graceful shutdown; idempotent. OK when everything queued or in flight
  // finished within `drain_timeout`, else DEADLINE_EXCEEDED saying so.
  absl::Status Shutdown(absl::Duration drain_timeout);

  // OK, or the backend's sticky error (the process then exits non-zero).
  absl::Status backend_health() const { return backend_->health(); }
  Batcher& batcher() { return *batcher_; }
  KvArena& arena() { return *arena_; }

 private:
  VerifierServer() = default;
  // Sets the gRPC health status (overall and Verifier) and the serving gauge.
  void SetHealth(bool serving);

  ServerOptions options_;
  ServerMetrics* metrics_ = nullptr;
  std::unique_ptr<Backend> backend_;
  std::string backend_reason_;
  std::unique_ptr<KvArena> arena_;
  // After the backend (its mappings close while it is alive), before the
  // batcher (queued requests hold uses of it).
  std::unique_ptr<RegionRegistry> regions_;
  std::unique_ptr<Batcher> batcher_;
  std::unique_ptr<VerifierService> service_;
  // With --tls_reload_interval_s: watches the TLS files for the server's
  // lifetime (gRPC's FileWatcherCertificateProvider).
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> certificate_provider_;
  std::unique_ptr<grpc::Server> grpc_server_;
  v1::ServerInfo info_;
  int port_ = 0;

  absl::Mutex mu_;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status stop_reason_ ABSL_GUARDED_BY(mu_);
  // Held for the whole of Shutdown so concurrent callers wait for the first.
  absl::Mutex shutdown_mu_ ABSL_ACQUIRED_AFTER(mu_);
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
  absl::Status shutdown_status_ ABSL_GUARDED_BY(shutdown_mu_);
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_APP_VERIFIER_SERVER_H_
