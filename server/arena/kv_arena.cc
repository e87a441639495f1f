#include "server/arena/kv_arena.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/common/echo.h"

namespace specverify::server {

absl::StatusOr<std::string> NewHandleId(int device_index) {
  unsigned char bytes[16];
  size_t got = 1;
  bytes[0] = static_cast<unsigned char>(device_index);
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(
          absl::StrCat("getrandom failed: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

int HandleDeviceIndex(absl::string_view id) {
  const auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  return nibble(id[0]) * 16 + nibble(id[1]);
}

bool IsWellFormedHandleId(absl::string_view id) {
  if (id.size() != kHandleIdChars) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

KvRegion::~KvRegion() {
  absl::MutexLock lock(&arena_->mu_);
  arena_->FreeLocked(offset_, bytes_);
  if (charged_to_.has_value()) arena_->quota_->Uncharge(*charged_to_, bytes_);
  arena_->ReportUsageLocked();
}

absl::Status KvRegion::CopyToHost(int64_t offset_in_region, int64_t bytes,
                                  std::byte* dst) const {
  if (offset_in_region < 0 || bytes < 0 || offset_in_region + bytes > bytes_) {
    return absl::OutOfRangeError(absl::StrCat(
        "bytes [", offset_in_region, ", ", offset_in_region + bytes,
        ") lie outside the handle's ", bytes_, " bytes"));
  }
  return arena_->memory_->CopyToHost(offset_ + offset_in_region, bytes, dst);
}

absl::StatusOr<std::unique_ptr<KvArena>> KvArena::Create(
    std::unique_ptr<ArenaMemory> memory, const KvArenaOptions& options) {
  if (memory == nullptr) return absl::InvalidArgumentError("arena memory is null");
  if (options.metrics == nullptr) {
    return absl::InvalidArgumentError("KvArenaOptions.metrics is null");
  }
  if (options.handle_ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "handle TTL is ", absl::FormatDuration(options.handle_ttl), "; must be > 0"));
  }
  if (options.max_bytes_per_client < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_bytes_per_client is ", options.max_bytes_per_client, "; must be >= 0"));
  }
  if (options.device_index < 0 || options.device_index >= kMaxHandleDevices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device_index is ", options.device_index, "; must lie in [0, ", kMaxHandleDevices, ")"));
  }
  if (options.alignment_bytes <= 0 ||
      (options.alignment_bytes & (options.alignment_bytes - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "alignment is ", options.alignment_bytes, "; must be a power of two"));
  }
  return std::unique_ptr<KvArena>(new KvArena(std::move(memory), options));
}

KvArena::KvArena(std::unique_ptr<ArenaMemory> memory, const KvArenaOptions& options)
    : memory_(std::move(memory)),
      options_(options),
      owned_quota_(options.quota == nullptr
                       ? std::make_unique<ClientQuota>(options.max_bytes_per_client)
                       : nullptr),
      quota_(options.quota != nullptr ? options.quota : owned_quota_.get()),
      capacity_(memory_->size_bytes()),
      clock_(options.clock != nullptr ? options.clock : RealClock::Get()),
      metrics_(options.metrics),
      allocator_(memory_->size_bytes()) {
  {
    absl::MutexLock lock(&mu_);
    ReportUsageLocked();
  }
  if (options_.reap_interval > absl::ZeroDuration()) {
    reaper_ = std::thread([this] { ReaperLoop(); });
  }
}

KvArena::~KvArena() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (reaper_.joinable()) reaper_.join();
  // Drop the table's references; regions free themselves under mu_.
  absl::flat_hash_map<std::string, Entry> handles;
  {
    absl::MutexLock lock(&mu_);
    handles.swap(handles_);
  }
  handles.clear();
}

void KvArena::ReaperLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      // Wakes early only to stop; expiry has reap-interval granularity.
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.reap_interval);
      if (stopping_) return;
    }
    ReapExpired();
  }
}

absl::StatusOr<int64_t> KvArena::Reserve(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<int64_t> offset = allocator_.Allocate(bytes, options_.alignment_bytes);
  if (offset.ok()) {
    ReportUsageLocked();
  } else {
    metrics_->SetArenaLargestFreeExtent(options_.device_index, allocator_.largest_free_extent());
  }
  return offset;
}

