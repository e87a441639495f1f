#include "client/client_id_channel.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "grpcpp/support/client_interceptor.h"
#include "proto/runtime/client_id.h"

namespace specverify::client {
namespace {

namespace gx = ::grpc::experimental;

class ClientIdInterceptor final : public gx::Interceptor {
 public:
  explicit ClientIdInterceptor(const std::string* client_id) : client_id_(client_id) {}

  void Intercept(gx::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(gx::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(grpc_runtime::kClientIdMetadataKey, *client_id_);
    }
    methods->Proceed();
  }

 private:
  const std::string* client_id_;  // the factory's, which the channel owns
};

class ClientIdInterceptorFactory final : public gx::ClientInterceptorFactoryInterface {
 public:
  explicit ClientIdInterceptorFactory(std::string client_id) : client_id_(std::move(client_id)) {}

  gx::Interceptor* CreateClientInterceptor(gx::ClientRpcInfo* /*info*/) override {
    return new ClientIdInterceptor(&client_id_);
  }

 private:
  const std::string client_id_;
};

}  // namespace

bool IsUnixSocketTarget(const std::string& target) {
  return absl::StartsWith(target, "unix:") || absl::StartsWith(target, "unix-abstract:");
}

std::shared_ptr<grpc::Channel> CreateChannelNamingClient(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, const std::string& client_id) {
  if (!IsUnixSocketTarget(target)) return grpc::CreateCustomChannel(target, credentials, args);
  std::vector<std::unique_ptr<gx::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<ClientIdInterceptorFactory>(client_id));
  return gx::CreateCustomChannelWithInterceptors(target, credentials, args, std::move(factories));
}

}  // namespace specverify::client
