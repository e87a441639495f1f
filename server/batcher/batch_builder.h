// Staging: copies the sequences of validated requests into one contiguous
// ragged batch (kernels/layout/ragged_batch.h) inside the backend's staging
// memory. This is the one host copy of a request's payload (tokens, KV rows,
// distribution rows): from the received message straight into staging
// (pinned memory for CUDA), with no vector in between. Each request's
// PendingRequest::host_copy_in_bytes says how many bytes it took.
#ifndef SPECVERIFY_SERVER_BATCHER_BATCH_BUILDER_H_
#define SPECVERIFY_SERVER_BATCHER_BATCH_BUILDER_H_

#include <memory>
#include <span>

#include "absl/status/status.h"
#include "server/backend/batch.h"
#include "server/batcher/pending_request.h"

namespace specverify::server {

// The staging a batch of these requests needs.
// REQUIRES: every request passed ValidateVerifyRequest and has `key`.
StagingShape StagingShapeOf(std::span<const std::unique_ptr<PendingRequest>> requests,
                            const BatchKey& key);

// Greedy: offsets, draft and target tokens and KV rows into batch->inputs.
// Sampled: offsets, draft tokens and KV rows into batch->inputs
// (target_tokens left for the backend's greedy_target_tokens), distribution
// rows and per-sequence parameters (request seed, index within the request,
// temperature, top-k, top-p with the proto's 0 mapped to 1) into
// batch->sampled.
// REQUIRES: batch->inputs/sampled view staging of StagingShapeOf(requests,
// key) (Backend::AcquireStaging); every request has `key`.
void BuildBatchInputs(std::span<const std::unique_ptr<PendingRequest>> requests,
                      const BatchKey& key, Batch* batch);

// How the request whose sequences are [first_sequence, first_sequence + n)
// of a completed batch is answered: OK, or (sampled batches only) the
// INVALID_ARGUMENT of its first sequence the verifier refused, naming the
// sequence's index within the request and the position.
absl::Status RequestOutcomeStatus(const Batch& batch, int32_t first_sequence, int32_t n);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BATCHER_BATCH_BUILDER_H_
