// A minimal blocking HTTP/1.0 GET against 127.0.0.1, for tests that scrape
// the exporter or query a Prometheus server (no HTTP client library is
// packaged besides civetweb's server side).
#ifndef SPECVERIFY_TESTS_METRICS_HTTP_GET_H_
#define SPECVERIFY_TESTS_METRICS_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace specverify::testing {

struct HttpResponse {
  int status = 0;
  std::string body;
};

inline absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path_and_query) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to 127.0.0.1:", port));
  }
  const std::string request = absl::StrCat("GET ", path_and_query,
                                           " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return absl::UnavailableError("send() failed");
  }
  std::string raw;
  char buffer[16384];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) raw.append(buffer, n);
  ::close(fd);
  // "HTTP/1.x CODE reason\r\nheaders\r\n\r\nbody"
  const size_t space = raw.find(' ');
  const size_t header_end = raw.find("\r\n\r\n");
  if (space == std::string::npos || header_end == std::string::npos) {
    return absl::DataLossError(absl::StrCat("malformed HTTP response: ", raw.substr(0, 200)));
  }
  HttpResponse response;
  response.status = std::atoi(raw.c_str() + space + 1);
  response.body = raw.substr(header_end + 4);
  return response;
}

// A port that was free a moment ago (bound to 0, read back, closed). Another
// process could take it before the caller binds it; tests accept that race.
inline int PickFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_METRICS_HTTP_GET_H_
