#ifndef SPECVERIFY_SERVER_APP_SERVICE_MANAGER_H_
#define SPECVERIFY_SERVER_APP_SERVICE_MANAGER_H_

#include <string_view>

#include "absl/status/status.h"

namespace specverify::server {

// Tells the service manager (systemd with Type=notify) where the server
// stands, e.g. "READY=1\nSTATUS=serving on port 50051": one datagram to the
// unix socket named by $NOTIFY_SOCKET (a path, or '@' for the abstract
// namespace), the protocol of sd_notify(3), without linking libsystemd.
// Without $NOTIFY_SOCKET (not under systemd, or another Type=) it does
// nothing and returns OK. An error names the socket; the server logs it and
// goes on (systemd then times the start out, which the log explains).
absl::Status NotifyServiceManager(std::string_view state);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_APP_SERVICE_MANAGER_H_
