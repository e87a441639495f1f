// Staging: copies the sequences of validated requests into one contiguous
// ragged batch (kernels/layout/ragged_batch.h), sized once up front so every
// array is a single allocation.
#ifndef SPECVERIFY_SERVER_BATCHER_BATCH_BUILDER_H_
#define SPECVERIFY_SERVER_BATCHER_BATCH_BUILDER_H_

#include <memory>
#include <span>

#include "server/backend/batch.h"
#include "server/batcher/pending_request.h"

namespace specverify::server {

// REQUIRES: every request passed ValidateVerifyRequest and has `key`.
void BuildGreedyInputs(std::span<const std::unique_ptr<PendingRequest>> requests,
                       const BatchKey& key, GreedyHostInputs* inputs);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BATCHER_BATCH_BUILDER_H_
