// The execution backend behind the batcher: the CPU reference, the no-op
// transport ceiling, and (next) the CUDA executor all implement this.
//
// Contract:
//  * AllocateArenaMemory is called once at start-up, before any Submit; the
//    batcher packs into that memory (Batch::packed_kv points into it).
//  * AcquireStaging hands out the memory a batch's inputs are copied into
//    (server/backend/staging.h): the batcher acquires it for each batch it
//    forms, copies the requests' payload into it once, and Submits. The
//    lease lives in the Batch and goes back when the batcher destroys the
//    batch after reading its results; the batcher holds at most
//    max_batches_in_flight() leases.
//  * Submit is asynchronous and never blocks on execution: the backend queues
//    the batch and returns. `done` runs exactly once, on a backend thread
//    (never on the caller's), after every result array and every packed row
//    is written, with OK or the error that failed the batch.
//  * The batcher keeps at most max_batches_in_flight() batches submitted and
//    not yet completed, so a device backend can stage batch N+1 while batch
//    N runs (>= 2 for CUDA).
//  * A batch whose key uses regions has RegionTables (batch.h): the backend
//    gathers kv_sources into the draft_kv section before verifying, and
//    writes every delivery's packed rows into its destination before `done`.
//  * A device fault is sticky: once health() is not OK the backend fails every
//    later batch with that status. The batcher takes the device out of
//    service; the server stops serving when it was the last device (or at
//    once with --stop_on_device_failure).
//
// Thread safety: Submit may be called from any thread; the rest are
// thread-safe accessors.
#ifndef SPECVERIFY_SERVER_BACKEND_BACKEND_H_
#define SPECVERIFY_SERVER_BACKEND_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/arena/arena_memory.h"
#include "server/backend/batch.h"
#include "server/backend/staging.h"
#include "server/regions/region.h"

namespace specverify::server {

struct BackendDescription {
  std::string name;          // "cpu", "cuda", "noop" (ServerInfo.backend)
  std::string device_name;   // "NVIDIA H100 80GB HBM3", the CPU model, ...
  // Fused-vs-two-step threshold; -1 and "not applicable" off CUDA.
  int64_t dispatch_threshold_bytes = -1;
  std::string dispatch_threshold_source = "not applicable";
  bool verifies = true;      // false for the no-op backend
  // Packs rows into the arena at Batch::packed_kv (the batcher then reserves
  // arena space and serves handles and inline rows from it). True for every
  // backend here; the no-op backend "packs" all gamma rows of each sequence.
  bool packs = true;
  // Region kinds MapRegion accepts ("system", "cuda"): ServerInfo.region_kinds.
  std::vector<std::string> region_kinds;
};

using BatchDone = std::function<void(std::unique_ptr<Batch> batch, absl::Status status)>;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendDescription Describe() const = 0;
  // Memory the KV arena lives in (host for CPU, device for CUDA).
  virtual absl::StatusOr<std::unique_ptr<ArenaMemory>> AllocateArenaMemory(
      int64_t bytes) = 0;
  virtual int max_batches_in_flight() const = 0;
  // Views batch->inputs (and batch->sampled for a sampled shape) into staging
  // memory of this backend and returns the lease that keeps it. Fails
  // RESOURCE_EXHAUSTED (naming the limits) when the shape cannot fit.
  virtual absl::StatusOr<std::unique_ptr<StagingLease>> AcquireStaging(
      const StagingShape& shape, Batch* batch) = 0;
  // REQUIRES: batch->inputs hold a batch that passed validation; the packed_kv
  // range is reserved for this batch alone.
  virtual void Submit(std::unique_ptr<Batch> batch, BatchDone done) = 0;
  // Maps a registered region (docs/DATA_PLANE.md) into this backend's address
  // space: what its kernels read inputs from and write region returns to.
  // FAILED_PRECONDITION for a kind it cannot map; INVALID_ARGUMENT (naming
  // the field) for memory it cannot use, e.g. a CUDA region of another device.
  virtual absl::StatusOr<std::unique_ptr<RegionMapping>> MapRegion(const RegionSpec& spec) = 0;
  // OK, or the sticky error that took the device out of service.
  virtual absl::Status health() const = 0;
  // Completes every submitted batch, then stops the backend's threads. Later
  // Submits complete with UNAVAILABLE.
  virtual void Shutdown() = 0;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_BACKEND_H_
