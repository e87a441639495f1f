#include "server/arena/client_quota.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "server/common/echo.h"

namespace specverify::server {

absl::Status ClientQuota::Charge(const std::string& client, int64_t bytes) {
  if (max_bytes_ <= 0 || bytes <= 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  auto it = bytes_.find(client);
  const int64_t held = it == bytes_.end() ? 0 : it->second;
  // Compared as quota - held: a client-sized `bytes` cannot overflow.
  if (bytes > max_bytes_ - held) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "client ", EchoForMessage(client), " holds ", held,
        " KV arena bytes (live handles and the rows of its queued and running requests) + ",
        bytes, " for this request would exceed max_arena_bytes_per_client=", max_bytes_,
        "; release or fetch handles with release_after"));
  }
  if (it == bytes_.end()) {
    bytes_.emplace(client, bytes);
  } else {
    it->second += bytes;
  }
  return absl::OkStatus();
}

void ClientQuota::Uncharge(const std::string& client, int64_t bytes) {
  if (max_bytes_ <= 0 || bytes <= 0) return;
  absl::MutexLock lock(&mu_);
  auto it = bytes_.find(client);
  if (it == bytes_.end() || it->second < bytes) {
    // A bookkeeping bug (released more than was charged); keep the table sane.
    std::fprintf(stderr, "specverify: KV arena: client quota underflow (%lld bytes)\n",
                 static_cast<long long>(bytes));
    if (it != bytes_.end()) bytes_.erase(it);
    return;
  }
  it->second -= bytes;
  // Erased at 0, so the table holds only clients with bytes (bounded by the
  // arenas and the queue, not by how many clients ever connected).
  if (it->second == 0) bytes_.erase(it);
}

int64_t ClientQuota::client_bytes(const std::string& client) {
  absl::MutexLock lock(&mu_);
  auto it = bytes_.find(client);
  return it == bytes_.end() ? 0 : it->second;
}

int64_t ClientQuota::charged_clients() {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(bytes_.size());
}

}  // namespace specverify::server
