// Validation of requests at the edge: pure functions, no state. Every
// violation is INVALID_ARGUMENT naming the field (with its sequence index)
// and the limit; nothing invalid reaches the batcher. For sampled drafts the
// values inside the distribution rows are the one thing not checked here:
// the verifier checks the elements it reads and answers INVALID_ARGUMENT
// naming the sequence and position (docs/SAMPLING.md).
#ifndef SPECVERIFY_SERVER_RPC_VALIDATION_H_
#define SPECVERIFY_SERVER_RPC_VALIDATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/tree/tree_params.h"
#include "server/common/data_type.h"
#include "server/backend/batch.h"
#include "server/batcher/validated_request.h"
#include "specverify/v1/verifier.pb.h"

namespace specverify::server {

inline constexpr int64_t kMaxRequestIdBytes = 128;
// FetchKv chunks are at least this large: a request asking for less (1 byte
// meant one gRPC message per byte) is raised to it. --fetch_chunk_bytes has
// the same minimum.
inline constexpr int64_t kMinFetchChunkBytes = 4096;
// Distribution rows in a region are read in place with 16-byte loads: their
// TensorRef.offset_bytes must be a multiple of this.
inline constexpr int64_t kRegionRowAlign = 16;

struct RequestLimits {
  int32_t max_sequences_per_request = 256;
  int32_t max_draft_tokens = kMaxDraftTokens;
  // Nodes of one token tree (docs/TREES.md); at most kMaxTreeNodes.
  int32_t max_tree_nodes = kDefaultMaxTreeNodes;
  // Largest payload (ValidatedRequest::payload_bytes) of a sampled request;
  // 0 = unbounded. A server sets it to what its backend can stage for one
  // batch (the CUDA executor: max(--max_batch_bytes, --max_message_bytes)).
  int64_t max_sampled_request_bytes = 0;
};

absl::StatusOr<ValidatedRequest> ValidateVerifyRequest(
    const v1::VerifyRequest& request, const RequestLimits& limits);

// request_id: at most kMaxRequestIdBytes (checked before anything echoes it).
absl::Status ValidateRequestId(absl::string_view request_id);

// A KV handle sent by a client (FetchKv, ReleaseKv): non-empty and in the
// arena's format, kHandleIdChars lowercase hex digits; the message quotes a
// malformed handle only up to a bound (server/common/echo.h).
absl::Status ValidateHandleField(absl::string_view handle);

// The handle field and row range of a FetchKvRequest (its rows are checked
// against the handle later).
absl::Status ValidateFetchKvRequest(const v1::FetchKvRequest& request);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_RPC_VALIDATION_H_
