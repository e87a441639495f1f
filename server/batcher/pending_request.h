// A validated request waiting in the batcher, with everything needed to
// answer it from whichever thread completes it.
#ifndef SPECVERIFY_SERVER_BATCHER_PENDING_REQUEST_H_
#define SPECVERIFY_SERVER_BATCHER_PENDING_REQUEST_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/regions/region_refs.h"
#include "server/batcher/validated_request.h"
#include "specverify/v1/verifier.pb.h"

namespace specverify::server {

struct PendingRequest {
  // Valid until `done` has run (owned by the RPC layer).
  const v1::VerifyRequest* request = nullptr;
  // Filled (results, kv, timing except server_ns, verified, exact) before
  // done(OK); untouched otherwise.
  v1::VerifyResponse* response = nullptr;
  ValidatedRequest shape;
  // The client identity that owns a KV handle published for this request
  // (the mTLS peer identity; empty without mutual TLS).
  std::string owner;
  // The request's TensorRefs resolved (addresses in the backend's space) and
  // its holds on the regions, released when the request is destroyed after
  // its answer: a region is never unmapped under it.
  ResolvedRegions regions;
  // The account of per-client limits and fair batching (issue #15): the
  // mTLS peer identity, else the peer address with its port, i.e. one
  // connection (VerifierService::ClientKey).
  std::string client;
  // Arena bytes charged to `client`'s quota while the request is queued or
  // running (its rows' upper bound); set and given back by the batcher.
  int64_t arena_charge = 0;
  // Payload bytes the batch builder copied from `request` into staging.
  int64_t host_copy_in_bytes = 0;
  absl::Time arrival;                          // at the batcher, batcher clock
  absl::Time deadline = absl::InfiniteFuture();
  // True once the client gave up; may be empty. Polled only while queued.
  std::function<bool()> is_cancelled;
  // Runs exactly once, on a batcher or backend thread, never under a lock.
  std::function<void(absl::Status)> done;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BATCHER_PENDING_REQUEST_H_
