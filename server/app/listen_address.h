// --listen_address taken by one server only.
//
// gRPC 1.51 does not refuse a second server on a taken address: on TCP it
// sets SO_REUSEPORT, so a second instance binds the same port and the kernel
// splits new connections between the two (a worker whose channel reconnects
// lands on the server that holds neither its KV handles nor its regions); on
// a `unix:` path it unlinks whatever socket is there and binds anew, so the
// first server keeps running unreachable, and when it stops it unlinks the
// second one's socket. The server therefore turns SO_REUSEPORT off
// (EffectiveGrpcArgs) and checks the address itself, before it initializes
// any device (a second instance must not take GPU memory from the first)
// and again right before gRPC binds. Two servers starting on one unix: path
// at once pass both checks; socket_path_lock.h stops the later one.
#ifndef SPECVERIFY_SERVER_APP_LISTEN_ADDRESS_H_
#define SPECVERIFY_SERVER_APP_LISTEN_ADDRESS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace specverify::server {

// The addresses of a --listen_address value: comma-separated, each host:port
// or unix:PATH (e.g. "0.0.0.0:50051,unix:/run/specverify/verifier.sock": TCP
// for remote workers and Kubernetes' gRPC probes, the socket for co-located
// workers). Whitespace around an item is dropped, empty items skipped.
std::vector<std::string> ListenAddresses(absl::string_view flag_value);

// The filesystem path of a "unix:PATH" or "unix:///ABSOLUTE" address; none
// for host:port.
std::optional<std::string> UnixSocketPath(absl::string_view address);

// OK unless another process listens on `address` (one item of
// ListenAddresses): a unix: path a connect()
// reaches (a socket file nobody listens on is stale, and gRPC replaces it),
// or a host:port (port > 0) one of whose resolved addresses a plain bind
// finds in use. UNAVAILABLE otherwise, naming the flag and the address.
// Anything else that stops the bind (no such directory, a host of another
// machine) is left to gRPC, which reports it when it binds.
absl::Status CheckListenAddressFree(absl::string_view address);

// What a client on this host dials to reach a server listening on `address`
// with the bound `port`: the unix: address itself, else 127.0.0.1:port.
std::string LocalDialAddress(absl::string_view address, int port);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_APP_LISTEN_ADDRESS_H_
