// Region mapping for backends that compute on the host (CPU reference, no-op):
// system (shared-memory) regions only.
#ifndef SPECVERIFY_SERVER_REGIONS_HOST_REGION_H_
#define SPECVERIFY_SERVER_REGIONS_HOST_REGION_H_

#include <memory>

#include "absl/status/statusor.h"
#include "server/regions/region.h"

namespace specverify::server {

// kSystem: the shared memory mapped into this process. kCuda:
// FAILED_PRECONDITION (this backend has no device to open the handle on).
absl::StatusOr<std::unique_ptr<RegionMapping>> MapHostRegion(const RegionSpec& spec,
                                                             const char* backend_name);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_REGIONS_HOST_REGION_H_
