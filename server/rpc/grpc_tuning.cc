#include "server/rpc/grpc_tuning.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/server_builder.h"

namespace specverify::server {

absl::StatusOr<GrpcArgs> ParseGrpcArgs(absl::string_view text) {
  GrpcArgs args;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--grpc_args item \"", item, "\" is not name=value (e.g. grpc.http2.bdp_probe=0)"));
    }
    const std::string name(absl::StripAsciiWhitespace(item.substr(0, eq)));
    const absl::string_view value = absl::StripAsciiWhitespace(item.substr(eq + 1));
    int number = 0;
    if (absl::SimpleAtoi(value, &number)) {
      args.emplace_back(name, number);
    } else {
      args.emplace_back(name, std::string(value));
    }
  }
  return args;
}

GrpcArgs EffectiveGrpcArgs(const GrpcArgs& overrides) {
  GrpcArgs args = {
      // A verify request with KV rows is 100 KB - 10 MB. HTTP/2's default
      // 64 KiB stream window makes the sender stop mid-message and wait a
      // round trip for WINDOW_UPDATE until BDP probing has grown it; start
      // at a window that holds a whole typical request.
      {"grpc.http2.lookahead_bytes", 8 << 20},
      // gRPC sets SO_REUSEPORT on Linux by default: a second server on the
      // same port would bind and take half of the new connections, each
      // without the other's KV handles and regions (server/app/listen_address.h).
      {"grpc.so_reuseport", 0},
  };
  for (const auto& override_arg : overrides) {
    const std::string& name = override_arg.first;
    auto it = std::find_if(args.begin(), args.end(),
                           [&name](const auto& arg) { return arg.first == name; });
    if (it != args.end()) {
      it->second = override_arg.second;
    } else {
      args.push_back(override_arg);
    }
  }
  return args;
}

void ApplyGrpcArgs(const GrpcArgs& args, grpc::ServerBuilder& builder) {
  for (const auto& [name, value] : args) {
    if (const int* number = std::get_if<int>(&value)) {
      builder.AddChannelArgument(name, *number);
    } else {
      builder.AddChannelArgument(name, std::get<std::string>(value));
    }
  }
}

}  // namespace specverify::server
