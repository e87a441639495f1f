#include "server/app/listen_address.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace specverify::server {
namespace {

absl::Status InUse(absl::string_view address, absl::string_view how) {
  return absl::UnavailableError(absl::StrCat(
      "cannot listen on ", address, " (--listen_address): another process ", how,
      "; stop it or choose another address"));
}

// A file descriptor closed when the scope ends.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

absl::Status CheckUnixPathFree(absl::string_view address, const std::string& path) {
  sockaddr_un peer{};
  if (path.empty() || path.size() >= sizeof(peer.sun_path)) return absl::OkStatus();
  peer.sun_family = AF_UNIX;
  std::memcpy(peer.sun_path, path.data(), path.size());
  const Socket probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (probe.fd() < 0) return absl::OkStatus();
  if (connect(probe.fd(), reinterpret_cast<const sockaddr*>(&peer), sizeof(peer)) == 0) {
    return InUse(address, "accepts connections on that socket");
  }
  return absl::OkStatus();
}

absl::Status CheckTcpPortFree(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return absl::OkStatus();
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0) return absl::OkStatus();
  absl::string_view host = address.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  const std::string host_string(host);
  const std::string port_string = absl::StrCat(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* resolved = nullptr;
  if (getaddrinfo(host_string.empty() ? nullptr : host_string.c_str(), port_string.c_str(), &hints,
                  &resolved) != 0) {
    return absl::OkStatus();
  }
  absl::Status status = absl::OkStatus();
  for (const addrinfo* a = resolved; a != nullptr && status.ok(); a = a->ai_next) {
    const Socket probe(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (probe.fd() < 0) continue;
    // As gRPC binds: SO_REUSEADDR, so a port held only by connections in
    // TIME_WAIT counts as free, and a listening socket still does not.
    const int one = 1;
    setsockopt(probe.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(probe.fd(), a->ai_addr, a->ai_addrlen) != 0 && errno == EADDRINUSE) {
      status = InUse(address, "listens on that port");
    }
  }
  freeaddrinfo(resolved);
  return status;
}

}  // namespace

std::vector<std::string> ListenAddresses(absl::string_view flag_value) {
  std::vector<std::string> addresses;
  for (absl::string_view item : absl::StrSplit(flag_value, ',', absl::SkipWhitespace())) {
    addresses.emplace_back(absl::StripAsciiWhitespace(item));
  }
  return addresses;
}

std::optional<std::string> UnixSocketPath(absl::string_view address) {
  if (absl::ConsumePrefix(&address, "unix://")) return std::string(address);
  if (absl::ConsumePrefix(&address, "unix:")) return std::string(address);
  return std::nullopt;
}

absl::Status CheckListenAddressFree(absl::string_view address) {
  if (const std::optional<std::string> path = UnixSocketPath(address)) {
    return CheckUnixPathFree(address, *path);
  }
  return CheckTcpPortFree(address);
}

std::string LocalDialAddress(absl::string_view address, int port) {
  if (UnixSocketPath(address).has_value()) return std::string(address);
  return absl::StrCat("127.0.0.1:", port);
}

}  // namespace specverify::server
