// One server per unix: socket path, with no window between the check and
// the bind.
//
// CheckListenAddressFree (listen_address.h) finds a server that already
// accepts on a path, but two servers that start on one path at the same
// moment can both find it free and both bind (gRPC unlinks whatever socket
// is there first), leaving one of them unreachable. Each server therefore
// holds an exclusive flock on PATH.lock from before it sets up any device
// until it has stopped listening; a second one that cannot take the lock
// exits naming the file. The lock dies with its process, so a crashed
// server leaves nothing that blocks a restart, by its own user or by a
// member of the lock file's group (the file is created 0640; the group
// opens it for reading, which flock allows), as when the socket directory
// is a setgid directory shared by a service group. Other users cannot open
// it, so they cannot hold the lock to keep a server from starting.
#ifndef SPECVERIFY_SERVER_APP_SOCKET_PATH_LOCK_H_
#define SPECVERIFY_SERVER_APP_SOCKET_PATH_LOCK_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace specverify::server {

// The lock file of a socket path: PATH.lock, beside the socket.
std::string SocketLockPath(absl::string_view socket_path);

class SocketPathLock {
 public:
  // Takes the lock of `socket_path` (the path of --listen_address item
  // `address`, for messages), creating the file. UNAVAILABLE if another
  // process holds it; FAILED_PRECONDITION if the file cannot be created or
  // locked (no such directory, no permission), naming the file and why.
  static absl::StatusOr<SocketPathLock> Acquire(absl::string_view address,
                                                absl::string_view socket_path);

  SocketPathLock(SocketPathLock&& other) noexcept;
  SocketPathLock& operator=(SocketPathLock&& other) noexcept;
  SocketPathLock(const SocketPathLock&) = delete;
  SocketPathLock& operator=(const SocketPathLock&) = delete;
  ~SocketPathLock();

  // Removes the lock file while still holding it, then lets go; the next
  // server creates a fresh one. Idempotent.
  void Release();

  bool held() const { return fd_ >= 0; }
  const std::string& lock_path() const { return lock_path_; }

 private:
  SocketPathLock(int fd, std::string lock_path) : fd_(fd), lock_path_(std::move(lock_path)) {}

  int fd_ = -1;
  std::string lock_path_;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_APP_SOCKET_PATH_LOCK_H_
