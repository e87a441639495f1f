#include "server/app/verifier_server.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/health_check_service_interface.h"
#include "proto/runtime/callback_queue_pin.h"
#include "proto/runtime/version.h"
#include "server/app/listen_address.h"
#include "server/backend/backend_factory.h"
#include "server/rpc/grpc_tuning.h"
#include "server/rpc/protobuf_log.h"

namespace specverify::server {
namespace {

absl::StatusOr<std::string> ReadPemFile(absl::string_view flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  if (in) text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": cannot read a PEM file there"));
  }
  return text.str();
}

// Plaintext, TLS, or mutual TLS (docs/SERVER.md "TLS"). With a reload
// interval the files are watched by `*provider`, which must live as long as
// the server.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const ServerOptions& o,
    std::shared_ptr<grpc::experimental::CertificateProviderInterface>* provider) {
  if (o.tls_cert_file.empty()) return grpc::InsecureServerCredentials();
  // Read here in both modes: an unreadable file stops start-up naming its
  // flag (the file watcher would only log and serve no certificate).
  absl::StatusOr<std::string> cert = ReadPemFile("tls_cert_file", o.tls_cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPemFile("tls_key_file", o.tls_key_file);
  if (!key.ok()) return key.status();
  const bool mutual = !o.tls_client_ca_file.empty();
  const grpc_ssl_client_certificate_request_type request_type =
      mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  absl::StatusOr<std::string> ca;
  if (mutual) {
    ca = ReadPemFile("tls_client_ca_file", o.tls_client_ca_file);
    if (!ca.ok()) return ca.status();
  }
  if (o.tls_reload_interval_s > 0) {
    // gRPC re-reads the files every interval and hands what it read to new
    // handshakes; established connections keep theirs.
    *provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        o.tls_key_file, o.tls_cert_file, mutual ? o.tls_client_ca_file : std::string(),
        static_cast<unsigned int>(o.tls_reload_interval_s));
    grpc::experimental::TlsServerCredentialsOptions tls(*provider);
    tls.watch_identity_key_cert_pairs();
    if (mutual) tls.watch_root_certs();
    tls.set_cert_request_type(request_type);
    return grpc::experimental::TlsServerCredentials(tls);
  }
  grpc::SslServerCredentialsOptions ssl(request_type);
  if (mutual) ssl.pem_root_certs = *std::move(ca);
  ssl.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<VerifierServer>> VerifierServer::Start(
    const ServerOptions& options, ServerMetrics* metrics, std::unique_ptr<Backend> backend) {
  std::vector<DeviceBackend> devices;
  if (backend != nullptr) {
    DeviceBackend device;
    device.name = backend->Describe().name;
    device.backend = std::move(backend);
    devices.push_back(std::move(device));
  }
  return Start(options, metrics, std::move(devices));
}

absl::StatusOr<std::unique_ptr<VerifierServer>> VerifierServer::Start(
    const ServerOptions& options, ServerMetrics* metrics, std::vector<DeviceBackend> devices) {
  if (metrics == nullptr) return absl::InvalidArgumentError("metrics is null");
  if (absl::Status s = ValidateServerOptions(options); !s.ok()) return s;
  // Before any device is initialized: a second instance on this address
  // must not take GPU memory from the one serving there.
  const std::vector<std::string> listen = ListenAddresses(options.listen_address);
  for (const std::string& address : listen) {
    if (absl::Status s = CheckListenAddressFree(address); !s.ok()) return s;
  }
  // One protobuf log line per call site per 10 s, not one per bad request.
  InstallRateLimitedProtobufLogging();
  std::unique_ptr<VerifierServer> server(new VerifierServer);
  server->options_ = options;
  server->metrics_ = metrics;
  // Held until the server has stopped listening: two servers starting on one
  // socket path at the same moment both pass the check above.
  for (const std::string& address : listen) {
    if (const std::optional<std::string> path = UnixSocketPath(address)) {
      absl::StatusOr<SocketPathLock> lock = SocketPathLock::Acquire(address, *path);
      if (!lock.ok()) return lock.status();
      server->socket_locks_.push_back(*std::move(lock));
    }
  }

  if (!devices.empty()) {
    server->backend_reason_ = devices.size() == 1 ? "injected backend" : "injected backends";
  } else {
    absl::StatusOr<DeviceSpec> spec = ParseDeviceSpec(options.device);
    if (!spec.ok()) return spec.status();
    CpuBackendOptions cpu;
    cpu.threads = options.cpu_threads;
    CudaExecutorOptions cuda;
    cuda.max_batch_sequences = options.max_batch_sequences;
    cuda.max_draft_tokens = options.max_draft_tokens;
    // A single request larger than --max_batch_bytes forms a batch alone.
    cuda.max_batch_kv_bytes = std::max(options.max_batch_bytes, options.max_message_bytes);
    cuda.slots = options.cuda_slots;
    cuda.mapped_inputs_max_bytes = options.cuda_mapped_inputs_max_bytes;
    cuda.completion_spin_us = options.cuda_completion_spin_us;
    cuda.greedy_host_decision_max_rows = options.cuda_host_decision_max_rows;
    cuda.dispatch_threshold_bytes =
        options.calibrate_dispatch ? -1 : options.dispatch_threshold_bytes;
    absl::StatusOr<DeviceBackends> created = CreateBackends(*spec, cpu, cuda);
    if (!created.ok()) return created.status();
    devices = std::move(created->devices);
    server->backend_reason_ = std::move(created->reason);
  }
  if (static_cast<int>(devices.size()) > kMaxDevices) {
    return absl::InvalidArgumentError(
        absl::StrCat(devices.size(), " executors; at most ", kMaxDevices));
  }
  std::vector<std::string> names;
  for (const DeviceBackend& d : devices) names.push_back(d.name);
  // Before the arenas: they report usage per device from their first moment.
  metrics->SetDevices(names);

  server->quota_ = std::make_unique<ClientQuota>(options.max_arena_bytes_per_client);
  KvArenaOptions arena_options;
  arena_options.handle_ttl = absl::Milliseconds(options.kv_handle_ttl_ms);
  arena_options.reap_interval =
      std::clamp(absl::Milliseconds(options.kv_handle_ttl_ms) / 4,
                 absl::Milliseconds(1), absl::Milliseconds(100));
  arena_options.quota = server->quota_.get();
  arena_options.metrics = metrics;
  std::vector<Device> set;
  for (size_t i = 0; i < devices.size(); ++i) {
    Backend* const backend = devices[i].backend.get();
    server->backends_.push_back(std::move(devices[i].backend));
    absl::StatusOr<std::unique_ptr<ArenaMemory>> memory =
        backend->AllocateArenaMemory(options.kv_arena_bytes);
    if (!memory.ok()) {
      return absl::Status(memory.status().code(), absl::StrCat(devices[i].name, ": ",
                                                               memory.status().message()));
    }
    arena_options.device_index = static_cast<int>(i);
    absl::StatusOr<std::unique_ptr<KvArena>> arena =
        KvArena::Create(*std::move(memory), arena_options);
    if (!arena.ok()) return arena.status();
    server->arenas_.push_back(*std::move(arena));
    set.push_back(Device{devices[i].name, devices[i].cuda_ordinal, backend,
                         server->arenas_.back().get()});
  }
  server->devices_ = std::make_unique<DeviceSet>(std::move(set));
  const BackendDescription description = server->backends_.front()->Describe();

  RegionLimits region_limits;
  region_limits.max_regions = options.max_regions;
  region_limits.max_region_bytes = options.max_region_bytes;
  const DeviceSet* const mapper = server->devices_.get();
  server->regions_ = std::make_unique<RegionRegistry>(
      region_limits, [mapper](const RegionSpec& spec) { return mapper->MapRegion(spec); },
      metrics);

  BatcherOptions batcher_options;
  batcher_options.max_batch_sequences = options.max_batch_sequences;
  batcher_options.max_batch_bytes = options.max_batch_bytes;
  batcher_options.preferred_batch_sequences = options.preferred_batch_sequences;
  batcher_options.max_queue_delay = absl::Microseconds(options.max_queue_delay_us);
  batcher_options.max_queue_sequences = options.max_queue_sequences;
  batcher_options.max_queued_sequences_per_client = options.max_queued_sequences_per_client;
  batcher_options.devices = server->devices_.get();
  batcher_options.metrics = metrics;
  batcher_options.stop_on_device_failure = options.stop_on_device_failure;
  VerifierServer* self = server.get();
  batcher_options.on_backend_failure = [self](const absl::Status& status) {
    std::fprintf(stderr, "specverify-server: backend failed: %s\n",
                 status.ToString().c_str());
    if (self->grpc_server_ != nullptr) self->SetHealth(false);
    self->RequestStop(status);
  };
  batcher_options.on_device_failure = [self](int device, const absl::Status& status) {
    self->OnDeviceOutOfService(device, status);
  };
  absl::StatusOr<std::unique_ptr<Batcher>> batcher = Batcher::Create(batcher_options);
  if (!batcher.ok()) return batcher.status();
  server->batcher_ = *std::move(batcher);

  v1::ServerInfo& info = server->info_;
  info.set_version(VersionString());
  info.set_backend(description.name);
  info.set_device_name(description.device_name);
  v1::ServerLimits* limits = info.mutable_limits();
  limits->set_max_batch_sequences(options.max_batch_sequences);
  limits->set_max_batch_bytes(options.max_batch_bytes);
  limits->set_max_queue_delay_us(options.max_queue_delay_us);
  limits->set_max_queue_sequences(options.max_queue_sequences);
  limits->set_max_sequences_per_request(options.max_sequences_per_request);
  limits->set_max_draft_tokens(options.max_draft_tokens);
  limits->set_kv_arena_bytes(options.kv_arena_bytes);
  limits->set_kv_handle_ttl_ms(options.kv_handle_ttl_ms);
  limits->set_max_message_bytes(options.max_message_bytes);
  limits->set_preferred_batch_sequences(options.preferred_batch_sequences);
  limits->set_max_tree_nodes(options.max_tree_nodes);
  limits->set_max_regions(options.max_regions);
  limits->set_max_region_bytes(options.max_region_bytes);
  for (const std::string& kind : description.region_kinds) info.add_region_kinds(kind);
  limits->set_max_queued_sequences_per_client(options.max_queued_sequences_per_client);
  limits->set_max_arena_bytes_per_client(options.max_arena_bytes_per_client);
  info.set_dispatch_threshold_bytes(description.dispatch_threshold_bytes);
  info.set_dispatch_threshold_source(description.dispatch_threshold_source);
  std::vector<std::string> models;
  for (int i = 0; i < server->devices_->size(); ++i) {
    const Device& device = server->devices_->at(i);
    const BackendDescription d = device.backend->Describe();
    v1::DeviceInfo* row = info.add_devices();
    row->set_index(i);
    row->set_name(device.name);
    row->set_backend(d.name);
    row->set_device_name(d.device_name);
    row->set_cuda_ordinal(device.cuda_ordinal);
    row->set_in_service(true);
    row->set_kv_arena_bytes(device.arena->capacity_bytes());
    row->set_max_batches_in_flight(device.backend->max_batches_in_flight());
    row->set_dispatch_threshold_bytes(d.dispatch_threshold_bytes);
    row->set_dispatch_threshold_source(d.dispatch_threshold_source);
    if (std::find(models.begin(), models.end(), d.device_name) == models.end()) {
      models.push_back(d.device_name);
    }
  }
  info.add_modes("greedy");
  info.add_modes("sampled");

  VerifierServiceOptions service_options;
  service_options.limits.max_sequences_per_request = options.max_sequences_per_request;
  service_options.limits.max_draft_tokens = options.max_draft_tokens;
  service_options.limits.max_tree_nodes = options.max_tree_nodes;
  // The most any backend stages for one batch: a larger sampled request is
  // answered INVALID_ARGUMENT at the edge instead of failing in the executor.
  service_options.limits.max_sampled_request_bytes =
      std::max<int64_t>(options.max_batch_bytes, options.max_message_bytes);
  service_options.default_chunk_bytes = options.fetch_chunk_bytes;
  service_options.max_chunk_bytes = options.max_message_bytes - 4096;
  service_options.max_stream_buffered_answers = options.max_stream_buffered_answers;
  service_options.info = info;
  service_options.batcher = server->batcher_.get();
  service_options.devices = server->devices_.get();
  service_options.regions = server->regions_.get();
  service_options.metrics = metrics;
  service_options.mutual_tls = !options.tls_client_ca_file.empty();
  server->service_ = std::make_unique<VerifierService>(service_options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ServerCredentialsFor(options, &server->certificate_provider_);
  if (!credentials.ok()) return credentials.status();
  // Before the server joins gRPC's callback queue: its shutdown must never
  // be the one that tears the queue down (proto/runtime/callback_queue_pin.h).
  grpc_runtime::PinCallbackQueue();
  grpc::ServerBuilder builder;
  server->listen_addresses_ = listen;
  server->bound_ports_.assign(listen.size(), 0);
  for (size_t i = 0; i < listen.size(); ++i) {
    // Again right before the bind, which on a unix: path would replace the
    // socket of a server started meanwhile.
    if (absl::Status s = CheckListenAddressFree(listen[i]); !s.ok()) return s;
    builder.AddListeningPort(listen[i], *credentials, &server->bound_ports_[i]);
  }
  builder.RegisterService(server->service_.get());
  ApplyGrpcArgs(EffectiveGrpcArgs(*ParseGrpcArgs(options.grpc_args)), builder);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  server->grpc_server_ = builder.BuildAndStart();
  const auto unbound = std::find(server->bound_ports_.begin(), server->bound_ports_.end(), 0);
  if (server->grpc_server_ == nullptr || unbound != server->bound_ports_.end()) {
    // gRPC binds all or nothing; it logs why (errno) for the address that failed.
    return absl::UnavailableError(absl::StrCat("cannot listen on --listen_address=",
                                               options.listen_address));
  }
  // SERVING only now that the backend, arena and batcher are up.
  metrics->SetIdentity(
      ServerIdentity{info.version(), info.backend(), absl::StrJoin(models, ", ")});
  server->SetHealth(true);
  return server;
}

void VerifierServer::SetHealth(bool serving) {
  grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
  for (int i = 0; i < devices_->size(); ++i) {
    health->SetServingStatus(absl::StrCat(kVerifierServiceName, "/", devices_->at(i).name),
                             serving && devices_->in_service(i));
  }
  health->SetServingStatus(kVerifierServiceName, serving);
  health->SetServingStatus(serving);
  metrics_->SetServing(serving);
}

void VerifierServer::OnDeviceOutOfService(int device, const absl::Status& why) {
  std::fprintf(stderr,
               "specverify-server: %s; %d of %d devices serve on (--stop_on_device_failure "
               "stops instead)\n",
               why.ToString().c_str(), devices_->in_service_count(), devices_->size());
  if (grpc_server_ != nullptr) {
    grpc_server_->GetHealthCheckService()->SetServingStatus(
        absl::StrCat(kVerifierServiceName, "/", devices_->at(device).name), false);
  }
}

absl::Status VerifierServer::backend_health() const {
  const int in_service = devices_->in_service_count();
  if (in_service == devices_->size() ||
      (in_service > 0 && !options_.stop_on_device_failure)) {
    return absl::OkStatus();
  }
  for (int i = 0; i < devices_->size(); ++i) {
    if (!devices_->in_service(i)) return devices_->status(i);
  }
  return absl::OkStatus();
}

VerifierServer::~VerifierServer() {
  if (grpc_server_ != nullptr) (void)Shutdown(absl::ZeroDuration());
}

int VerifierServer::port() const {
  for (size_t i = 0; i < listen_addresses_.size(); ++i) {
    if (!UnixSocketPath(listen_addresses_[i]).has_value()) return bound_ports_[i];
  }
  return 0;
}

std::vector<std::string> VerifierServer::listening_on() const {
  std::vector<std::string> where;
  for (size_t i = 0; i < listen_addresses_.size(); ++i) {
    where.push_back(UnixSocketPath(listen_addresses_[i]).has_value()
                        ? listen_addresses_[i]
                        : absl::StrCat("port ", bound_ports_[i]));
  }
  return where;
}

std::string VerifierServer::local_address() const {
  return LocalDialAddress(listen_addresses_.front(), bound_ports_.front());
}

void VerifierServer::RequestStop(const absl::Status& reason) {
  absl::MutexLock lock(&mu_);
  if (stop_requested_) return;
  stop_requested_ = true;
  stop_reason_ = reason;
}

absl::Status VerifierServer::WaitForStopRequest() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&stop_requested_));
  return stop_reason_;
}

absl::Status VerifierServer::Shutdown(absl::Duration drain_timeout) {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return shutdown_status_;
  shut_down_ = true;
  const absl::Time deadline = absl::Now() + drain_timeout;
  SetHealth(false);
  service_->StartDraining();
  batcher_->StartDrain();
  const bool drained = batcher_->WaitIdle(deadline);
  const int64_t left = batcher_->queued_sequences();
  // Answers whatever is still queued UNAVAILABLE; waits for in-flight batches.
  batcher_->Stop();
  // Open streams get until the deadline to half-close, then are cancelled.
  grpc_server_->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now())));
  // gRPC has closed and unlinked its sockets: the next server may take them.
  for (SocketPathLock& lock : socket_locks_) lock.Release();
  for (const std::unique_ptr<Backend>& backend : backends_) backend->Shutdown();
  if (!drained) {
    shutdown_status_ = absl::DeadlineExceededError(absl::StrCat(
        "drain timeout ", absl::FormatDuration(drain_timeout), " passed with ", left,
        " sequences still queued; they were answered UNAVAILABLE"));
  }
  return shutdown_status_;
}

}  // namespace specverify::server
