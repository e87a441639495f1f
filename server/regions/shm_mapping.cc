#include "server/regions/shm_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/common/echo.h"

namespace specverify::server {

bool IsValidShmName(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && name != "." && name != "..";
}

absl::StatusOr<std::unique_ptr<ShmMapping>> ShmMapping::Map(const std::string& name,
                                                            int64_t offset, int64_t bytes) {
  if (!IsValidShmName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "system.shm_name ", EchoForMessage(name),
        " is not a shared-memory object name (1-255 characters, no '/')"));
  }
  if (offset < 0 || bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("system.offset_bytes ", offset,
                                                   " and byte_size ", bytes,
                                                   " must be >= 0 and > 0"));
  }
  const std::string path = "/" + name;
  const int fd = shm_open(path.c_str(), O_RDWR, 0);
  if (fd < 0) {
    const int err = errno;
    const std::string what = absl::StrCat("shm_open(", EchoForMessage(path), "): ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat("system.shm_name: ", what));
    if (err == EACCES) return absl::PermissionDeniedError(absl::StrCat("system.shm_name: ", what));
    return absl::InvalidArgumentError(absl::StrCat("system.shm_name: ", what));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("fstat of shared memory ", EchoForMessage(path), ": ",
                                            std::strerror(err)));
  }
  if (offset > st.st_size || bytes > st.st_size - offset) {
    close(fd);
    return absl::OutOfRangeError(absl::StrCat(
        "system: offset_bytes ", offset, " + byte_size ", bytes, " exceeds the ", st.st_size,
        "-byte shared-memory object ", EchoForMessage(path)));
  }
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int64_t map_offset = offset / page * page;
  const size_t length = static_cast<size_t>(offset - map_offset + bytes);
  void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, map_offset);
  const int err = errno;
  close(fd);  // the mapping holds the object
  if (base == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("mmap of shared memory ", EchoForMessage(path), ": ",
                                            std::strerror(err)));
  }
  auto* data = static_cast<std::byte*>(base) + (offset - map_offset);
  return std::unique_ptr<ShmMapping>(new ShmMapping(base, length, data, bytes));
}

ShmMapping::~ShmMapping() { munmap(base_, length_); }

}  // namespace specverify::server
