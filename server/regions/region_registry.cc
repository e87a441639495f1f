#include "server/regions/region_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/common/echo.h"

namespace specverify::server {
namespace {

std::string Key(const std::string& owner, const std::string& name) {
  return absl::StrCat(owner, std::string(1, '\0'), name);
}

}  // namespace

bool IsValidRegionName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
  });
}

RegionUse::RegionUse(std::shared_ptr<Region> region, RegionRegistry* registry)
    : region_(std::move(region)), registry_(registry) {
  region_->in_flight_.fetch_add(1, std::memory_order_relaxed);
  region_->total_.fetch_add(1, std::memory_order_relaxed);
  registry_->OnUseChanged(+1);
}

RegionUse& RegionUse::operator=(RegionUse&& other) noexcept {
  if (this != &other) {
    Reset();
    region_ = std::move(other.region_);
    registry_ = other.registry_;
    other.registry_ = nullptr;
  }
  return *this;
}

void RegionUse::Reset() {
  if (region_ == nullptr) return;
  region_->in_flight_.fetch_sub(1, std::memory_order_relaxed);
  registry_->OnUseChanged(-1);
  region_.reset();  // the last use of an unregistered region unmaps it here
  registry_ = nullptr;
}

RegionRegistry::RegionRegistry(const RegionLimits& limits, Mapper mapper, ServerMetrics* metrics)
    : limits_(limits), mapper_(std::move(mapper)), metrics_(metrics) {
  absl::MutexLock lock(&mu_);
  PublishUsage();
}

absl::Status RegionRegistry::Register(const std::string& owner, RegionSpec spec) {
  if (!IsValidRegionName(spec.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "name ", EchoForMessage(spec.name), " is not a region name (1-64 characters of ",
        "A-Z a-z 0-9 _ . -)"));
  }
  if (spec.byte_size <= 0 || spec.byte_size > limits_.max_region_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("byte_size is ", spec.byte_size,
                                                   "; must lie in [1, max_region_bytes=",
                                                   limits_.max_region_bytes, "]"));
  }
  const std::string key = Key(owner, spec.name);
  {
    // Checked before mapping (cheap refusals first) and again after it.
    absl::MutexLock lock(&mu_);
    if (regions_.contains(key)) {
      return absl::AlreadyExistsError(
          absl::StrCat("region ", EchoForMessage(spec.name), " is already registered"));
    }
    if (static_cast<int64_t>(regions_.size()) >= limits_.max_regions) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the server holds ", regions_.size(), " regions; limit max_regions=",
          limits_.max_regions));
    }
    if (spec.byte_size > limits_.max_region_bytes - registered_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "registering ", spec.byte_size, " bytes would exceed max_region_bytes=",
          limits_.max_region_bytes, " (", registered_bytes_, " registered)"));
    }
  }
  absl::StatusOr<std::unique_ptr<RegionMapping>> mapping = mapper_(spec);
  if (!mapping.ok()) return mapping.status();
  auto region = std::make_shared<Region>(owner, std::move(spec), *std::move(mapping));
  absl::MutexLock lock(&mu_);
  if (regions_.contains(key) || static_cast<int64_t>(regions_.size()) >= limits_.max_regions ||
      region->spec().byte_size > limits_.max_region_bytes - registered_bytes_) {
    return absl::AbortedError(absl::StrCat(
        "region ", EchoForMessage(region->spec().name),
        " raced another registration for the same name or the last capacity; retry"));
  }
  registered_bytes_ += region->spec().byte_size;
  regions_.emplace(key, std::move(region));
  PublishUsage();
  return absl::OkStatus();
}

absl::StatusOr<int32_t> RegionRegistry::Unregister(const std::string& owner,
                                                   const std::string& name) {
  std::shared_ptr<Region> region;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(Key(owner, name));
    if (it == regions_.end()) {
      return absl::NotFoundError(
          absl::StrCat("no region named ", EchoForMessage(name), " is registered"));
    }
    region = std::move(it->second);
    regions_.erase(it);
    registered_bytes_ -= region->spec().byte_size;
    PublishUsage();
  }
  // Unmapped here, or by the last request that still holds it.
  return region->requests_in_flight();
}

absl::StatusOr<RegionUse> RegionRegistry::Acquire(const std::string& owner,
                                                  const std::string& name,
                                                  const std::string& field) {
  std::shared_ptr<Region> region;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(Key(owner, name));
    if (it != regions_.end()) region = it->second;
  }
  if (region == nullptr) {
    return absl::NotFoundError(absl::StrCat(field, ": no region named ", EchoForMessage(name),
                                            " is registered (RegisterRegion first)"));
  }
  return RegionUse(std::move(region), this);
}

std::vector<RegionStatusRow> RegionRegistry::List(const std::string& owner) const {
  std::vector<RegionStatusRow> rows;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, region] : regions_) {
      if (region->owner() != owner) continue;
      RegionStatusRow row;
      row.name = region->spec().name;
      row.kind = region->spec().kind;
      row.byte_size = region->spec().byte_size;
      row.device_ordinal = region->device_ordinal();
      row.requests_in_flight = region->requests_in_flight();
      row.requests_total = region->requests_total();
      rows.push_back(std::move(row));
    }
  }
  std::sort(rows.begin(), rows.end(),
            [](const RegionStatusRow& a, const RegionStatusRow& b) { return a.name < b.name; });
  return rows;
}

void RegionRegistry::OnUseChanged(int32_t delta) {
  const int64_t now = uses_in_flight_.fetch_add(delta, std::memory_order_relaxed) + delta;
  metrics_->SetRegionRequestsInFlight(now);
}

void RegionRegistry::PublishUsage() {
  RegionUsage usage;
  for (const auto& [key, region] : regions_) {
    if (region->spec().kind == RegionKind::kSystem) {
      ++usage.system_regions;
      usage.system_bytes += region->spec().byte_size;
    } else {
      ++usage.cuda_regions;
      usage.cuda_bytes += region->spec().byte_size;
    }
  }
  metrics_->SetRegionUsage(usage);
}

}  // namespace specverify::server
