// The registered regions of every client: names, limits, ownership and use
// counts. A region belongs to the client identity that registered it (the
// mTLS identity; "" without mutual TLS, where names are shared and a name is
// a bearer token like a KV handle); other identities cannot see it.
//
// Lifetime: a request that references a region holds a RegionUse from
// validation until it has been answered. Unregister removes the name at
// once, but the mapping is released only when the last use goes, so
// unregistering never frees memory under a queued or running request.
//
// Thread safety: every method may be called from any thread.
#ifndef SPECVERIFY_SERVER_REGIONS_REGION_REGISTRY_H_
#define SPECVERIFY_SERVER_REGIONS_REGION_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/server_metrics.h"
#include "server/regions/region.h"

namespace specverify::server {

struct RegionLimits {
  int32_t max_regions = 64;                  // all identities together
  int64_t max_region_bytes = int64_t{1} << 40;  // sum of byte_size, all identities
};

class RegionRegistry;

// One registered region. Read-only after registration except the counters.
class Region {
 public:
  Region(std::string owner, RegionSpec spec, std::unique_ptr<RegionMapping> mapping)
      : owner_(std::move(owner)), spec_(std::move(spec)), mapping_(std::move(mapping)) {}

  const std::string& owner() const { return owner_; }
  const RegionSpec& spec() const { return spec_; }
  std::byte* address() const { return mapping_->address(); }
  int32_t device_ordinal() const { return mapping_->device_ordinal(); }
  int32_t requests_in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  int64_t requests_total() const { return total_.load(std::memory_order_relaxed); }

 private:
  friend class RegionUse;
  const std::string owner_;
  const RegionSpec spec_;
  const std::unique_ptr<RegionMapping> mapping_;
  std::atomic<int32_t> in_flight_{0};
  std::atomic<int64_t> total_{0};
};

// A request's hold on a region: counted in flight while it lives, and keeps
// the mapping alive (see the lifetime note above). Movable.
class RegionUse {
 public:
  RegionUse() = default;
  RegionUse(std::shared_ptr<Region> region, RegionRegistry* registry);
  RegionUse(RegionUse&& other) noexcept { *this = std::move(other); }
  RegionUse& operator=(RegionUse&& other) noexcept;
  ~RegionUse() { Reset(); }
  const Region* get() const { return region_.get(); }
  const Region* operator->() const { return region_.get(); }

 private:
  void Reset();
  std::shared_ptr<Region> region_;
  RegionRegistry* registry_ = nullptr;
};

struct RegionStatusRow {
  std::string name;
  RegionKind kind = RegionKind::kSystem;
  int64_t byte_size = 0;
  int32_t device_ordinal = -1;
  int32_t requests_in_flight = 0;
  int64_t requests_total = 0;
};

class RegionRegistry {
 public:
  // Maps a checked spec into the backend's address space (Backend::MapRegion).
  using Mapper = std::function<absl::StatusOr<std::unique_ptr<RegionMapping>>(const RegionSpec&)>;

  RegionRegistry(const RegionLimits& limits, Mapper mapper, ServerMetrics* metrics);

  // INVALID_ARGUMENT for a bad name or size, ALREADY_EXISTS for a name this
  // owner has, RESOURCE_EXHAUSTED at the limits, or the mapper's error.
  absl::Status Register(const std::string& owner, RegionSpec spec);
  // NOT_FOUND for a name this owner has not registered. Returns the requests
  // still holding it (its memory goes when they finish).
  absl::StatusOr<int32_t> Unregister(const std::string& owner, const std::string& name);
  // NOT_FOUND (naming `field`) for a name this owner has not registered.
  absl::StatusOr<RegionUse> Acquire(const std::string& owner, const std::string& name,
                                    const std::string& field);
  // The owner's regions, by name.
  std::vector<RegionStatusRow> List(const std::string& owner) const;
  const RegionLimits& limits() const { return limits_; }

 private:
  friend class RegionUse;
  void OnUseChanged(int32_t delta);
  void PublishUsage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RegionLimits limits_;
  const Mapper mapper_;
  ServerMetrics* const metrics_;
  mutable absl::Mutex mu_;
  // Key: owner + '\0' + name.
  absl::flat_hash_map<std::string, std::shared_ptr<Region>> regions_ ABSL_GUARDED_BY(mu_);
  int64_t registered_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> uses_in_flight_{0};
};

// The API's region-name rule: 1..64 characters of [A-Za-z0-9_.-].
bool IsValidRegionName(const std::string& name);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_REGIONS_REGION_REGISTRY_H_
