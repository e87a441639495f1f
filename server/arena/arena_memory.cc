#include "server/arena/arena_memory.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace specverify::server {
namespace {
constexpr int64_t kPageBytes = 4096;
}  // namespace

absl::StatusOr<std::unique_ptr<HostArenaMemory>> HostArenaMemory::Create(
    int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("arena size is ", bytes, " bytes; must be >= 0"));
  }
  const int64_t rounded = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  std::byte* base = nullptr;
  if (rounded > 0) {
    base = static_cast<std::byte*>(
        std::aligned_alloc(kPageBytes, static_cast<size_t>(rounded)));
    if (base == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot reserve ", bytes, " bytes of host memory for the KV arena"));
    }
    std::memset(base, 0, static_cast<size_t>(rounded));
  }
  return std::unique_ptr<HostArenaMemory>(new HostArenaMemory(base, bytes));
}

HostArenaMemory::~HostArenaMemory() { std::free(base_); }

absl::Status HostArenaMemory::CopyToHost(int64_t offset, int64_t bytes,
                                         std::byte* dst) {
  if (offset < 0 || bytes < 0 || offset + bytes > size_) {
    return absl::OutOfRangeError(absl::StrCat("copy of [", offset, ", ",
                                              offset + bytes,
                                              ") outside the arena of ", size_,
                                              " bytes"));
  }
  if (bytes > 0) std::memcpy(dst, base_ + offset, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

}  // namespace specverify::server
