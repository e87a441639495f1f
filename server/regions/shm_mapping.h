// POSIX shared memory mapped into this process (the system regions of the
// data plane). The worker creates and owns the object; the server opens it
// by name, maps the registered range, and closes the descriptor at once: the
// mapping keeps the pages alive even if the worker unlinks the object or
// exits, so a region is never freed under a request that uses it.
#ifndef SPECVERIFY_SERVER_REGIONS_SHM_MAPPING_H_
#define SPECVERIFY_SERVER_REGIONS_SHM_MAPPING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace specverify::server {

class ShmMapping {
 public:
  // Maps [offset, offset + bytes) of /dev/shm/<name> read-write. Errors name
  // the field: INVALID_ARGUMENT for a bad name, NOT_FOUND for a missing
  // object, OUT_OF_RANGE past the object's end, PERMISSION_DENIED.
  static absl::StatusOr<std::unique_ptr<ShmMapping>> Map(const std::string& name, int64_t offset,
                                                          int64_t bytes);
  ~ShmMapping();
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;

  std::byte* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  ShmMapping(void* base, size_t length, std::byte* data, int64_t size)
      : base_(base), length_(length), data_(data), size_(size) {}
  void* base_;      // page-aligned start of the mmap
  size_t length_;
  std::byte* data_;  // the registered offset
  int64_t size_;
};

// The shm_name rule of the API: 1..255 characters, no '/', not "." or "..".
bool IsValidShmName(const std::string& name);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_REGIONS_SHM_MAPPING_H_
