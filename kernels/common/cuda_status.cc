#include "kernels/common/cuda_status.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace specverify {

absl::Status CudaStatus(cudaError_t error, std::string_view call) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(absl::string_view(call.data(), call.size()), ": ", cudaGetErrorName(error),
                                          ": ", cudaGetErrorString(error)));
}

bool CudaDeviceAvailable() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // clears the non-sticky error left by the query
    return false;
  }
  return count > 0;
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Create(size_t bytes) {
  if (bytes == 0) return DeviceBuffer();
  void* data = nullptr;
  SV_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&data, bytes),
                                absl::StrCat("cudaMalloc(", bytes, " bytes)")));
  return DeviceBuffer(data, bytes);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { Reset(); }

void DeviceBuffer::Reset() {
  // A failing cudaFree in a destructor has nowhere to go; the context is
  // already broken if it fails, and the next checked call reports it.
  if (data_ != nullptr) cudaFree(data_);
  data_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<PinnedBuffer> PinnedBuffer::Create(size_t bytes) {
  if (bytes == 0) return PinnedBuffer();
  void* data = nullptr;
  SV_RETURN_IF_ERROR(
      CudaStatus(cudaMallocHost(&data, bytes),
                 absl::StrCat("cudaMallocHost(", bytes, " bytes)")));
  return PinnedBuffer(data, bytes);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() { Reset(); }

void PinnedBuffer::Reset() {
  if (data_ != nullptr) cudaFreeHost(data_);
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace specverify
