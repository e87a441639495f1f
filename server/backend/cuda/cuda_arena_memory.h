// The KV arena in device memory: one cudaMalloc at start-up. The executor
// packs accepted rows straight into it (Batch::packed_kv is a device
// pointer); FetchKv reads ranges back through a pinned bounce buffer on the
// arena's own stream, so reads never queue behind batches.
//
// Thread safety: CopyToHost is serialized by a mutex (one bounce buffer).
// The arena hands a range out for reading only after its batch completed,
// i.e. after the executor synchronized the event that follows the pack.
#ifndef SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_ARENA_MEMORY_H_
#define SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_ARENA_MEMORY_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/common/cuda_status.h"
#include "server/arena/arena_memory.h"

namespace specverify::server {

class CudaArenaMemory final : public ArenaMemory {
 public:
  // RESOURCE_EXHAUSTED naming --kv_arena_bytes when the device cannot hold
  // `bytes`; kInternal for any other CUDA error.
  static absl::StatusOr<std::unique_ptr<CudaArenaMemory>> Create(
      int device_ordinal, int64_t bytes, int64_t bounce_bytes = int64_t{4} << 20);
  ~CudaArenaMemory() override;

  std::byte* base() override { return device_.as<std::byte>(); }
  int64_t size_bytes() const override { return size_; }
  std::string kind() const override;
  absl::Status CopyToHost(int64_t offset, int64_t bytes, std::byte* dst) override;

 private:
  CudaArenaMemory(int device_ordinal, int64_t size) : ordinal_(device_ordinal), size_(size) {}

  const int ordinal_;
  const int64_t size_;
  DeviceBuffer device_;
  absl::Mutex mu_;
  PinnedBuffer bounce_ ABSL_GUARDED_BY(mu_);
  cudaStream_t stream_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_ARENA_MEMORY_H_
