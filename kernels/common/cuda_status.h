// The kernels/ boundary between CUDA's error codes and absl::Status, plus the
// two RAII buffers every CUDA user in the project needs (device memory and
// pinned host memory). Plain C++: includes only cuda_runtime_api.h, so g++
// translation units (tests, the server's executor) can use it.
//
// Error policy: any cudaError_t that reaches this boundary becomes kInternal
// naming the call. The server treats such a status as fatal for the device
// (a failed launch can leave the context unusable), never as a bad request.
#ifndef SPECVERIFY_KERNELS_COMMON_CUDA_STATUS_H_
#define SPECVERIFY_KERNELS_COMMON_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/common/status_macros.h"

namespace specverify {

// OkStatus for cudaSuccess; otherwise kInternal "<call>: <cudaGetErrorName>:
// <cudaGetErrorString>".
absl::Status CudaStatus(cudaError_t error, std::string_view call);

// True iff the CUDA runtime loads and sees at least one device. Clears the
// sticky "no device" error so a later call starts clean. Tests use it to skip.
bool CudaDeviceAvailable();

// Returns from the enclosing function (absl::Status or StatusOr) when the
// CUDA call fails; the status names the call's source text.
#define SV_CUDA_RETURN_IF_ERROR(expr) \
  SV_RETURN_IF_ERROR(::specverify::CudaStatus((expr), #expr))

// Device memory owned by one object; freed on destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // cudaMalloc of `bytes` (0 gives an empty buffer with a null pointer).
  static absl::StatusOr<DeviceBuffer> Create(size_t bytes);

  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  size_t size() const { return bytes_; }

 private:
  DeviceBuffer(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  void Reset();

  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory (cudaMallocHost) for asynchronous copies. Move-only.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static absl::StatusOr<PinnedBuffer> Create(size_t bytes);

  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  size_t size() const { return bytes_; }

 private:
  PinnedBuffer(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  void Reset();

  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_COMMON_CUDA_STATUS_H_
