// A server under load: its gRPC channels (one TCP connection each) and stubs.
#ifndef SPECVERIFY_CLIENT_LOADGEN_TARGET_H_
#define SPECVERIFY_CLIENT_LOADGEN_TARGET_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/loadgen/config.h"
#include "client/loadgen/report.h"
#include "specverify/v1/verifier.grpc.pb.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace specverify::loadgen {

class Target {
 public:
  // Opens `channels` channels to `address`, each with its own connection
  // (a local subchannel pool, so gRPC does not share one socket among them),
  // and waits up to `connect_timeout_s` for every one to be ready.
  // UNAVAILABLE when the server cannot be reached; INVALID_ARGUMENT for
  // unreadable TLS files.
  static absl::StatusOr<std::unique_ptr<Target>> Connect(const std::string& address,
                                                         const TransportOptions& transport,
                                                         int32_t channels,
                                                         double connect_timeout_s = 10.0);

  // Polls the standard health service until it answers SERVING (for the
  // whole server, service ""). DEADLINE_EXCEEDED naming the last answer when
  // it does not within `timeout_s`.
  static absl::Status WaitForServing(const std::string& address, const TransportOptions& transport,
                                     double timeout_s);

  // GetServerInfo: backend, device and version. The address is filled in.
  absl::StatusOr<ServerDescription> Describe();

  int32_t num_channels() const { return static_cast<int32_t>(stubs_.size()); }
  v1::Verifier::Stub* stub(int32_t channel) const { return stubs_[channel].get(); }
  const std::string& address() const { return address_; }
  const TransportOptions& transport() const { return transport_; }

 private:
  Target(std::string address, TransportOptions transport)
      : address_(std::move(address)), transport_(std::move(transport)) {}

  std::string address_;
  TransportOptions transport_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Verifier::Stub>> stubs_;
};

}  // namespace specverify::loadgen

#endif  // SPECVERIFY_CLIENT_LOADGEN_TARGET_H_
