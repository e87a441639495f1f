// A worker's CUDA memory shared with the server through CUDA IPC (the
// data plane's "cuda" regions, docs/DATA_PLANE.md): device memory this
// process allocates and exports with cudaIpcGetMemHandle; the server opens
// the handle once when the region is registered. Built only with CUDA.
//
// The server must run in another process on the same host (CUDA does not
// open a process's own handles). Keep the region alive while it is
// registered: freeing exported memory that an importer still uses is
// undefined behaviour in CUDA's contract.
#ifndef SPECVERIFY_CLIENT_CUDA_REGION_H_
#define SPECVERIFY_CLIENT_CUDA_REGION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "specverify/v1/verifier.pb.h"

namespace specverify::client {

class CudaDeviceRegion {
 public:
  static absl::StatusOr<std::unique_ptr<CudaDeviceRegion>> Create(int device, int64_t bytes);
  ~CudaDeviceRegion();
  CudaDeviceRegion(const CudaDeviceRegion&) = delete;
  CudaDeviceRegion& operator=(const CudaDeviceRegion&) = delete;

  std::byte* device_data() const { return data_; }
  int64_t size() const { return size_; }
  int device() const { return device_; }
  // The RegisterRegion request for this memory under `region_name`.
  v1::RegisterRegionRequest Registration(const std::string& region_name) const;
  // Synchronous copies between this region and host memory.
  absl::Status CopyIn(int64_t offset, const void* host, int64_t bytes);
  absl::Status CopyOut(int64_t offset, void* host, int64_t bytes) const;
  // Synchronous copy of `bytes` from `from` to `to` inside the region
  // (device to device; the stretches must not overlap).
  absl::Status CopyWithin(int64_t from, int64_t to, int64_t bytes);

 private:
  CudaDeviceRegion(int device, std::byte* data, int64_t size, std::string handle)
      : device_(device), data_(data), size_(size), handle_(std::move(handle)) {}
  // Makes the region's GPU the calling thread's current device.
  absl::Status UseDevice() const;
  int device_;
  std::byte* data_;
  int64_t size_;
  std::string handle_;  // the 64 bytes of cudaIpcMemHandle_t
};

}  // namespace specverify::client

#endif  // SPECVERIFY_CLIENT_CUDA_REGION_H_
