// The KV arena: one block of backend memory reserved at start-up, extents
// carved out of it per batch, and opaque handles naming each request's packed
// rows until they are released or their TTL passes.
//
// Lifecycle of a batch's rows:
//   1. Reserve(upper bound)            before dispatch: the batch can never
//                                      overwrite a live handle's bytes.
//   2. the backend packs into memory().base() + offset.
//   3. Publish(slice) per request that keeps a handle; Free() the rest
//      (unused tail, requests returning inline or nothing).
// A published region is reference-counted: Release() or expiry removes the
// handle from the table at once, but its bytes return to the allocator only
// when the last reader (a FetchKv stream) drops its reference.
//
// Per-client quota (issue #15, client_quota.h): a client (the batcher's
// PendingRequest::client) is charged the upper bound of its requests' rows
// from enqueue until they finish (Charge/Uncharge), and the bytes of its live
// handles until they return to the allocator (a handle published with
// `charged_to` takes over that part of the charge). A charge that would pass
// the quota is refused RESOURCE_EXHAUSTED naming the limit. With several
// devices (issue #16) their arenas share one ClientQuota.
//
// Devices: a server with several executors has one arena per device; each
// arena's handle ids start with its device index (HandleDeviceIndex), so a
// FetchKv or ReleaseKv finds the arena, and says which device, from the id.
//
// Thread safety: every method is thread-safe.
#ifndef SPECVERIFY_SERVER_ARENA_KV_ARENA_H_
#define SPECVERIFY_SERVER_ARENA_KV_ARENA_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/arena/arena_memory.h"
#include "server/arena/client_quota.h"
#include "server/arena/extent_allocator.h"
#include "server/common/clock.h"
#include "server/metrics/server_metrics.h"

namespace specverify::server {

struct KvArenaOptions {
  absl::Duration handle_ttl = absl::Seconds(30);
  // Batch reservations start at multiples of this (device-friendly).
  int64_t alignment_bytes = 256;
  // How often the reaper thread looks for expired handles; <= 0 starts no
  // thread (tests call ReapExpired themselves).
  absl::Duration reap_interval = absl::Milliseconds(100);
  // Arena bytes one client may hold at once (handles + the upper bound of
  // its queued and running requests' rows); 0 = no quota. Ignored when
  // `quota` is set.
  int64_t max_bytes_per_client = 0;
  // A quota shared with other arenas (one per device); must outlive the
  // arena. Null: the arena keeps its own, of max_bytes_per_client.
  ClientQuota* quota = nullptr;
  // The device this arena belongs to: the first two hex digits of every
  // handle id it publishes. [0, kMaxHandleDevices).
  int device_index = 0;
  Clock* clock = nullptr;             // RealClock when null
  ServerMetrics* metrics = nullptr;   // required
};

class KvArena;

// The rows behind one handle. Holding a shared_ptr keeps the bytes allocated.
class KvRegion {
 public:
  ~KvRegion();
  KvRegion(const KvRegion&) = delete;
  KvRegion& operator=(const KvRegion&) = delete;

  const std::string& handle() const { return handle_; }
  int64_t offset() const { return offset_; }
  int64_t bytes() const { return bytes_; }
  int64_t row_bytes() const { return row_bytes_; }
  int64_t num_rows() const { return num_rows_; }
  int32_t dtype() const { return dtype_; }
  // Copies `bytes` from `offset_in_region` to host memory.
  absl::Status CopyToHost(int64_t offset_in_region, int64_t bytes,
                          std::byte* dst) const;

 private:
  friend class KvArena;
  KvRegion(KvArena* arena, std::string handle, int64_t offset, int64_t bytes,
           int64_t row_bytes, int64_t num_rows, int32_t dtype,
           std::optional<std::string> charged_to)
      : arena_(arena), handle_(std::move(handle)), charged_to_(std::move(charged_to)),
        offset_(offset), bytes_(bytes), row_bytes_(row_bytes), num_rows_(num_rows),
        dtype_(dtype) {}
  KvArena* arena_;
  std::string handle_;
  // The client whose quota holds these bytes; none when published uncharged.
  std::optional<std::string> charged_to_;
  int64_t offset_, bytes_, row_bytes_, num_rows_;
  int32_t dtype_;
};

struct PublishedHandle {
  std::string id;
  absl::Time expires_at;
};

class KvArena {
 public:
  static absl::StatusOr<std::unique_ptr<KvArena>> Create(
      std::unique_ptr<ArenaMemory> memory, const KvArenaOptions& options);
  // REQUIRES: no KvRegion outlives the arena.
  ~KvArena();

