// specverify-server: serves specverify.v1.Verifier until SIGTERM/SIGINT,
// then drains gracefully (docs/SERVER.md). Exit code 0 after a clean drain;
// 2 for flags that do not parse (the systemd unit does not restart on it);
// 1 for any other start-up error, or when the backend failed. Under systemd
// with Type=notify it reports READY=1 once listening and STOPPING=1 when it
// starts to drain.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "proto/runtime/version.h"
#include "server/app/server_options.h"
#include "server/app/service_manager.h"
#include "server/app/verifier_server.h"
#include "server/metrics/prometheus_metrics.h"
#include "server/metrics/server_metrics.h"

namespace {

using specverify::server::ServerOptions;

// The service manager's view (systemd, Type=notify); a no-op elsewhere.
void Notify(const std::string& state) {
  if (const absl::Status s = specverify::server::NotifyServiceManager(state); !s.ok()) {
    std::fprintf(stderr, "specverify-server: %s\n", s.ToString().c_str());
  }
}

int Run(const ServerOptions& options) {
  // Signals are taken by one sigwait thread, never handled in a signal
  // handler: the mask is set before any other thread exists and inherited.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // ---- metrics: the one place the ServerMetrics implementation is chosen ----
  std::unique_ptr<specverify::server::ServerMetrics> metrics =
      std::make_unique<specverify::server::NoopServerMetrics>();
  if (!options.metrics_address.empty()) {
    specverify::server::PrometheusMetricsOptions metrics_options;
    metrics_options.listen_address = options.metrics_address;
    metrics_options.max_queue_delay = absl::Microseconds(options.max_queue_delay_us);
    auto exporter = specverify::server::PrometheusServerMetrics::Start(metrics_options);
    if (!exporter.ok()) {
      std::fprintf(stderr, "specverify-server: start-up failed: %s\n",
                   exporter.status().ToString().c_str());
      return 1;
    }
    metrics = std::move(*exporter);
  }
  // ---- end metrics ----

  auto server = specverify::server::VerifierServer::Start(options, metrics.get());
  if (!server.ok()) {
    std::fprintf(stderr, "specverify-server: start-up failed: %s\n",
                 server.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "specverify-server %s: backend %s (%s) on %s; %s\n",
               (*server)->info().version().c_str(), (*server)->info().backend().c_str(),
               (*server)->info().device_name().c_str(),
               (*server)->backend_reason().c_str(),
               options.metrics_address.empty() ? "metrics disabled" : "metrics on /metrics");
  // Tests and scripts parse these lines for the chosen port: one per
  // --listen_address item, "port N" or "unix:PATH" (gRPC's port 1 for a
  // socket is not a port).
  const std::vector<std::string> listening = (*server)->listening_on();
  for (const std::string& where : listening) std::printf("listening on %s\n", where.c_str());
  std::fflush(stdout);
  const std::string where = absl::StrJoin(listening, " and ");
  Notify(absl::StrCat("READY=1\nSTATUS=serving on ", where, " (backend ",
                      (*server)->info().backend(), ")"));

  specverify::server::VerifierServer* raw = server->get();
  std::thread signal_thread([raw, &signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    raw->RequestStop(absl::OkStatus());
  });

  const absl::Status reason = (*server)->WaitForStopRequest();
  if (!reason.ok()) {
    // Backend failure: wake the signal thread so it can be joined.
    pthread_kill(signal_thread.native_handle(), SIGTERM);
  }
  signal_thread.join();
  std::fprintf(stderr, "specverify-server: %s; draining (timeout %lld ms)\n",
               reason.ok() ? "signal received" : "stopping after backend failure",
               static_cast<long long>(options.drain_timeout_ms));
  Notify(absl::StrCat("STOPPING=1\nSTATUS=draining (",
                      reason.ok() ? "signal received" : "backend failure", ")"));
  const absl::Status drained =
      (*server)->Shutdown(absl::Milliseconds(options.drain_timeout_ms));
  if (!drained.ok()) {
    std::fprintf(stderr, "specverify-server: %s\n", drained.ToString().c_str());
  }
  const absl::Status health = (*server)->backend_health();
  server->reset();
  if (!health.ok()) {
    std::fprintf(stderr, "specverify-server: exiting after backend failure: %s\n",
                 health.ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "specverify-server: stopped\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<ServerOptions> options = specverify::server::ParseServerFlags(args);
  if (!options.ok()) {
    std::fprintf(stderr, "specverify-server: %s\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }
  if (options->help) {
    std::printf("%s", specverify::server::FlagsHelp().c_str());
    return 0;
  }
  if (options->version) {
    std::printf("specverify-server %s\n", specverify::VersionString().c_str());
    return 0;
  }
  return Run(*options);
}
