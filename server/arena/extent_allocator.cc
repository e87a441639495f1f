#include "server/arena/extent_allocator.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace specverify::server {

ExtentAllocator::ExtentAllocator(int64_t capacity_bytes)
    : capacity_(capacity_bytes), free_bytes_(capacity_bytes) {
  if (capacity_ > 0) free_.emplace(0, capacity_);
}

absl::StatusOr<int64_t> ExtentAllocator::Allocate(int64_t bytes,
                                                  int64_t alignment) {
  if (bytes <= 0 || alignment <= 0 || (alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "allocation of ", bytes, " bytes with alignment ", alignment,
        "; bytes must be > 0 and alignment a power of two"));
  }
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const int64_t start = it->first;
    const int64_t end = start + it->second;
    const int64_t aligned = (start + alignment - 1) & ~(alignment - 1);
    if (aligned + bytes > end) continue;
    free_.erase(it);
    if (aligned > start) free_.emplace(start, aligned - start);
    if (aligned + bytes < end) free_.emplace(aligned + bytes, end - aligned - bytes);
    free_bytes_ -= bytes;
    return aligned;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "KV arena full: need ", bytes, " contiguous bytes; ", free_bytes_,
      " of ", capacity_, " bytes free, largest free extent ",
      largest_free_extent()));
}

absl::Status ExtentAllocator::Free(int64_t offset, int64_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (offset < 0 || bytes < 0 || offset + bytes > capacity_) {
    return absl::InternalError(absl::StrCat("free of [", offset, ", ",
                                            offset + bytes, ") outside [0, ",
                                            capacity_, ")"));
  }
  // The free extent at or after `offset`, and the one before it.
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first < offset + bytes) {
    return absl::InternalError(absl::StrCat("double free of [", offset, ", ",
                                            offset + bytes, ")"));
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second > offset) {
      return absl::InternalError(absl::StrCat("double free of [", offset, ", ",
                                              offset + bytes, ")"));
    }
  }
  int64_t start = offset;
  int64_t end = offset + bytes;
  if (next != free_.end() && next->first == end) {
    end += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      free_.erase(prev);
    }
  }
  free_.emplace(start, end - start);
  free_bytes_ += bytes;
  return absl::OkStatus();
}

int64_t ExtentAllocator::largest_free_extent() const {
  int64_t largest = 0;
  for (const auto& [offset, length] : free_) largest = std::max(largest, length);
  return largest;
}

}  // namespace specverify::server
