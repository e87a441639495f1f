#include "server/app/service_manager.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace specverify::server {

absl::Status NotifyServiceManager(std::string_view state) {
  const char* socket_name = std::getenv("NOTIFY_SOCKET");
  if (socket_name == nullptr || socket_name[0] == '\0') return absl::OkStatus();
  const std::string name(socket_name);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (name[0] != '/' && name[0] != '@') {
    return absl::InvalidArgumentError(
        absl::StrCat("NOTIFY_SOCKET=", name, " is neither a path nor an abstract name ('@')"));
  }
  if (name.size() > sizeof(address.sun_path) - 1) {
    return absl::InvalidArgumentError(absl::StrCat("NOTIFY_SOCKET=", name, " is longer than ",
                                                   sizeof(address.sun_path) - 1, " bytes"));
  }
  std::memcpy(address.sun_path, name.data(), name.size());
  // An abstract name starts with a NUL byte and is not NUL-terminated: its
  // length is part of the address.
  if (name[0] == '@') address.sun_path[0] = '\0';
  const socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());

  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket(AF_UNIX): ", std::strerror(errno)));
  const ssize_t sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                              reinterpret_cast<const sockaddr*>(&address), length);
  const int error = errno;
  close(fd);
  if (sent < 0) {
    return absl::UnavailableError(absl::StrCat("notifying NOTIFY_SOCKET=", name, ": ", std::strerror(error)));
  }
  if (static_cast<size_t>(sent) != state.size()) {
    return absl::InternalError(absl::StrCat("notifying NOTIFY_SOCKET=", name, ": sent ", sent, " of ",
                                            state.size(), " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace specverify::server
