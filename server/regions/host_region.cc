#include "server/regions/host_region.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/regions/shm_mapping.h"

namespace specverify::server {
namespace {

class HostRegionMapping final : public RegionMapping {
 public:
  explicit HostRegionMapping(std::unique_ptr<ShmMapping> shm) : shm_(std::move(shm)) {}
  std::byte* address() const override { return shm_->data(); }
  int32_t device_ordinal() const override { return -1; }

 private:
  std::unique_ptr<ShmMapping> shm_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RegionMapping>> MapHostRegion(const RegionSpec& spec,
                                                             const char* backend_name) {
  if (spec.kind != RegionKind::kSystem) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda regions need a CUDA backend; this server runs the ", backend_name,
        " backend (register system shared memory instead)"));
  }
  absl::StatusOr<std::unique_ptr<ShmMapping>> shm =
      ShmMapping::Map(spec.shm_name, spec.offset_bytes, spec.byte_size);
  if (!shm.ok()) return shm.status();
  return std::unique_ptr<RegionMapping>(new HostRegionMapping(*std::move(shm)));
}

}  // namespace specverify::server
