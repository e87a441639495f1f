#include "proto/runtime/client_id.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace specverify::grpc_runtime {
namespace {

bool IsClientIdChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' ||
         c == '-';
}

// Built only for an error: ValidateClientId runs on every call over a unix
// socket, and a valid id must cost no allocation.
std::string ClientIdRule() {
  return absl::StrCat("must be 1-", kMaxClientIdBytes, " characters of [A-Za-z0-9._:-]");
}

}  // namespace

absl::Status ValidateClientId(absl::string_view id) {
  if (id.empty() || id.size() > static_cast<size_t>(kMaxClientIdBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("metadata ", kClientIdMetadataKey, " has ",
                                                   id.size(), " characters; ", ClientIdRule()));
  }
  for (size_t i = 0; i < id.size(); ++i) {
    if (!IsClientIdChar(id[i])) {
      return absl::InvalidArgumentError(absl::StrCat("metadata ", kClientIdMetadataKey,
                                                     " has character code ",
                                                     static_cast<int>(static_cast<unsigned char>(id[i])),
                                                     " at offset ", i, "; ", ClientIdRule()));
    }
  }
  return absl::OkStatus();
}

std::string NewProcessClientId() {
  static std::atomic<uint64_t> next{0};
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string name;
  for (const char* p = host; *p != '\0' && name.size() < 64; ++p) {
    if (IsClientIdChar(*p)) name.push_back(*p);
  }
  if (name.empty()) name = "host";
  return absl::StrCat(name, "-", getpid(), "-", next.fetch_add(1));
}

}  // namespace specverify::grpc_runtime
