#include "server/backend/cuda/cuda_arena_memory.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace specverify::server {

absl::StatusOr<std::unique_ptr<CudaArenaMemory>> CudaArenaMemory::Create(
    int device_ordinal, int64_t bytes, int64_t bounce_bytes) {
  if (bytes < 0 || bounce_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "arena size is ", bytes, " bytes and bounce buffer ", bounce_bytes,
        " bytes; must be >= 0 and >= 1"));
  }
  SV_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_ordinal));
  std::unique_ptr<CudaArenaMemory> memory(new CudaArenaMemory(device_ordinal, bytes));
  if (bytes > 0) {
    absl::StatusOr<DeviceBuffer> device = DeviceBuffer::Create(static_cast<size_t>(bytes));
    if (!device.ok()) {
      (void)cudaGetLastError();  // out-of-memory is not sticky; keep the context clean
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot reserve ", bytes, " bytes of device memory on cuda:", device_ordinal,
          " for the KV arena (", device.status().message(),
          "); lower --kv_arena_bytes"));
    }
    memory->device_ = *std::move(device);
    // Zeroed once so a fetch of a range never returns another process's bytes.
    SV_CUDA_RETURN_IF_ERROR(cudaMemset(memory->device_.data(), 0, static_cast<size_t>(bytes)));
  }
  absl::MutexLock lock(&memory->mu_);
  SV_ASSIGN_OR_RETURN(memory->bounce_, PinnedBuffer::Create(static_cast<size_t>(
                                           std::min(bounce_bytes, std::max<int64_t>(bytes, 1)))));
  SV_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&memory->stream_, cudaStreamNonBlocking));
  return memory;
}

CudaArenaMemory::~CudaArenaMemory() {
  absl::MutexLock lock(&mu_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

std::string CudaArenaMemory::kind() const { return absl::StrCat("cuda:", ordinal_); }

absl::Status CudaArenaMemory::CopyToHost(int64_t offset, int64_t bytes, std::byte* dst) {
  if (offset < 0 || bytes < 0 || offset + bytes > size_) {
    return absl::OutOfRangeError(absl::StrCat("copy of [", offset, ", ", offset + bytes,
                                              ") outside the arena of ", size_, " bytes"));
  }
  if (bytes == 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  // The caller is a gRPC thread: make the arena's device current for it.
  SV_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
  const int64_t chunk = static_cast<int64_t>(bounce_.size());
  for (int64_t done = 0; done < bytes; done += chunk) {
    const int64_t n = std::min(chunk, bytes - done);
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(bounce_.data(), device_.as<std::byte>() + offset + done,
                                            static_cast<size_t>(n), cudaMemcpyDeviceToHost,
                                            stream_));
    SV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    std::memcpy(dst + done, bounce_.data(), static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace specverify::server