  // Reserves `bytes` (> 0). RESOURCE_EXHAUSTED when the arena cannot hold it.
  absl::StatusOr<int64_t> Reserve(int64_t bytes);
  // Frees any sub-range of a reservation that no handle covers.
  void Free(int64_t offset, int64_t bytes);
  // Makes [offset, offset + bytes) of a reservation a handle with a fresh
  // 128-bit random id and the arena's TTL. bytes may be 0 (no rows kept).
  // `owner` is the client identity that may read and release it (the mTLS
  // peer identity; empty without mutual TLS). `charged_to`: the client that
  // Charge()d these bytes (as part of a larger charge, or exactly); the
  // handle takes that part of the charge over and releases it when its bytes
  // return to the arena.
  absl::StatusOr<PublishedHandle> Publish(
      int64_t offset, int64_t bytes, int64_t row_bytes, int64_t num_rows, int32_t dtype,
      const std::string& owner = "",
      const std::optional<std::string>& charged_to = std::nullopt);
  // The client quota that requests are charged to (Charge at enqueue) and
  // that handles published with `charged_to` give back to; shared between
  // the arenas of one server.
  ClientQuota& quota() { return *quota_; }
  int device_index() const { return options_.device_index; }
  // NOT_FOUND for an unknown, released or expired handle, and for one that
  // `caller` does not own: another identity learns nothing, not even that
  // the handle exists.
  absl::StatusOr<std::shared_ptr<const KvRegion>> Lookup(const std::string& handle,
                                                         const std::string& caller = "");
  // Removes the handle; returns the bytes that return to the arena.
  absl::StatusOr<int64_t> Release(const std::string& handle, const std::string& caller = "");
  // Removes every handle whose TTL passed; returns how many.
  int64_t ReapExpired();

  ArenaMemory& memory() { return *memory_; }
  int64_t capacity_bytes() const { return capacity_; }
  int64_t used_bytes();
  // Largest reservation that would succeed in one piece.
  int64_t largest_free_extent();
  int64_t live_handles();
  absl::Duration handle_ttl() const { return options_.handle_ttl; }

 private:
  friend class KvRegion;
  struct Entry {
    std::shared_ptr<KvRegion> region;
    absl::Time expires_at;
    std::string owner;
  };

  KvArena(std::unique_ptr<ArenaMemory> memory, const KvArenaOptions& options);
  void FreeLocked(int64_t offset, int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReportUsageLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReaperLoop();

  const std::unique_ptr<ArenaMemory> memory_;
  const KvArenaOptions options_;
  // options_.quota, or owned_quota_ when none was given.
  const std::unique_ptr<ClientQuota> owned_quota_;
  ClientQuota* const quota_;
  const int64_t capacity_;
  Clock* const clock_;
  ServerMetrics* const metrics_;

  absl::Mutex mu_;
  ExtentAllocator allocator_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Entry> handles_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

// Characters of a handle id: 128 bits as lowercase hex.
inline constexpr size_t kHandleIdChars = 32;
// Devices a handle id can name: its first byte.
inline constexpr int kMaxHandleDevices = 256;

// A handle id: the device index as the first two hex digits, then 120 bits
// from getrandom(2); kHandleIdChars lowercase hex digits in all. The id is
// still unguessable (2^120), and names the device its rows live on.
// REQUIRES: 0 <= device_index < kMaxHandleDevices.
absl::StatusOr<std::string> NewHandleId(int device_index = 0);

// The device index a well-formed handle id names (its first two hex digits).
// REQUIRES: IsWellFormedHandleId(id).
int HandleDeviceIndex(absl::string_view id);

// True iff `id` has NewHandleId's format (kHandleIdChars of [0-9a-f]).
bool IsWellFormedHandleId(absl::string_view id);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_ARENA_KV_ARENA_H_
