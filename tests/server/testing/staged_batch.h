// A greedy workload staged into a backend the way the batcher stages
// requests: the backend's own staging (Backend::AcquireStaging), the arrays
// copied in, the lease held by the batch, and the data plane's tables when
// the rows come from regions or requests return into them. Backend tests use
// it so that they exercise the memory the server really runs on (pinned
// slots for CUDA).
#ifndef SPECVERIFY_TESTS_SERVER_TESTING_STAGED_BATCH_H_
#define SPECVERIFY_TESTS_SERVER_TESTING_STAGED_BATCH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/workload/greedy_workload.h"
#include "server/backend/backend.h"

namespace specverify::server::testing {

// The batch's region tables (batch.h RegionTables), in the backend's address
// space, as the batch builder fills them.
struct StagedRegions {
  // Empty: the KV rows are staged inline. Else [b]: sequence i's rows in its
  // region (the backend reads them there).
  std::vector<const std::byte*> kv_sources;
  // KV_RETURN_REGION outputs (DeliveryFor).
  std::vector<PackedDelivery> deliveries;
};

// `packed_kv` is where the backend packs the accepted rows (null when the
// workload has no rows).
inline absl::StatusOr<std::unique_ptr<Batch>> StageGreedyWorkload(
    Backend& backend, const GreedyWorkload& w, std::byte* packed_kv, uint64_t id = 0,
    const StagedRegions& regions = {}) {
  const bool kv_from_regions = !regions.kv_sources.empty();
  auto batch = std::make_unique<Batch>();
  batch->id = id;
  batch->key.row_bytes = w.row_bytes();
  batch->key.kv_in_regions = kv_from_regions;
  StagingShape shape;
  shape.sequences = w.num_sequences();
  shape.draft_rows = w.total_draft_rows();
  shape.kv_bytes = static_cast<int64_t>(w.draft_kv.size());
  shape.kv_from_regions = kv_from_regions;
  shape.deliveries = static_cast<int32_t>(regions.deliveries.size());
  absl::StatusOr<std::unique_ptr<StagingLease>> lease = backend.AcquireStaging(shape, batch.get());
  if (!lease.ok()) return lease.status();
  batch->staging = *std::move(lease);
  GreedyHostInputs& in = batch->inputs;
  std::copy(w.draft_offsets.begin(), w.draft_offsets.end(), in.draft_offsets.begin());
  std::copy(w.draft_tokens.begin(), w.draft_tokens.end(), in.draft_tokens.begin());
  std::copy(w.target_tokens.begin(), w.target_tokens.end(), in.target_tokens.begin());
  if (kv_from_regions) {
    std::copy(regions.kv_sources.begin(), regions.kv_sources.end(),
              batch->regions.kv_sources.begin());
  } else {
    std::copy(w.draft_kv.begin(), w.draft_kv.end(), in.draft_kv.begin());
  }
  std::copy(regions.deliveries.begin(), regions.deliveries.end(),
            batch->regions.deliveries.begin());
  in.row_bytes = w.row_bytes();
  batch->packed_kv = w.row_bytes() > 0 ? packed_kv : nullptr;
  return batch;
}

// The workload's KV rows as one region holds them, the sequences laid out
// last to first (so a copy that read them in staged order would show);
// `at[i]` is sequence i's byte offset in it.
inline std::vector<std::byte> RowsLastSequenceFirst(const GreedyWorkload& w,
                                                    std::vector<int64_t>* at) {
  std::vector<std::byte> region(w.draft_kv.size());
  at->assign(static_cast<size_t>(w.num_sequences()), 0);
  int64_t next = 0;
  for (int32_t i = w.num_sequences() - 1; i >= 0; --i) {
    const int64_t bytes = int64_t{w.gamma(i)} * w.row_bytes();
    std::copy_n(w.draft_kv.begin() + int64_t{w.draft_offsets[i]} * w.row_bytes(), bytes,
                region.begin() + next);
    (*at)[i] = next;
    next += bytes;
  }
  return region;
}

// The KV_RETURN_REGION output of the request made of sequences
// [first, first + n): room for all their draft rows at `destination`.
inline PackedDelivery DeliveryFor(const GreedyWorkload& w, int32_t first, int32_t n,
                                  std::byte* destination) {
  PackedDelivery d;
  d.first_sequence = first;
  d.num_sequences = n;
  d.max_rows = w.draft_offsets[first + n] - w.draft_offsets[first];
  d.destination = destination;
  return d;
}

}  // namespace specverify::server::testing

#endif  // SPECVERIFY_TESTS_SERVER_TESTING_STAGED_BATCH_H_
