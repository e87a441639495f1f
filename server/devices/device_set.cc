#include "server/devices/device_set.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/echo.h"

namespace specverify::server {

DeviceSet::DeviceSet(std::vector<Device> devices)
    : devices_(std::move(devices)),
      in_service_(new std::atomic<bool>[devices_.size()]),
      out_of_service_(devices_.size()) {
  for (size_t i = 0; i < devices_.size(); ++i) in_service_[i].store(true);
}

std::string DeviceSet::names() const {
  return absl::StrJoin(devices_, ", ",
                       [](std::string* out, const Device& d) { out->append(d.name); });
}

absl::Status DeviceSet::status(int index) const {
  absl::MutexLock lock(&mu_);
  return out_of_service_[index];
}

bool DeviceSet::TakeOutOfService(int index, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (!in_service_[index].load(std::memory_order_relaxed)) return false;
  out_of_service_[index] =
      absl::Status(why.ok() ? absl::StatusCode::kInternal : why.code(),
                   absl::StrCat("device ", devices_[index].name, " is out of service: ",
                                why.message()));
  in_service_[index].store(false, std::memory_order_release);
  return true;
}

int DeviceSet::in_service_count() const {
  int count = 0;
  for (int i = 0; i < size(); ++i) count += in_service(i) ? 1 : 0;
  return count;
}

absl::Status DeviceSet::CheckServable(int32_t cuda_ordinal) const {
  std::string why;
  for (int i = 0; i < size(); ++i) {
    if (!Serves(i, cuda_ordinal)) continue;
    if (in_service(i)) return absl::OkStatus();
    absl::StrAppend(&why, why.empty() ? "" : "; ", status(i).message());
  }
  if (why.empty()) {
    // Validation pins a batch only to a GPU a region was mapped on, which
    // has an executor; reaching here means the device list changed.
    return absl::FailedPreconditionError(
        absl::StrCat("no executor of this server runs on cuda:", cuda_ordinal));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the request's CUDA regions live on cuda:", cuda_ordinal,
      " and every executor there is out of service (", why,
      "); register regions on another device"));
}

absl::StatusOr<KvArena*> DeviceSet::ArenaForHandle(absl::string_view handle) const {
  const int index = HandleDeviceIndex(handle);
  if (index >= size()) {
    return absl::NotFoundError(absl::StrCat("KV handle ", EchoForMessage(handle),
                                            " is unknown, released or expired"));
  }
  if (!in_service(index)) {
    return absl::FailedPreconditionError(
        absl::StrCat("KV handle ", EchoForMessage(handle), " lives on device ",
                     devices_[index].name, ", which a fault took out of service (",
                     status(index).message(), "); its rows are lost: verify again"));
  }
  return devices_[index].arena;
}

absl::StatusOr<std::unique_ptr<RegionMapping>> DeviceSet::MapRegion(
    const RegionSpec& spec) const {
  bool any_cuda = false;
  for (const Device& d : devices_) any_cuda = any_cuda || d.cuda_ordinal >= 0;
  if (size() == 1 || (spec.kind == RegionKind::kCuda && !any_cuda)) {
    // One device, or none that could take CUDA memory: the backend words it.
    for (int i = 0; i < size(); ++i) {
      if (in_service(i)) return devices_[i].backend->MapRegion(spec);
    }
  }
  bool any_on_ordinal = false;
  for (int i = 0; i < size(); ++i) {
    if (spec.kind == RegionKind::kCuda) {
      if (devices_[i].cuda_ordinal != spec.device_ordinal) continue;
      any_on_ordinal = true;
    }
    if (in_service(i)) return devices_[i].backend->MapRegion(spec);
  }
  if (spec.kind == RegionKind::kCuda && !any_on_ordinal) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda.device_ordinal is ", spec.device_ordinal, "; this server's executors run on ",
        names(), " (a CUDA region must live on one of their GPUs)"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no device in service can map the region (",
      spec.kind == RegionKind::kCuda ? absl::StrCat("cuda:", spec.device_ordinal) : names(),
      " out of service)"));
}

}  // namespace specverify::server
