// Regions of the co-located data plane (docs/DATA_PLANE.md): memory a worker
// on the same host registered once (POSIX shared memory, or CUDA memory it
// exported with cudaIpcGetMemHandle), which requests then reference instead
// of carrying bytes. A backend maps a region into its own address space
// (Backend::MapRegion); the registry (region_registry.h) names and counts them.
#ifndef SPECVERIFY_SERVER_REGIONS_REGION_H_
#define SPECVERIFY_SERVER_REGIONS_REGION_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace specverify::server {

enum class RegionKind { kSystem, kCuda };

inline const char* RegionKindName(RegionKind kind) {
  return kind == RegionKind::kSystem ? "system" : "cuda";
}

// What a worker asked to register, checked for form (RegisterRegionRequest).
struct RegionSpec {
  std::string name;
  RegionKind kind = RegionKind::kSystem;
  int64_t byte_size = 0;
  // kSystem: /dev/shm/<shm_name>, from offset_bytes.
  std::string shm_name;
  // kCuda: the 64 bytes of cudaIpcMemHandle_t and the device it lives on.
  std::string ipc_handle;
  int32_t device_ordinal = -1;
  // Where the region starts in the shm object or the exported allocation.
  int64_t offset_bytes = 0;
};

inline constexpr int kCudaIpcHandleBytes = 64;

// A region mapped into a backend's address space; unmapped on destruction.
// address() is what that backend's kernels read and write (device memory or
// device-mapped host memory for CUDA; host memory for the CPU backend).
class RegionMapping {
 public:
  virtual ~RegionMapping() = default;
  virtual std::byte* address() const = 0;
  // The CUDA device the bytes live on, -1 for host memory.
  virtual int32_t device_ordinal() const = 0;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_REGIONS_REGION_H_
