#include "client/loadgen/target.h"

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/client_id_channel.h"
#include "client/verifier_client.h"
#include "grpcpp/grpcpp.h"
#include "proto/runtime/callback_queue_pin.h"
#include "proto/runtime/client_id.h"

namespace specverify::loadgen {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeCredentials(
    const TransportOptions& t) {
  if (!t.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (!t.tls_ca_file.empty()) {
    absl::StatusOr<std::string> roots = ReadFile(t.tls_ca_file, "tls_ca");
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *roots;
  }
  if (!t.tls_cert_file.empty() || !t.tls_key_file.empty()) {
    absl::StatusOr<std::string> cert = ReadFile(t.tls_cert_file, "tls_cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile(t.tls_key_file, "tls_key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Target>> Target::Connect(const std::string& address,
                                                        const TransportOptions& transport,
                                                        int32_t channels,
                                                        double connect_timeout_s) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = MakeCredentials(transport);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<Target> target(new Target(address, transport));
  // Closing the target must never tear down gRPC's callback queue: a process
  // may run several load generations (proto/runtime/callback_queue_pin.h).
  grpc_runtime::PinCallbackQueue();
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(connect_timeout_s * 1000));
  for (int32_t c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(transport.max_message_bytes));
    args.SetMaxSendMessageSize(static_cast<int>(transport.max_message_bytes));
    // Without a local pool, channels with equal arguments share one
    // subchannel (one TCP connection), defeating --channels.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("specverify.loadgen.channel", c);
    if (!transport.tls_server_name.empty()) args.SetSslTargetNameOverride(transport.tls_server_name);
    // Each channel is a client of its own on a unix socket too.
    std::shared_ptr<grpc::Channel> channel =
        client::CreateChannelNamingClient(address, *credentials, args, grpc_runtime::NewProcessClientId());
    if (!channel->WaitForConnected(deadline)) {
      return absl::UnavailableError(absl::StrCat("cannot connect to ", address, " (channel ", c,
                                                 ") within ", connect_timeout_s, " s"));
    }
    target->stubs_.push_back(v1::Verifier::NewStub(channel));
    target->channels_.push_back(std::move(channel));
  }
  return target;
}

absl::Status Target::WaitForServing(const std::string& address, const TransportOptions& transport,
                                    double timeout_s) {
  client::VerifierClientOptions options;
  options.address = address;
  options.use_tls = transport.tls;
  options.tls_root_cert_file = transport.tls_ca_file;
  // Under mutual TLS the health check needs the client certificate too.
  options.tls_cert_file = transport.tls_cert_file;
  options.tls_key_file = transport.tls_key_file;
  options.tls_server_name = transport.tls_server_name;
  options.max_message_bytes = transport.max_message_bytes;
  options.default_deadline = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<client::VerifierClient>> health_client =
      client::VerifierClient::Create(options);
  if (!health_client.ok()) return health_client.status();
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  std::string last = "no answer";
  while (true) {
    absl::StatusOr<bool> serving = (*health_client)->CheckHealth("");
    if (serving.ok() && *serving) return absl::OkStatus();
    last = serving.ok() ? "NOT_SERVING" : serving.status().ToString();
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat(address, " is not SERVING after ", timeout_s,
                                                  " s; last health answer: ", last));
}

absl::StatusOr<ServerDescription> Target::Describe() {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ServerInfo info;
  grpc::Status status = stubs_[0]->GetServerInfo(&context, v1::GetServerInfoRequest(), &info);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("GetServerInfo on ", address_, ": ", status.error_message()));
  }
  ServerDescription description;
  description.address = address_;
  description.backend = info.backend();
  description.device_name = info.device_name();
  description.version = info.version();
  if (info.has_limits()) description.max_queue_delay_us = info.limits().max_queue_delay_us();
  return description;
}

}  // namespace specverify::loadgen
