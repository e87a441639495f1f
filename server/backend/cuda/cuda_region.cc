#include "server/backend/cuda/cuda_region.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/cuda_status.h"
#include "server/regions/shm_mapping.h"

namespace specverify::server {
namespace {

// cuMemGetAddressRange through the runtime's entry-point lookup: the size of
// the exported allocation, so a region cannot reach past it. The driver API
// is reached this way to avoid linking libcuda (the runtime is static).
using GetAddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

absl::StatusOr<size_t> AllocationBytesFrom(void* base) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  // 12000: the CUDA 12 ABI of the symbol (cuMemGetAddressRange_v2).
  cudaError_t e = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000,
                                                   cudaEnableDefault, &found);
  if (e != cudaSuccess || fn == nullptr || found != cudaDriverEntryPointSuccess) {
    return CudaStatus(e == cudaSuccess ? cudaErrorNotSupported : e,
                      "cudaGetDriverEntryPointByVersion(cuMemGetAddressRange)");
  }
  CUdeviceptr start = 0;
  size_t bytes = 0;
  if (CUresult r = reinterpret_cast<GetAddressRangeFn>(fn)(&start, &bytes,
                                                          reinterpret_cast<CUdeviceptr>(base));
      r != CUDA_SUCCESS) {
    return absl::InternalError(absl::StrCat("cuMemGetAddressRange failed (CUresult ", r, ")"));
  }
  return bytes - static_cast<size_t>(reinterpret_cast<CUdeviceptr>(base) - start);
}

class CudaIpcMapping final : public RegionMapping {
 public:
  CudaIpcMapping(void* base, std::byte* address, int device)
      : base_(base), address_(address), device_(device) {}
  ~CudaIpcMapping() override {
    // Outstanding work on it has completed: the last request's answer was
    // sent after its batch's completion event. A destructor has no one to
    // report a failure to (it fails only with the device, which the executor
    // reports).
    (void)cudaSetDevice(device_);
    (void)cudaIpcCloseMemHandle(base_);
  }
  std::byte* address() const override { return address_; }
  int32_t device_ordinal() const override { return device_; }

 private:
  void* base_;
  std::byte* address_;
  int device_;
};

// Shared memory pinned and mapped into the device's address space: kernels
// read inputs and write region returns there over PCIe/C2C, no staging.
class MappedShmMapping final : public RegionMapping {
 public:
  MappedShmMapping(std::unique_ptr<ShmMapping> shm, std::byte* device_view, int device)
      : shm_(std::move(shm)), device_view_(device_view), device_(device) {}
  ~MappedShmMapping() override {
    (void)cudaSetDevice(device_);  // best effort, as ~CudaIpcMapping
    (void)cudaHostUnregister(shm_->data());
  }
  std::byte* address() const override { return device_view_; }
  int32_t device_ordinal() const override { return -1; }

 private:
  std::unique_ptr<ShmMapping> shm_;
  std::byte* device_view_;
  int device_;
};

absl::StatusOr<std::unique_ptr<RegionMapping>> MapCuda(const RegionSpec& spec, int device) {
  if (spec.device_ordinal != device) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda.device_ordinal is ", spec.device_ordinal, "; this server's executor runs on cuda:",
        device, " (a CUDA region must live on the server's device)"));
  }
  if (spec.ipc_handle.size() != sizeof(cudaIpcMemHandle_t)) {
    return absl::InvalidArgumentError(absl::StrCat("cuda.ipc_handle is ", spec.ipc_handle.size(),
                                                   " bytes; a cudaIpcMemHandle_t is ",
                                                   sizeof(cudaIpcMemHandle_t)));
  }
  if (spec.offset_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda.offset_bytes is ", spec.offset_bytes, "; must be >= 0"));
  }
  cudaIpcMemHandle_t handle;
  std::memcpy(&handle, spec.ipc_handle.data(), sizeof(handle));
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    return CudaStatus(e, "cudaSetDevice (region)");
  }
  void* base = nullptr;
  if (cudaError_t e = cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
      e != cudaSuccess) {
    cudaGetLastError();  // not sticky: leave no error for the next call on this thread
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda.ipc_handle could not be opened (", cudaGetErrorString(e),
        "): export it with cudaIpcGetMemHandle from a live process on this host"));
  }
  absl::StatusOr<size_t> allocation = AllocationBytesFrom(base);
  if (!allocation.ok() || spec.offset_bytes > static_cast<int64_t>(*allocation) ||
      spec.byte_size > static_cast<int64_t>(*allocation) - spec.offset_bytes) {
    (void)cudaIpcCloseMemHandle(base);  // the error below is the one to report
    if (!allocation.ok()) return allocation.status();
    return absl::OutOfRangeError(absl::StrCat(
        "cuda: offset_bytes ", spec.offset_bytes, " + byte_size ", spec.byte_size,
        " exceeds the exported allocation of ", *allocation, " bytes"));
  }
  return std::unique_ptr<RegionMapping>(
      new CudaIpcMapping(base, static_cast<std::byte*>(base) + spec.offset_bytes, device));
}

absl::StatusOr<std::unique_ptr<RegionMapping>> MapShm(const RegionSpec& spec, int device) {
  absl::StatusOr<std::unique_ptr<ShmMapping>> shm =
      ShmMapping::Map(spec.shm_name, spec.offset_bytes, spec.byte_size);
  if (!shm.ok()) return shm.status();
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    return CudaStatus(e, "cudaSetDevice (region)");
  }
  std::byte* host = (*shm)->data();
  if (cudaError_t e = cudaHostRegister(host, static_cast<size_t>(spec.byte_size),
                                       cudaHostRegisterMapped | cudaHostRegisterPortable);
      e != cudaSuccess) {
    cudaGetLastError();
    return absl::InvalidArgumentError(absl::StrCat(
        "system region could not be registered with cuda:", device, " (", cudaGetErrorString(e),
        ")"));
  }
  void* view = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(&view, host, 0); e != cudaSuccess) {
    (void)cudaHostUnregister(host);  // the error below is the one to report
    return CudaStatus(e, "cudaHostGetDevicePointer (system region)");
  }
  return std::unique_ptr<RegionMapping>(
      new MappedShmMapping(*std::move(shm), static_cast<std::byte*>(view), device));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RegionMapping>> MapCudaExecutorRegion(const RegionSpec& spec,
                                                                     int device_ordinal) {
  return spec.kind == RegionKind::kCuda ? MapCuda(spec, device_ordinal)
                                        : MapShm(spec, device_ordinal);
}

}  // namespace specverify::server
