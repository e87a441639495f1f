// Per-client arena quota (issue #15, --max_arena_bytes_per_client): a client
// is charged the upper bound of its requests' rows from enqueue until they
// finish, and the bytes of its live handles until they return to an arena.
// One quota serves every device's arena (issue #16): a client's limit is on
// the server, not per GPU, and a handle on any device gives its charge back
// here.
//
// Thread safety: every method is thread-safe. Lock order: an arena's lock
// may be held while calling in (KvRegion's destructor); the quota never
// calls out.
#ifndef SPECVERIFY_SERVER_ARENA_CLIENT_QUOTA_H_
#define SPECVERIFY_SERVER_ARENA_CLIENT_QUOTA_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace specverify::server {

class ClientQuota {
 public:
  // 0 = no quota: every charge succeeds and nothing is recorded.
  explicit ClientQuota(int64_t max_bytes_per_client) : max_bytes_(max_bytes_per_client) {}

  // Charges `bytes` (>= 0) to `client`. RESOURCE_EXHAUSTED naming
  // max_arena_bytes_per_client when the client would hold more than it;
  // then nothing is charged.
  absl::Status Charge(const std::string& client, int64_t bytes);
  // Gives back `bytes` of an earlier Charge.
  void Uncharge(const std::string& client, int64_t bytes);
  // Bytes charged to `client` now (0 without a quota).
  int64_t client_bytes(const std::string& client);
  // Clients holding a charge (the table shrinks as charges return to 0).
  int64_t charged_clients();
  int64_t max_bytes_per_client() const { return max_bytes_; }

 private:
  const int64_t max_bytes_;
  absl::Mutex mu_;
  // Accounts with a charge > 0 only.
  absl::flat_hash_map<std::string, int64_t> bytes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_ARENA_CLIENT_QUOTA_H_
