// Offset-based extent allocator over a fixed range [0, capacity): first fit
// with coalescing of free neighbours. It hands out byte offsets only; the
// memory itself (host or device) lives elsewhere (ArenaMemory).
//
// Any sub-range of an allocation may be freed on its own: the batcher reserves
// a batch's upper bound, the backend packs into it, and afterwards the unused
// tail and the gaps are freed while each request's slice stays allocated as
// its own extent.
//
// Thread safety: not thread-safe; KvArena serializes calls under its mutex.
#ifndef SPECVERIFY_SERVER_ARENA_EXTENT_ALLOCATOR_H_
#define SPECVERIFY_SERVER_ARENA_EXTENT_ALLOCATOR_H_

#include <cstdint>
#include <map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace specverify::server {

class ExtentAllocator {
 public:
  explicit ExtentAllocator(int64_t capacity_bytes);

  // The offset of `bytes` (> 0) free bytes starting at a multiple of
  // `alignment` (a power of two), the lowest such offset (first fit).
  // RESOURCE_EXHAUSTED when no free extent is large enough.
  absl::StatusOr<int64_t> Allocate(int64_t bytes, int64_t alignment = 1);

  // Returns [offset, offset + bytes) to the free set, merging it with free
  // neighbours. INTERNAL (and nothing changes) when any byte of the range is
  // already free or lies outside the capacity: a double free is a bug.
  // Freeing zero bytes is a no-op.
  absl::Status Free(int64_t offset, int64_t bytes);

  int64_t capacity_bytes() const { return capacity_; }
  int64_t used_bytes() const { return capacity_ - free_bytes_; }
  int64_t free_bytes() const { return free_bytes_; }
  // Largest single allocation that would succeed with alignment 1.
  int64_t largest_free_extent() const;
  // Number of free extents (1 when nothing is allocated: coalescing works).
  int64_t free_extent_count() const { return static_cast<int64_t>(free_.size()); }

 private:
  int64_t capacity_;
  int64_t free_bytes_;
  std::map<int64_t, int64_t> free_;  // offset -> length; disjoint, never adjacent
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_ARENA_EXTENT_ALLOCATOR_H_
