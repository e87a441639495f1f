// A greedy workload staged into a backend the way the batcher stages
// requests: the backend's own staging (Backend::AcquireStaging), the arrays
// copied in, the lease held by the batch. Backend tests use it so that they
// exercise the memory the server really runs on (pinned slots for CUDA).
#ifndef SPECVERIFY_TESTS_SERVER_TESTING_STAGED_BATCH_H_
#define SPECVERIFY_TESTS_SERVER_TESTING_STAGED_BATCH_H_

#include <algorithm>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/workload/greedy_workload.h"
#include "server/backend/backend.h"

namespace specverify::server::testing {

// `packed_kv` is where the backend packs the accepted rows (null when the
// workload has no rows).
inline absl::StatusOr<std::unique_ptr<Batch>> StageGreedyWorkload(Backend& backend,
                                                                  const GreedyWorkload& w,
                                                                  std::byte* packed_kv,
                                                                  uint64_t id = 0) {
  auto batch = std::make_unique<Batch>();
  batch->id = id;
  batch->key.row_bytes = w.row_bytes();
  StagingShape shape;
  shape.sequences = w.num_sequences();
  shape.draft_rows = w.total_draft_rows();
  shape.kv_bytes = static_cast<int64_t>(w.draft_kv.size());
  absl::StatusOr<std::unique_ptr<StagingLease>> lease = backend.AcquireStaging(shape, batch.get());
  if (!lease.ok()) return lease.status();
  batch->staging = *std::move(lease);
  GreedyHostInputs& in = batch->inputs;
  std::copy(w.draft_offsets.begin(), w.draft_offsets.end(), in.draft_offsets.begin());
  std::copy(w.draft_tokens.begin(), w.draft_tokens.end(), in.draft_tokens.begin());
  std::copy(w.target_tokens.begin(), w.target_tokens.end(), in.target_tokens.begin());
  std::copy(w.draft_kv.begin(), w.draft_kv.end(), in.draft_kv.begin());
  in.row_bytes = w.row_bytes();
  batch->packed_kv = w.row_bytes() > 0 ? packed_kv : nullptr;
  return batch;
}

}  // namespace specverify::server::testing

#endif  // SPECVERIFY_TESTS_SERVER_TESTING_STAGED_BATCH_H_
