#include "client/cuda_region.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"

namespace specverify::client {
namespace {

absl::Status CudaError(cudaError_t e, const char* call) {
  return absl::InternalError(absl::StrCat(call, ": ", cudaGetErrorString(e)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaDeviceRegion>> CudaDeviceRegion::Create(int device,
                                                                           int64_t bytes) {
  if (bytes <= 0) return absl::InvalidArgumentError("a CUDA region of 0 bytes");
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return CudaError(e, "cudaSetDevice");
  void* data = nullptr;
  if (cudaError_t e = cudaMalloc(&data, static_cast<size_t>(bytes)); e != cudaSuccess) {
    return CudaError(e, "cudaMalloc");
  }
  cudaIpcMemHandle_t handle;
  if (cudaError_t e = cudaIpcGetMemHandle(&handle, data); e != cudaSuccess) {
    (void)cudaFree(data);  // the error below is the one to report
    return CudaError(e, "cudaIpcGetMemHandle");
  }
  return std::unique_ptr<CudaDeviceRegion>(new CudaDeviceRegion(
      device, static_cast<std::byte*>(data), bytes,
      std::string(reinterpret_cast<const char*>(&handle), sizeof(handle))));
}

CudaDeviceRegion::~CudaDeviceRegion() {
  // A destructor has no one to report to: if the device is gone, the free
  // fails with it and the process's memory goes with the device anyway.
  (void)cudaSetDevice(device_);
  (void)cudaFree(data_);
}

absl::Status CudaDeviceRegion::UseDevice() const {
  if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
    return CudaError(e, "cudaSetDevice (the CUDA region's device)");
  }
  return absl::OkStatus();
}

v1::RegisterRegionRequest CudaDeviceRegion::Registration(const std::string& region_name) const {
  v1::RegisterRegionRequest r;
  r.set_name(region_name);
  r.set_byte_size(size_);
  r.mutable_cuda()->set_ipc_handle(handle_);
  r.mutable_cuda()->set_device_ordinal(device_);
  return r;
}

absl::Status CudaDeviceRegion::CopyIn(int64_t offset, const void* host, int64_t bytes) {
  if (offset < 0 || bytes < 0 || offset > size_ || bytes > size_ - offset) {
    return absl::OutOfRangeError("copy outside the CUDA region");
  }
  if (absl::Status s = UseDevice(); !s.ok()) return s;
  if (cudaError_t e = cudaMemcpy(data_ + offset, host, static_cast<size_t>(bytes),
                                 cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    return CudaError(e, "cudaMemcpy (to the CUDA region)");
  }
  return absl::OkStatus();
}

absl::Status CudaDeviceRegion::CopyOut(int64_t offset, void* host, int64_t bytes) const {
  if (offset < 0 || bytes < 0 || offset > size_ || bytes > size_ - offset) {
    return absl::OutOfRangeError("copy outside the CUDA region");
  }
  if (absl::Status s = UseDevice(); !s.ok()) return s;
  if (cudaError_t e = cudaMemcpy(host, data_ + offset, static_cast<size_t>(bytes),
                                 cudaMemcpyDeviceToHost);
      e != cudaSuccess) {
    return CudaError(e, "cudaMemcpy (from the CUDA region)");
  }
  return absl::OkStatus();
}

absl::Status CudaDeviceRegion::CopyWithin(int64_t from, int64_t to, int64_t bytes) {
  const auto inside = [&](int64_t offset) {
    return offset >= 0 && bytes >= 0 && offset <= size_ && bytes <= size_ - offset;
  };
  if (!inside(from) || !inside(to)) return absl::OutOfRangeError("copy outside the CUDA region");
  if (from < to + bytes && to < from + bytes) {
    return absl::InvalidArgumentError("overlapping copy inside the CUDA region");
  }
  if (absl::Status s = UseDevice(); !s.ok()) return s;
  if (cudaError_t e = cudaMemcpy(data_ + to, data_ + from, static_cast<size_t>(bytes),
                                 cudaMemcpyDeviceToDevice);
      e != cudaSuccess) {
    return CudaError(e, "cudaMemcpy (inside the CUDA region)");
  }
  return absl::OkStatus();
}

}  // namespace specverify::client
