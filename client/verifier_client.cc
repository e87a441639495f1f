#include "client/verifier_client.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/client_id_channel.h"
#include "client/stream_session.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "proto/runtime/callback_queue_pin.h"
#include "proto/runtime/client_id.h"

namespace specverify::client {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

std::string DefaultServiceConfigJson(const VerifierClientOptions& options) {
  const std::string service = v1::Verifier::service_full_name();
  std::string config = "{";
  if (options.load_balancing_policy == "round_robin") {
    absl::StrAppend(&config, R"("healthCheckConfig":{"serviceName":")", service, R"("},)");
  }
  // The most specific name wins, so Verify's entry carries waitForReady
  // too, and the service-wide entry covers the other methods.
  const std::string wait = options.wait_for_ready ? R"(,"waitForReady":true)" : "";
  absl::StrAppend(&config, R"("methodConfig":[)");
  if (options.wait_for_ready) {
    absl::StrAppend(&config, R"({"name":[{"service":")", service, R"("}])", wait, "},");
  }
  absl::StrAppend(&config, R"({"name":[{"service":")", service, R"(","method":"Verify"}])", wait);
  if (options.verify_max_attempts > 1) {
    // Short backoff: a refusal while draining is immediate, and the next
    // attempt should reach another replica (or this one restarted) soon.
    absl::StrAppend(&config, R"(,"retryPolicy":{"maxAttempts":)", options.verify_max_attempts,
                    R"(,"initialBackoff":"0.01s","maxBackoff":"0.2s","backoffMultiplier":2,)",
                    R"("retryableStatusCodes":["UNAVAILABLE","CANCELLED"]})");
  }
  absl::StrAppend(&config, "}]}");
  return config;
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

absl::StatusOr<std::unique_ptr<VerifierClient>> VerifierClient::Create(
    const VerifierClientOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("address is empty");
  }
  if (options.max_message_bytes <= 0 || options.max_message_bytes > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_message_bytes is ", options.max_message_bytes,
        "; must lie in [1, ", INT32_MAX, "]"));
  }
  if (options.verify_max_attempts < 1 || options.verify_max_attempts > 5) {
    return absl::InvalidArgumentError(absl::StrCat(
        "verify_max_attempts is ", options.verify_max_attempts,
        "; must lie in [1, 5] (gRPC's limit on attempts)"));
  }
  VerifierClientOptions named = options;
  if (named.client_id.empty()) {
    named.client_id = grpc_runtime::NewProcessClientId();
  } else if (absl::Status valid = grpc_runtime::ValidateClientId(named.client_id); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("client_id: ", valid.message()));
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.use_tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_root_cert_file.empty()) {
      absl::StatusOr<std::string> roots = ReadFile(options.tls_root_cert_file);
      if (!roots.ok()) return roots.status();
      ssl.pem_root_certs = *std::move(roots);
    }
    if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
      return absl::InvalidArgumentError(
          "tls_cert_file and tls_key_file go together (mutual TLS needs both)");
    }
    if (!options.tls_cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadFile(options.tls_cert_file);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadFile(options.tls_key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  if (options.use_tls && !options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  if (!options.load_balancing_policy.empty()) {
    args.SetLoadBalancingPolicyName(options.load_balancing_policy);
  }
  args.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  if (options.own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetServiceConfigJSON(DefaultServiceConfigJson(options));
  // gRPC keeps a call's request for its retries only up to this size (256
  // KiB by default), then commits the call to its first attempt: sampled
  // requests with rows inline are larger. The bytes are the request's own
  // (referenced, not copied).
  args.SetInt(GRPC_ARG_PER_RPC_RETRY_BUFFER_SIZE, static_cast<int>(options.max_message_bytes));
  // Destroying this client must never tear down gRPC's callback queue
  // (proto/runtime/callback_queue_pin.h).
  grpc_runtime::PinCallbackQueue();
  auto channel = CreateChannelNamingClient(named.address, credentials, args, named.client_id);
  return std::unique_ptr<VerifierClient>(new VerifierClient(std::move(named), std::move(channel)));
}

VerifierClient::VerifierClient(VerifierClientOptions options,
                               std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::Verifier::NewStub(channel_)) {}

void VerifierClient::ApplyDeadline(grpc::ClientContext& context,
                                   absl::Duration deadline) const {
  const absl::Duration d =
      deadline != absl::ZeroDuration() ? deadline : options_.default_deadline;
  if (d > absl::ZeroDuration() && d != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + d));
  }
}

absl::StatusOr<v1::VerifyResponse> VerifierClient::Verify(
    const v1::VerifyRequest& request, absl::Duration deadline) {
  grpc::ClientContext context;
  ApplyDeadline(context, deadline);
  v1::VerifyResponse response;
  grpc::Status status = stub_->Verify(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::VerifyResponse> VerifierClient::VerifyCeiling(
    const v1::VerifyRequest& request, absl::Duration deadline) {
  grpc::ClientContext context;
  ApplyDeadline(context, deadline);
  v1::VerifyResponse response;
  grpc::Status status = stub_->VerifyCeiling(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

void VerifierClient::VerifyAsync(
    const v1::VerifyRequest& request,
    std::function<void(absl::StatusOr<v1::VerifyResponse>)> done,
    absl::Duration deadline) {
  struct Call {
    grpc::ClientContext context;
    v1::VerifyRequest request;
    v1::VerifyResponse response;
    std::function<void(absl::StatusOr<v1::VerifyResponse>)> done;
  };
  auto* call = new Call;
  call->request = request;
  call->done = std::move(done);
  ApplyDeadline(call->context, deadline);
  stub_->async()->Verify(&call->context, &call->request, &call->response,
                         [call](grpc::Status status) {
                           std::unique_ptr<Call> owned(call);
                           if (status.ok()) {
                             owned->done(std::move(owned->response));
                           } else {
                             owned->done(FromGrpcStatus(status));
                           }
                         });
}

absl::StatusOr<std::unique_ptr<VerifyStreamSession>> VerifierClient::OpenStream(
    StreamCallback on_response, absl::Duration deadline, int resend_unanswered) {
  if (!on_response) return absl::InvalidArgumentError("on_response is empty");
  const absl::Time when = deadline > absl::ZeroDuration() &&
                                  deadline != absl::InfiniteDuration()
                              ? absl::Now() + deadline
                              : absl::InfiniteFuture();
  if (resend_unanswered < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("resend_unanswered is ", resend_unanswered, "; must be >= 0"));
  }
  if (resend_unanswered > 0) {
    return internal::OpenResendingStream(stub_.get(), std::move(on_response), when,
                                         resend_unanswered);
  }
  return internal::OpenStreamCall(stub_.get(), std::move(on_response), when);
}

absl::StatusOr<std::string> VerifierClient::FetchKv(const std::string& handle,
                                                    const FetchOptions& options) {
  grpc::ClientContext context;
  ApplyDeadline(context, absl::ZeroDuration());
  v1::FetchKvRequest request;
  request.set_handle(handle);
  request.set_first_row(options.first_row);
  request.set_num_rows(options.num_rows);
  request.set_chunk_bytes(options.chunk_bytes);
  request.set_release_after(options.release_after);
  std::unique_ptr<grpc::ClientReader<v1::FetchKvChunk>> reader =
      stub_->FetchKv(&context, request);
  std::string bytes;
  v1::FetchKvChunk chunk;
  int64_t total = -1;
  absl::Status inconsistency;
  while (reader->Read(&chunk)) {
    if (!inconsistency.ok()) continue;  // drain the stream, keep the first error
    if (chunk.offset() != static_cast<int64_t>(bytes.size())) {
      inconsistency = absl::DataLossError(absl::StrCat(
          "chunk offset ", chunk.offset(), " does not continue at ", bytes.size()));
    } else if (total >= 0 && chunk.total_bytes() != total) {
      inconsistency = absl::DataLossError("total_bytes changed between chunks");
    }
    total = chunk.total_bytes();
    bytes.append(chunk.data());
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!inconsistency.ok()) return inconsistency;
  if (total < 0) total = 0;
  if (static_cast<int64_t>(bytes.size()) != total) {
    return absl::DataLossError(absl::StrCat("received ", bytes.size(),
                                            " bytes of ", total));
  }
  return bytes;
}

absl::StatusOr<int64_t> VerifierClient::ReleaseKv(const std::string& handle) {
  grpc::ClientContext context;
  ApplyDeadline(context, absl::ZeroDuration());
  v1::ReleaseKvRequest request;
  request.set_handle(handle);
  v1::ReleaseKvResponse response;
  grpc::Status status = stub_->ReleaseKv(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.released_bytes();
}

absl::Status VerifierClient::RegisterRegion(const v1::RegisterRegionRequest& request) {
  grpc::ClientContext context;
  ApplyDeadline(context, absl::ZeroDuration());
  v1::RegisterRegionResponse response;
  return FromGrpcStatus(stub_->RegisterRegion(&context, request, &response));
}

absl::StatusOr<int32_t> VerifierClient::UnregisterRegion(const std::string& name) {
  grpc::ClientContext context;
  ApplyDeadline(context, absl::ZeroDuration());
  v1::UnregisterRegionRequest request;
  request.set_name(name);
  v1::UnregisterRegionResponse response;
  grpc::Status status = stub_->UnregisterRegion(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.requests_in_flight();
}

absl::StatusOr<v1::ListRegionsResponse> VerifierClient::ListRegions() {
  grpc::ClientContext context;
  ApplyDeadline(context, absl::ZeroDuration());
  v1::ListRegionsResponse response;
  grpc::Status status = stub_->ListRegions(&context, v1::ListRegionsRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::ServerInfo> VerifierClient::GetServerInfo() {
  grpc::ClientContext context;
  ApplyDeadline(context, absl::ZeroDuration());
  v1::ServerInfo info;
  grpc::Status status =
      stub_->GetServerInfo(&context, v1::GetServerInfoRequest(), &info);
  if (!status.ok()) return FromGrpcStatus(status);
  return info;
}

absl::StatusOr<bool> VerifierClient::CheckHealth(const std::string& service) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  ApplyDeadline(context, absl::ZeroDuration());
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = health->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

}  // namespace specverify::client
