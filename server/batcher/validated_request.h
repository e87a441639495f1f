// What the batcher needs to know about a request that passed validation
// (server/rpc/validation.h produces it): its batch key and sizes. Here, below
// the RPC layer, so that the batcher depends on no RPC code.
#ifndef SPECVERIFY_SERVER_BATCHER_VALIDATED_REQUEST_H_
#define SPECVERIFY_SERVER_BATCHER_VALIDATED_REQUEST_H_

#include <cstdint>

#include "server/backend/batch.h"
#include "specverify/v1/verifier.pb.h"

namespace specverify::server {

// What the batcher needs to know about a valid request.
struct ValidatedRequest {
  BatchKey key;                 // row_bytes/kv_dtype are 0 when no rows are kept
  v1::KvReturn kv_return = v1::KV_RETURN_NONE;  // UNSPECIFIED resolved
  int32_t num_sequences = 0;
  int64_t total_draft_rows = 0;  // sum of gamma
  int64_t payload_bytes = 0;     // tokens + staged (inline) KV and distribution bytes
  // What the device reads for it, inline or in regions: the batcher's
  // measure of a device's work in flight (issue #16, least-loaded dispatch).
  int64_t device_bytes = 0;
  int64_t kv_row_bytes = 0;      // row_bytes of the request's KV, 0 if none
  int32_t kv_dtype = 0;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BATCHER_VALIDATED_REQUEST_H_
