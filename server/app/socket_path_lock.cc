#include "server/app/socket_path_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace specverify::server {
namespace {

// The owner and the file's group may take the lock (the group only by
// reading: enough for flock); other users cannot open the file, so they
// cannot hold a server off by locking it.
constexpr mode_t kLockFileMode = 0640;

absl::Status CannotLock(absl::string_view address, const std::string& lock_path, int error) {
  return absl::FailedPreconditionError(absl::StrCat("cannot lock ", lock_path, " for ", address,
                                                    " (--listen_address): ", std::strerror(error)));
}

}  // namespace

std::string SocketLockPath(absl::string_view socket_path) { return absl::StrCat(socket_path, ".lock"); }

absl::StatusOr<SocketPathLock> SocketPathLock::Acquire(absl::string_view address,
                                                       absl::string_view socket_path) {
  std::string lock_path = SocketLockPath(socket_path);
  // A holder unlinks the file before it lets go (Release), so a lock taken
  // on a file opened just before that unlink is a lock on nothing: it counts
  // only if the path still names the locked file; otherwise open again.
  for (int attempt = 0; attempt < 16; ++attempt) {
    int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, kLockFileMode);
    // A file another user's server left (it was killed) opens for reading
    // only, which is all flock needs: a restart by a member of the file's
    // group is not stuck behind it. If that fails too, the first refusal is
    // the one to report (a directory the server may not write into leaves
    // no file to open: ENOENT would hide it).
    if (fd < 0 && errno == EACCES) {
      fd = open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) return CannotLock(address, lock_path, EACCES);
    }
    if (fd < 0) return CannotLock(address, lock_path, errno);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      close(fd);
      if (error == EWOULDBLOCK) {
        return absl::UnavailableError(absl::StrCat(
            "cannot listen on ", address, " (--listen_address): another process holds ", lock_path,
            " (a server starting or stopping on that socket); stop it or choose another address"));
      }
      return CannotLock(address, lock_path, error);
    }
    struct stat locked {};
    struct stat named {};
    if (fstat(fd, &locked) != 0) {
      const int error = errno;
      close(fd);
      return CannotLock(address, lock_path, error);
    }
    if (stat(lock_path.c_str(), &named) == 0 && named.st_dev == locked.st_dev &&
        named.st_ino == locked.st_ino) {
      return SocketPathLock(fd, std::move(lock_path));
    }
    close(fd);
  }
  return absl::UnavailableError(absl::StrCat("cannot listen on ", address, " (--listen_address): ",
                                             lock_path, " kept being replaced while it was locked"));
}

SocketPathLock::SocketPathLock(SocketPathLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), lock_path_(std::move(other.lock_path_)) {}

SocketPathLock& SocketPathLock::operator=(SocketPathLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::exchange(other.fd_, -1);
    lock_path_ = std::move(other.lock_path_);
  }
  return *this;
}

SocketPathLock::~SocketPathLock() { Release(); }

void SocketPathLock::Release() {
  if (fd_ < 0) return;
  unlink(lock_path_.c_str());
  close(fd_);
  fd_ = -1;
}

}  // namespace specverify::server
