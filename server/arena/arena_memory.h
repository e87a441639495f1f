// The memory behind the KV arena, in whatever space the backend packs into:
// host memory for the CPU and no-op backends, device memory for the CUDA
// executor. The backend allocates it once at start-up
// (Backend::AllocateArenaMemory); the arena only does offset bookkeeping
// over it and asks it to copy ranges out to the host (FetchKv, inline return).
//
// Thread safety: CopyToHost may run concurrently for disjoint or identical
// ranges; callers guarantee that nobody writes a range while it is read
// (the arena hands out a range for reading only after its batch completed).
#ifndef SPECVERIFY_SERVER_ARENA_ARENA_MEMORY_H_
#define SPECVERIFY_SERVER_ARENA_ARENA_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace specverify::server {

class ArenaMemory {
 public:
  virtual ~ArenaMemory() = default;
  // Base address in the backend's memory space (a device pointer for CUDA):
  // the backend packs a batch's rows at base() + offset.
  virtual std::byte* base() = 0;
  virtual int64_t size_bytes() const = 0;
  // "host", "cuda:0", ... for logs and errors.
  virtual std::string kind() const = 0;
  // Copies [offset, offset + bytes) to host memory at `dst`.
  virtual absl::Status CopyToHost(int64_t offset, int64_t bytes,
                                  std::byte* dst) = 0;
};

// Page-aligned host memory, touched once at start-up so the first batches do
// not pay page faults.
class HostArenaMemory final : public ArenaMemory {
 public:
  static absl::StatusOr<std::unique_ptr<HostArenaMemory>> Create(int64_t bytes);
  ~HostArenaMemory() override;

  std::byte* base() override { return base_; }
  int64_t size_bytes() const override { return size_; }
  std::string kind() const override { return "host"; }
  absl::Status CopyToHost(int64_t offset, int64_t bytes, std::byte* dst) override;

 private:
  HostArenaMemory(std::byte* base, int64_t size) : base_(base), size_(size) {}
  std::byte* base_;
  int64_t size_;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_ARENA_ARENA_MEMORY_H_
