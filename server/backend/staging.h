// Staging: the host memory one batch's inputs are copied into, and the one
// layout every backend uses for it (DESIGN.md "Data plane": inline payloads
// are copied once on the host, into the backend's staging).
//
// The batcher asks the backend for staging sized for the batch it formed
// (Backend::AcquireStaging), and the batch builder copies each request's
// payload straight from the received message into it. Batch::inputs and
// Batch::sampled then view that memory. The CUDA executor hands out a slot's
// pinned buffers, so what the builder wrote is what the H2D copy moves; the
// CPU and no-op backends hand out reusable host buffers that their
// reference code reads in place.
//
// Layout: two sections, each a run of arrays starting on 256-byte boundaries
// (so every array is aligned for vector loads and the device copy of a
// section is one memcpy):
//   inputs:  draft_offsets[b+1] | draft_tokens[rows] | target_tokens[rows+b]
//            | parent_indices[rows] (tree batches) | kv_sources[b] | deliveries[d]
//            | packed_offsets[b+1] (greedy chains)
//            | copy_sources[b] (greedy chains with deliveries; sampled
//              chains with KV rows) | copy_destinations[b] (those, and tree
//              batches with KV rows and deliveries) | copy_origins[b]
//              (sampled chains with KV rows; trees as above) | draft_kv
//   sampled: sequence params[b] | target_rows[rows+b] | draft_rows[rows]
//            | target values | draft values   (sampled batches)
// The data plane's tables (docs/DATA_PLANE.md) take no bytes unless the batch
// uses regions: kv_sources (each sequence's KV rows in a region; the backend
// gathers them into draft_kv, so the host fills the section only up to
// draft_kv), deliveries (KV_RETURN_REGION outputs), and the row tables of
// distribution rows read in place (then no values are staged).
// packed_offsets is written by the CUDA executor, not the builder: a greedy
// chain batch is decided on the host (kernels/greedy/greedy_planned_pack.h)
// and the device copies read where each sequence's accepted rows go. So are
// copy_sources / copy_destinations, when such a batch has KV_RETURN_REGION
// requests: one row gather then copies each sequence's accepted rows from
// where they are staged (or in their region) straight to where they are
// answered (the request's kv_output, or the packed buffer for the others).
// A sampled chain batch with KV rows has the same plan plus copy_origins,
// since its accepted lengths are known on the device only: one copy after
// the sampler places each sequence's rows after those of the earlier
// sequences from its origin on (kernels/layout/row_copy.h,
// AcceptedRowCopyParams); its rows are never gathered or packed. A tree
// batch with KV rows and KV_RETURN_REGION requests stages the destinations
// and origins only: its pack writes those requests' rows into their outputs
// (kernels/tree/tree_params.h, TreeRowDestinations) instead of a delivery
// copying them out of the packed buffer.
#ifndef SPECVERIFY_SERVER_BACKEND_STAGING_H_
#define SPECVERIFY_SERVER_BACKEND_STAGING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace specverify::server {

struct Batch;

// What a batch needs staged.
struct StagingShape {
  int32_t sequences = 0;
  int64_t draft_rows = 0;
  int64_t kv_bytes = 0;            // draft_rows * row_bytes
  bool sampled = false;
  int64_t target_value_bytes = 0;  // sampled: (rows + b) * V * dtype bytes
  int64_t draft_value_bytes = 0;   // sampled with draft rows: rows * V * dtype bytes
  // Data plane.
  bool kv_from_regions = false;     // kv_sources[b]; draft_kv is gathered by the backend
  int32_t deliveries = 0;           // requests with KV_RETURN_REGION
  bool values_from_regions = false; // row tables instead of staged values (sampled)
  bool draft_rows_from_regions = false;  // ... with draft probabilities
  bool tree = false;                // parent_indices[rows] (docs/TREES.md)
};

inline constexpr int64_t kStagingAlign = 256;
inline int64_t StagingAlignUp(int64_t x) {
  return (x + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
}

// Byte offsets of every array inside the two sections. Monotone in the shape,
// so the layout of the largest batch bounds every smaller one.
struct StagingLayout {
  int64_t offsets = 0, draft_tokens = 0, target_tokens = 0, parent_indices = 0, kv_sources = 0,
          deliveries = 0, packed_offsets = 0, copy_sources = 0, copy_destinations = 0,
          copy_origins = 0, draft_kv = 0, inputs_total = 0;
  // The part of the inputs section the batch builder writes: all of it, or
  // up to draft_kv when the backend gathers the KV rows from regions.
  int64_t inputs_host_filled = 0;
  int64_t sequences = 0, target_rows = 0, draft_rows = 0, target_values = 0, draft_values = 0,
          sampled_total = 0;
};
StagingLayout LayoutStaging(const StagingShape& shape);

// Whether a batch of this shape stages the sampled chains' copy plan
// (copy_sources, copy_destinations, copy_origins): a sampled chain batch
// with KV rows.
bool SampledChainCopiesAcceptedRows(const StagingShape& shape);

// Whether a batch of this shape stages the trees' row destinations
// (copy_destinations, copy_origins): a tree batch with KV rows and
// KV_RETURN_REGION requests.
bool TreeAnswersRowsInRegions(const StagingShape& shape);

// Held by a Batch for as long as its arrays are in use; destroying it gives
// the memory back to the backend (a CUDA slot: its pinned and device
// buffers, streams and scratch, for the next batch).
class StagingLease {
 public:
  virtual ~StagingLease() = default;
};

// Points batch->inputs and batch->sampled at the sections (sampled may be
// null for a greedy shape) and sets their sizes from `shape`.
void ViewStagedBatch(const StagingShape& shape, std::byte* inputs_section,
                     std::byte* sampled_section, Batch* batch);

// Host staging for the CPU and no-op backends: one buffer per batch in
// flight, grown to the largest batch seen and then reused, so steady-state
// batches allocate nothing.
class HostStagingPool {
 public:
  explicit HostStagingPool(int buffers);
  // Sizes a free buffer for `shape` and views `batch` into it. The batcher
  // never holds more leases than buffers; if it did this would block.
  absl::StatusOr<std::unique_ptr<StagingLease>> Acquire(const StagingShape& shape,
                                                        Batch* batch);

 private:
  class Lease;
  void Release(std::vector<std::byte>* buffer);

  absl::Mutex mu_;
  std::vector<std::unique_ptr<std::vector<std::byte>>> buffers_;
  std::vector<std::vector<std::byte>*> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_STAGING_H_