void KvArena::Free(int64_t offset, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  FreeLocked(offset, bytes);
  ReportUsageLocked();
}

void KvArena::FreeLocked(int64_t offset, int64_t bytes) {
  // A failure here is a bookkeeping bug (double free); the allocator refused
  // the change, so the arena stays consistent. Surface it loudly.
  absl::Status s = allocator_.Free(offset, bytes);
  if (!s.ok()) std::fprintf(stderr, "specverify: KV arena: %s\n", s.ToString().c_str());
}

void KvArena::ReportUsageLocked() {
  metrics_->SetArenaUsage(options_.device_index, allocator_.used_bytes(), capacity_,
                          static_cast<int64_t>(handles_.size()));
}

absl::StatusOr<PublishedHandle> KvArena::Publish(int64_t offset, int64_t bytes,
                                                 int64_t row_bytes,
                                                 int64_t num_rows, int32_t dtype,
                                                 const std::string& owner,
                                                 const std::optional<std::string>& charged_to) {
  const absl::Time expires = clock_->Now() + options_.handle_ttl;
  for (;;) {
    absl::StatusOr<std::string> id = NewHandleId(options_.device_index);
    if (!id.ok()) return id.status();
    absl::MutexLock lock(&mu_);
    // A collision (odds 2^-128 per pair) draws again: never replace a live handle.
    if (handles_.contains(*id)) continue;
    auto region = std::shared_ptr<KvRegion>(
        new KvRegion(this, *id, offset, bytes, row_bytes, num_rows, dtype, charged_to));
    handles_.emplace(*id, Entry{std::move(region), expires, owner});
    ReportUsageLocked();
    return PublishedHandle{*std::move(id), expires};
  }
}

absl::StatusOr<std::shared_ptr<const KvRegion>> KvArena::Lookup(
    const std::string& handle, const std::string& caller) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end() || it->second.expires_at <= now || it->second.owner != caller) {
    return absl::NotFoundError(absl::StrCat(
        "KV handle ", EchoForMessage(handle), " is unknown, released or expired"));
  }
  return std::shared_ptr<const KvRegion>(it->second.region);
}

absl::StatusOr<int64_t> KvArena::Release(const std::string& handle, const std::string& caller) {
  const absl::Time now = clock_->Now();
  std::shared_ptr<KvRegion> region;
  {
    absl::MutexLock lock(&mu_);
    auto it = handles_.find(handle);
    if (it == handles_.end() || it->second.expires_at <= now || it->second.owner != caller) {
      return absl::NotFoundError(absl::StrCat(
          "KV handle ", EchoForMessage(handle), " is unknown, released or expired"));
    }
    region = std::move(it->second.region);
    handles_.erase(it);
    ReportUsageLocked();
  }
  const int64_t bytes = region->bytes();
  region.reset();  // frees now unless a FetchKv stream still reads it
  return bytes;
}

int64_t KvArena::ReapExpired() {
  const absl::Time now = clock_->Now();
  std::vector<std::shared_ptr<KvRegion>> expired;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = handles_.begin(); it != handles_.end();) {
      if (it->second.expires_at <= now) {
        expired.push_back(std::move(it->second.region));
        handles_.erase(it++);
      } else {
        ++it;
      }
    }
    if (!expired.empty()) ReportUsageLocked();
    // Once per reap interval: walking the free list is not for every batch.
    metrics_->SetArenaLargestFreeExtent(options_.device_index, allocator_.largest_free_extent());
  }
  const int64_t count = static_cast<int64_t>(expired.size());
  expired.clear();  // regions free their bytes outside our lock section above
  if (count > 0) metrics_->OnHandlesExpired(count);
  return count;
}

int64_t KvArena::largest_free_extent() {
  absl::MutexLock lock(&mu_);
  return allocator_.largest_free_extent();
}

int64_t KvArena::used_bytes() {
  absl::MutexLock lock(&mu_);
  return allocator_.used_bytes();
}

int64_t KvArena::live_handles() {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(handles_.size());
}

}  // namespace specverify::server
