// Regions on the CUDA executor (docs/DATA_PLANE.md): CUDA memory of another
// process opened from its cudaIpcMemHandle_t, and system shared memory
// registered with the device (mapped host memory) so kernels can read and
// write it. Both stay open until the region is unregistered and its last
// request is done.
//
// CUDA IPC: the server holds the imported mapping; the exporter must keep
// the allocation alive for as long as the region is registered. If the
// exporting process exits, the driver keeps the physical memory while any
// importer has it open, so a request in flight reads what was last written
// and never faults the device (docs/DATA_PLANE.md records what was seen).
#ifndef SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_REGION_H_
#define SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_REGION_H_

#include <memory>

#include "absl/status/statusor.h"
#include "server/regions/region.h"

namespace specverify::server {

absl::StatusOr<std::unique_ptr<RegionMapping>> MapCudaExecutorRegion(const RegionSpec& spec,
                                                                     int device_ordinal);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_REGION_H_
