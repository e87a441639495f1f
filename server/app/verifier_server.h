// The assembled server: one executor per --device entry (a backend and a KV
// arena in its memory each, issue #16), the batcher feeding them, the
// Verifier service, gRPC health and reflection. Used by main and,
// in-process, by the integration tests.
//
// Health: the overall status and "specverify.v1.Verifier" are SERVING while
// any device is in service (with --stop_on_device_failure: while all are);
// "specverify.v1.Verifier/<device name>" (e.g. ".../cuda:1") follows one
// device.
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
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/app/server_options.h"
#include "server/app/socket_path_lock.h"
#include "server/arena/kv_arena.h"
#include "server/regions/region_registry.h"
#include "server/backend/backend.h"
#include "server/backend/backend_factory.h"
#include "server/batcher/batcher.h"
#include "server/devices/device_set.h"
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
  // The same with injected executors, device i = devices[i] (tests: several
  // controllable devices, or CUDA executors with a fault armed on one).
  static absl::StatusOr<std::unique_ptr<VerifierServer>> Start(
      const ServerOptions& options, ServerMetrics* metrics, std::vector<DeviceBackend> devices);
  ~VerifierServer();  // Shutdown(zero drain) if not shut down yet

  // The bound port of the first host:port of --listen_address (0 if it
  // lists only unix: sockets).
  int port() const;
  // Per --listen_address item, in order: "port N" (bound) or "unix:PATH".
  std::vector<std::string> listening_on() const;
  // What a client on this host dials for the first item: "127.0.0.1:<port>"
  // or its unix: address.
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

  // OK while the server serves: some device is in service (every device,
  // with --stop_on_device_failure); else the fault that stopped it (the
  // process then exits non-zero).
  absl::Status backend_health() const;
  Batcher& batcher() { return *batcher_; }
  // Device 0's arena (the only one with a single executor).
  KvArena& arena() { return *arenas_.front(); }
  const DeviceSet& devices() const { return *devices_; }

 private:
  VerifierServer() = default;
  // Sets the gRPC health status (overall, Verifier and every device in
  // service) and the serving gauge.
  void SetHealth(bool serving);
  // A device fault took `device` out while others serve on.
  void OnDeviceOutOfService(int device, const absl::Status& why);

  ServerOptions options_;
  ServerMetrics* metrics_ = nullptr;
  // One per unix: address, from before any device is set up until gRPC has
  // stopped listening (Shutdown); destroyed after every member below, so a
  // start-up that fails halfway lets go of them too.
  std::vector<SocketPathLock> socket_locks_;
  std::vector<std::unique_ptr<Backend>> backends_;  // by device index
  std::string backend_reason_;
  // Every device's arena charges one client quota (issue #15's limit is per
  // server); declared before the arenas, which use it.
  std::unique_ptr<ClientQuota> quota_;
  std::vector<std::unique_ptr<KvArena>> arenas_;
  std::unique_ptr<DeviceSet> devices_;
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
  std::vector<std::string> listen_addresses_;  // --listen_address, split
  std::vector<int> bound_ports_;               // per address (1 for a unix: socket)

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
